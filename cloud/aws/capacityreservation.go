package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// This file is Karpenter's capacity reservation support (its
// capacityreservation provider, the reserved-capacity offering resolver and
// the reserved launch): the reservations the selector terms select, how
// many instances each can still take, the reserved offerings of the class's
// instance types, and the launch template and fleet settings that launch
// into one.

// reservationTTL is how long a DescribeCapacityReservations answer is
// reused (Karpenter's reservation cache, one minute): it bounds how stale
// the available counts are that the offerings carry.
const reservationTTL = time.Minute

// expiringWindow: a capacity block this close to its end is expiring (EC2
// starts reclaiming its instances 30 minutes before the end; Karpenter
// stops launching into it 10 minutes earlier).
const expiringWindow = 40 * time.Minute

// reservedPriceDivisor makes a reserved offering nearly free (the
// capacity is paid for already) while keeping the on-demand price order of
// the types, as Karpenter prices it.
const reservedPriceDivisor = 10_000_000.0

// reservationState is what the provider remembers of capacity
// reservations: the available instance count of each (synced from EC2,
// decremented by launches, zeroed by capacity errors) and the recent
// DescribeCapacityReservations answers by query.
type reservationState struct {
	mu      sync.Mutex
	counts  map[string]int
	answers map[string]reservationAnswer
}

type reservationAnswer struct {
	reservations []ec2types.CapacityReservation
	at           time.Time
}

func newReservationState() *reservationState {
	return &reservationState{counts: map[string]int{}, answers: map[string]reservationAnswer{}}
}

// available is how many more instances reservation id can take (0 when
// unknown).
func (s *reservationState) available(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[id]
}

// launched counts one instance launched into reservation id.
func (s *reservationState) launched(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[id] > 0 {
		s.counts[id]--
	}
}

// exhausted records that EC2 refused a launch into reservation id for lack
// of capacity: it takes nothing more until EC2 says otherwise.
func (s *reservationState) exhausted(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.counts[id]; ok {
		s.counts[id] = 0
	}
}

// reservationQuery is one DescribeCapacityReservations call of the
// selector terms (Karpenter's queries): a term's id alone, or its owner,
// tags and instance match criteria.
type reservationQuery struct {
	ID                    string            `json:"id,omitempty"`
	OwnerID               string            `json:"ownerID,omitempty"`
	Tags                  map[string]string `json:"tags,omitempty"`
	InstanceMatchCriteria string            `json:"instanceMatchCriteria,omitempty"`
}

func reservationQueries(terms []awsv1.CapacityReservationSelectorTerm) []reservationQuery {
	var out []reservationQuery
	for _, t := range terms {
		if t.ID != "" {
			out = append(out, reservationQuery{ID: t.ID})
		}
		if len(t.Tags) > 0 || t.InstanceMatchCriteria != "" {
			out = append(out, reservationQuery{OwnerID: t.OwnerID, Tags: t.Tags, InstanceMatchCriteria: t.InstanceMatchCriteria})
		}
	}
	return out
}

// input is the query's DescribeCapacityReservations request: active
// reservations only; by id without MaxResults (EC2 refuses both).
func (q reservationQuery) input() *ec2.DescribeCapacityReservationsInput {
	filters := []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}}
	if q.ID != "" {
		return &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{q.ID}, Filters: filters}
	}
	if q.OwnerID != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{q.OwnerID}})
	}
	filters = append(filters, tagFilters(q.Tags)...)
	if q.InstanceMatchCriteria != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{q.InstanceMatchCriteria}})
	}
	return &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(1000)}
}

// describe runs one query, reusing an answer younger than reservationTTL;
// a fresh answer resets the available counts of its reservations. An id
// EC2 does not know selects nothing.
func (p *Provider) describeReservations(ctx context.Context, q reservationQuery) ([]ec2types.CapacityReservation, error) {
	key := cacheKey("reservations", q)
	p.res.mu.Lock()
	a, ok := p.res.answers[key]
	p.res.mu.Unlock()
	if ok && p.now().Sub(a.at) < reservationTTL {
		return a.reservations, nil
	}
	var found []ec2types.CapacityReservation
	pages := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, q.input())
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			cerr := classify(err)
			if errors.Is(cerr, cloud.ErrNotFound) && q.ID != "" {
				break // one id, one page: EC2 says it does not exist
			}
			return nil, cerr
		}
		found = append(found, out.CapacityReservations...)
	}
	p.res.mu.Lock()
	p.res.answers[key] = reservationAnswer{reservations: found, at: p.now()}
	for _, r := range found {
		p.res.counts[aws.ToString(r.CapacityReservationId)] = int(aws.ToInt32(r.AvailableInstanceCount))
	}
	p.res.mu.Unlock()
	return found, nil
}

// resolveCapacityReservations returns the active reservations the terms
// select that have not ended, by ID, as EC2NodeClass status lists them.
// Reservations EC2 describes with an instance match criteria or type
// Karpenter does not know are left out (and logged).
func (p *Provider) resolveCapacityReservations(ctx context.Context, terms []awsv1.CapacityReservationSelectorTerm) ([]awsv1.CapacityReservation, error) {
	seen := map[string]ec2types.CapacityReservation{}
	for i, q := range reservationQueries(terms) {
		rs, err := p.describeReservations(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("capacityReservationSelectorTerms (query %d): describing capacity reservations: %w", i, err)
		}
		for _, r := range rs {
			seen[aws.ToString(r.CapacityReservationId)] = r
		}
	}
	now := p.now()
	var out []awsv1.CapacityReservation
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		r := seen[id]
		if r.EndDate != nil && !r.EndDate.After(now) {
			continue
		}
		cr, err := capacityReservationFrom(r, now)
		if err != nil {
			p.log.Warn("ignoring capacity reservation", zap.String("capacity-reservation-id", id), zap.Error(err))
			continue
		}
		out = append(out, cr)
	}
	return out, nil
}

// capacityReservationFrom is Karpenter's status entry of a reservation: a
// capacity block within expiringWindow of its end is expiring.
func capacityReservationFrom(r ec2types.CapacityReservation, now time.Time) (awsv1.CapacityReservation, error) {
	if r.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaOpen && r.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted {
		return awsv1.CapacityReservation{}, fmt.Errorf("instance match criteria %q: want open or targeted", r.InstanceMatchCriteria)
	}
	typ := awsv1.CapacityReservationTypeDefault
	switch r.ReservationType {
	case ec2types.CapacityReservationTypeDefault, "":
	case ec2types.CapacityReservationTypeCapacityBlock:
		typ = awsv1.CapacityReservationTypeCapacityBlock
	default:
		return awsv1.CapacityReservation{}, fmt.Errorf("reservation type %q: want default or capacity-block", r.ReservationType)
	}
	out := awsv1.CapacityReservation{
		ID: aws.ToString(r.CapacityReservationId), AvailabilityZone: aws.ToString(r.AvailabilityZone),
		InstanceMatchCriteria: string(r.InstanceMatchCriteria), InstanceType: aws.ToString(r.InstanceType),
		OwnerID: aws.ToString(r.OwnerId), ReservationType: typ, Interruptible: aws.ToBool(r.Interruptible),
		State: awsv1.CapacityReservationStateActive,
	}
	if r.EndDate != nil {
		end := metav1.NewTime(*r.EndDate)
		out.EndTime = &end
		if typ == awsv1.CapacityReservationTypeCapacityBlock && !now.Before(r.EndDate.Add(-expiringWindow)) {
			out.State = awsv1.CapacityReservationStateExpiring
		}
	}
	return out, nil
}

// classReservations are the class's reservations for its offerings: EC2's
// current answer (which also refreshes the available counts), else its
// status when EC2 cannot be asked; none with the ReservedCapacity gate off.
func (p *Provider) classReservations(ctx context.Context, nc *awsv1.EC2NodeClass) []awsv1.CapacityReservation {
	if nc == nil {
		return nil
	}
	rs, err := p.resolveClassReservations(ctx, nc)
	if err != nil {
		p.log.Warn("refreshing capacity reservations, using the class status", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
		return nc.Status.CapacityReservations
	}
	return rs
}

// reservedOfferings are Karpenter's reserved offerings of one instance
// type (its spot and on-demand offerings built): one per reservation of the
// type, priced at its on-demand price / 10^7, available while the
// reservation has instances left, is not expiring or ended, and is in a
// zone of the class where the type is offered (inZone).
func (p *Provider) reservedOfferings(it *catalog.InstanceType, rs []awsv1.CapacityReservation, inZone map[string]bool) []catalog.Offering {
	var out []catalog.Offering
	now := p.now()
	for _, r := range rs {
		if r.InstanceType != it.Name {
			continue
		}
		od, classZone := 0.0, false
		for _, o := range it.Offerings {
			classZone = classZone || o.Zone == r.AvailabilityZone
			if o.CapacityType == karpv1.CapacityTypeOnDemand && od == 0 {
				od = o.Price
			}
		}
		n := p.res.available(r.ID)
		ended := r.EndTime != nil && !r.EndTime.After(now)
		out = append(out, catalog.Offering{Zone: r.AvailabilityZone, CapacityType: karpv1.CapacityTypeReserved, Price: od / reservedPriceDivisor,
			Available:     n > 0 && classZone && inZone[r.AvailabilityZone] && r.State != awsv1.CapacityReservationStateExpiring && !ended,
			ReservationID: r.ID, ReservationType: string(r.ReservationType), Interruptible: r.Interruptible, ReservationCapacity: n})
	}
	return out
}

// reservationTarget is the capacity reservation a launch template
// launches into (zero: none).
type reservationTarget struct {
	ID            string
	Type          string
	Interruptible bool
}

func targetOf(c cloud.Candidate) reservationTarget {
	if c.CapacityType != karpv1.CapacityTypeReserved {
		return reservationTarget{}
	}
	return reservationTarget{ID: c.ReservationID, Type: c.ReservationType, Interruptible: c.Interruptible}
}

// applyReservation makes launch template data launch into t (Karpenter's
// targeted mode): capacity-reservations-only with the reservation as the
// target, and the capacity-block or interruptible market type. Without a
// target the preference is none, so spot and on-demand launches never use
// open reservations.
func applyReservation(data *ec2types.RequestLaunchTemplateData, t reservationTarget) {
	data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
		CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
	if t.ID == "" {
		return
	}
	data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
		CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
		CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(t.ID)},
	}
	switch {
	case t.Type == string(awsv1.CapacityReservationTypeCapacityBlock):
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	case t.Interruptible:
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}
	}
}

// applyReservedFleet sets a reserved CreateFleet's target capacity type and
// options as Karpenter does: capacity-block for a capacity block (no
// on-demand options), reserved-capacity with interruptible reservation
// options for an interruptible reservation, else on-demand.
func applyReservedFleet(in *ec2.CreateFleetInput, t reservationTarget) {
	switch {
	case t.Type == string(awsv1.CapacityReservationTypeCapacityBlock):
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeCapacityBlock
		in.OnDemandOptions = nil
	case t.Interruptible:
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeReservedCapacity
		in.OnDemandOptions = nil
		in.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{
			ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
	default:
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeOnDemand
	}
}

// chooseReserved picks a reserved launch's overrides (Karpenter's launch
// filters): the reservations of the cheapest reservation kind (ties:
// default, then capacity blocks, then interruptible), one per instance type
// and zone (the one with the most instances left), and a single capacity
// block (CreateFleet takes one). None when no reserved candidate remains.
func (p *Provider) chooseReserved(cands []cloud.Candidate) []cloud.Candidate {
	rank := func(c cloud.Candidate) int {
		switch {
		case c.ReservationType == string(awsv1.CapacityReservationTypeCapacityBlock):
			return 1
		case c.Interruptible:
			return 2
		}
		return 0
	}
	var best *cloud.Candidate
	for i, c := range cands {
		if c.CapacityType != karpv1.CapacityTypeReserved {
			continue
		}
		if best == nil || c.Price < best.Price || (c.Price == best.Price && rank(c) < rank(*best)) {
			best = &cands[i]
		}
	}
	if best == nil {
		return nil
	}
	byPool := map[[2]string]cloud.Candidate{}
	var order [][2]string
	for _, c := range cands {
		if c.CapacityType != karpv1.CapacityTypeReserved || targetKind(c) != targetKind(*best) {
			continue
		}
		k := [2]string{c.InstanceType, c.Zone}
		cur, ok := byPool[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || p.res.available(c.ReservationID) > p.res.available(cur.ReservationID) {
			byPool[k] = c
		}
	}
	out := make([]cloud.Candidate, 0, len(order))
	for _, k := range order {
		out = append(out, byPool[k])
	}
	slices.SortStableFunc(out, func(a, b cloud.Candidate) int { return cmp.Compare(a.Price, b.Price) })
	if best.ReservationType == string(awsv1.CapacityReservationTypeCapacityBlock) {
		out = out[:1]
	}
	return out
}

// targetKind is the market a reserved candidate launches in: its
// reservation type and whether it is interruptible.
func targetKind(c cloud.Candidate) string {
	return c.ReservationType + "/" + strconv.FormatBool(c.Interruptible)
}

// reservedFrom marks an instance reserved as Karpenter reads one: it runs
// in a reservation it targeted (preference capacity-reservations-only). An
// instance that merely landed in an open reservation stays on-demand, and
// one whose reservation ended (EC2 drops its reservation) is on-demand
// again.
func reservedFrom(in ec2types.Instance, out *cloud.Instance) {
	spec := in.CapacityReservationSpecification
	if out.CapacityType == karpv1.CapacityTypeSpot || aws.ToString(in.CapacityReservationId) == "" || spec == nil ||
		spec.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
		return
	}
	out.CapacityType, out.ReservationID = karpv1.CapacityTypeReserved, aws.ToString(in.CapacityReservationId)
	out.ReservationType = string(awsv1.CapacityReservationTypeDefault)
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
		out.ReservationType = string(awsv1.CapacityReservationTypeCapacityBlock)
	}
}

// resolveClassReservations resolves the class's capacityReservationSelectorTerms
// (none with the ReservedCapacity gate off).
func (p *Provider) resolveClassReservations(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error) {
	if p.opts.NoReservedCapacity || len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, nil
	}
	rs, err := p.resolveCapacityReservations(ctx, nc.Spec.CapacityReservationSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("spec.%w", err)
	}
	return rs, nil
}

// reservationOf is the reserved override of an offering (zero when the
// offering is not reserved).
func reservationOf(overrides []cloud.Candidate, k cloud.OfferingKey) cloud.Candidate {
	for _, c := range overrides {
		if c.CapacityType == karpv1.CapacityTypeReserved && c.InstanceType == k.InstanceType && c.Zone == k.Zone {
			return c
		}
	}
	return cloud.Candidate{}
}

// markUnavailable records a capacity error: a reservation that refused
// takes nothing more until EC2 reports it again (Karpenter's
// MarkUnavailable), any other offering goes in the capacity-error cache.
func (p *Provider) markUnavailable(fe fleetError) {
	if fe.reservation != "" {
		p.res.exhausted(fe.reservation)
		return
	}
	p.unavailable.mark(fe.key)
}

// noteReserved gives an instance launched into a reservation the
// reservation's ID and type, and counts the launch against it.
func (p *Provider) noteReserved(inst *cloud.Instance, overrides []cloud.Candidate) {
	if inst.CapacityType != karpv1.CapacityTypeReserved {
		return
	}
	c := reservationOf(overrides, cloud.OfferingKey{InstanceType: inst.InstanceType, Zone: inst.Zone})
	inst.ReservationID, inst.ReservationType = c.ReservationID, c.ReservationType
	p.res.launched(c.ReservationID)
}
