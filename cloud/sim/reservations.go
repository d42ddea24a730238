package sim

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

// This file simulates EC2 capacity reservations: on-demand capacity
// reservations (ODCRs) and capacity blocks, DescribeCapacityReservations
// (ids, filters, tags), and launches that target one (launch template
// CapacityReservationSpecification with capacity-reservations-only and a
// CapacityReservationTarget; capacity blocks with market type
// capacity-block and fleet target capacity type capacity-block). A launch
// takes one of the reservation's instances; a full reservation refuses with
// ReservationCapacityExceeded.

// CapacityReservation is a simulated capacity reservation.
type CapacityReservation struct {
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	// OwnerID defaults to the sim's account (123456789012).
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria: open or targeted (default targeted).
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// Type: default (an ODCR) or capacity-block (default default).
	Type string `json:"type,omitempty"`
	// Total is how many instances it holds.
	Total int `json:"total"`
	// State: active (default; expired once End passes), expired,
	// cancelled, pending, failed, scheduled, payment-pending,
	// payment-failed.
	State string `json:"state,omitempty"`
	// End is when it ends (nil: unlimited; capacity blocks always end).
	End           *time.Time        `json:"end,omitempty"`
	Interruptible bool              `json:"interruptible,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

var reservationIDRE = regexp.MustCompile(`^cr-[0-9a-z]+$`)

func (r *CapacityReservation) owner() string {
	if r.OwnerID == "" {
		return ownerID
	}
	return r.OwnerID
}

func (r *CapacityReservation) matchCriteria() string {
	if r.InstanceMatchCriteria == "" {
		return "targeted"
	}
	return r.InstanceMatchCriteria
}

func (r *CapacityReservation) kind() string {
	if r.Type == "" {
		return "default"
	}
	return r.Type
}

// state is the reservation's state at now: one past its end has expired.
func (r *CapacityReservation) state(now time.Time) string {
	switch {
	case r.State != "" && r.State != "active":
		return r.State
	case r.End != nil && !now.Before(*r.End):
		return "expired"
	}
	return "active"
}

// reservation finds a reservation by ID (nil when there is none).
func (s *Sim) reservation(id string) *CapacityReservation {
	for i := range s.cfg.CapacityReservations {
		if s.cfg.CapacityReservations[i].ID == id {
			return &s.cfg.CapacityReservations[i]
		}
	}
	return nil
}

// reservationUsed counts the live instances running in a reservation.
func (s *Sim) reservationUsed(id string) int {
	n := 0
	for _, in := range s.instances {
		if in.ReservationID == id && in.State != "terminated" && in.State != "shutting-down" {
			n++
		}
	}
	return n
}

type xCapacityReservation struct {
	ID                     string `xml:"capacityReservationId"`
	OwnerID                string `xml:"ownerId"`
	Arn                    string `xml:"capacityReservationArn"`
	AvailabilityZone       string `xml:"availabilityZone"`
	AvailabilityZoneID     string `xml:"availabilityZoneId"`
	InstanceType           string `xml:"instanceType"`
	InstancePlatform       string `xml:"instancePlatform"`
	Tenancy                string `xml:"tenancy"`
	TotalInstanceCount     int    `xml:"totalInstanceCount"`
	AvailableInstanceCount int    `xml:"availableInstanceCount"`
	EbsOptimized           bool   `xml:"ebsOptimized"`
	State                  string `xml:"state"`
	StartDate              string `xml:"startDate"`
	EndDate                string `xml:"endDate,omitempty"`
	EndDateType            string `xml:"endDateType"`
	InstanceMatchCriteria  string `xml:"instanceMatchCriteria"`
	CreateDate             string `xml:"createDate"`
	ReservationType        string `xml:"reservationType"`
	Interruptible          bool   `xml:"interruptible"`
	Tags                   []xTag `xml:"tagSet>item"`
}

type describeCapacityReservationsResponse struct {
	meta
	Reservations []xCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken    string                 `xml:"nextToken,omitempty"`
}

// describeCapacityReservations: CapacityReservationId.N (malformed:
// InvalidCapacityReservationId.Malformed; unknown:
// InvalidCapacityReservationId.NotFound; not with MaxResults), MaxResults
// 1-1000 (paged, pageRules), and the filters instance-type, owner-id, instance-platform,
// availability-zone, tenancy, state, end-date-type,
// instance-match-criteria and tags.
func (s *Sim) describeCapacityReservations(r Request) (response, *apiError) {
	ids, filters := r.Strings("CapacityReservationId"), r.Filters()
	if _, aerr := pageSize(r); aerr != nil {
		return nil, aerr
	}
	for _, id := range ids {
		if !reservationIDRE.MatchString(id) {
			return nil, badParam("InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\"", id)
		}
		if s.reservation(id) == nil {
			return nil, badParam("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	out := &describeCapacityReservationsResponse{Reservations: []xCapacityReservation{}}
	var keys []string // config order
	for i := range s.cfg.CapacityReservations {
		cr := &s.cfg.CapacityReservations[i]
		fields := map[string]string{"instance-type": cr.InstanceType, "owner-id": cr.owner(), "instance-platform": "Linux/UNIX",
			"availability-zone": cr.Zone, "tenancy": "default", "state": cr.state(s.now()), "end-date-type": endDateType(cr),
			"instance-match-criteria": cr.matchCriteria()}
		if !inOrAll(ids, cr.ID) || !matchFilters(filters, cr.Tags, fields) {
			continue
		}
		out.Reservations = append(out.Reservations, s.xReservation(cr))
		keys = append(keys, seqKey(i, cr))
	}
	var aerr *apiError
	out.Reservations, out.NextToken, aerr = paginate(r, out.Reservations, func(i int, _ xCapacityReservation) string { return keys[i] })
	return out, aerr
}

func endDateType(cr *CapacityReservation) string {
	if cr.End == nil {
		return "unlimited"
	}
	return "limited"
}

func (s *Sim) xReservation(cr *CapacityReservation) xCapacityReservation {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	x := xCapacityReservation{
		ID: cr.ID, OwnerID: cr.owner(), Arn: "arn:aws:ec2:" + s.cfg.Region + ":" + cr.owner() + ":capacity-reservation/" + cr.ID,
		AvailabilityZone: cr.Zone, AvailabilityZoneID: zoneID(cr.Zone), InstanceType: cr.InstanceType, InstancePlatform: "Linux/UNIX",
		Tenancy: "default", TotalInstanceCount: cr.Total, EbsOptimized: true, State: cr.state(s.now()), StartDate: created,
		EndDateType: endDateType(cr), InstanceMatchCriteria: cr.matchCriteria(), CreateDate: created,
		ReservationType: cr.kind(), Interruptible: cr.Interruptible, Tags: tagSet(cr.Tags),
	}
	if cr.state(s.now()) == "active" {
		x.AvailableInstanceCount = max(cr.Total-s.reservationUsed(cr.ID), 0)
	}
	if cr.End != nil {
		x.EndDate = cr.End.UTC().Format(time.RFC3339)
	}
	return x
}

// reservedMarkets are the fleet target capacity types that launch into
// reservations.
var reservedMarkets = []string{"capacity-block", "reserved-capacity"}

// reservationCheck is the fleet error of a launch whose template targets
// a capacity reservation ("" when it may go ahead, or targets none): the
// reservation must exist, be active, match the override's instance type and
// zone, be launched into with its market type (capacity-block for a
// capacity block and only for one; interruptible-capacity-reservation for
// an interruptible one) and have an instance left.
func (s *Sim) reservationCheck(lt *launchTemplate, itype, zone, capType string) (code, msg string) {
	x := lt.Extra
	if x.CapResTarget == "" {
		if x.MarketType == "capacity-block" || slices.Contains(reservedMarkets, capType) {
			return "InvalidParameterValue", fmt.Sprintf("Target capacity type %s and market type %q need a capacity reservation target", capType, x.MarketType)
		}
		return "", ""
	}
	cr := s.reservation(x.CapResTarget)
	switch {
	case cr == nil:
		return "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", x.CapResTarget)
	case x.CapResPreference != "capacity-reservations-only" && x.CapResPreference != "":
		return "InvalidParameterCombination", fmt.Sprintf("A capacity reservation target cannot be used with preference %s", x.CapResPreference)
	case cr.InstanceType != itype || cr.Zone != zone:
		return "InvalidParameterValue", fmt.Sprintf("The capacity reservation %s is for %s in %s, not %s in %s", cr.ID, cr.InstanceType, cr.Zone, itype, zone)
	case (cr.kind() == "capacity-block") != (x.MarketType == "capacity-block") || (cr.kind() == "capacity-block") != (capType == "capacity-block"):
		return "InvalidParameterValue", fmt.Sprintf("The capacity reservation %s is of type %s: launch it with market type and target capacity type capacity-block only for capacity blocks (got %q, %s)",
			cr.ID, cr.kind(), x.MarketType, capType)
	case cr.Interruptible != (x.MarketType == "interruptible-capacity-reservation"):
		return "InvalidParameterValue", fmt.Sprintf("The capacity reservation %s is interruptible=%t: market type %q does not match", cr.ID, cr.Interruptible, x.MarketType)
	case cr.state(s.now()) != "active":
		return "InsufficientInstanceCapacity", fmt.Sprintf("The capacity reservation %s is %s.", cr.ID, cr.state(s.now()))
	case s.reservationUsed(cr.ID) >= cr.Total:
		return "ReservationCapacityExceeded", fmt.Sprintf("There is not enough capacity in the capacity reservation %s to fulfill your request.", cr.ID)
	}
	return "", ""
}

// reserve records on a new instance the reservation its template
// targets: its ID, the preference, and the capacity-block or
// interruptible lifecycle.
func reserve(in *instance, lt *launchTemplate) {
	in.CapResPreference = lt.Extra.CapResPreference
	if lt.Extra.CapResTarget == "" {
		return
	}
	in.ReservationID = lt.Extra.CapResTarget
	switch lt.Extra.MarketType {
	case "capacity-block", "interruptible-capacity-reservation":
		in.Lifecycle = lt.Extra.MarketType
	}
}

// SetCapacityReservationState changes a reservation's state (expired,
// cancelled, ...) as EC2 does when it ends: instances in an ended ODCR keep
// running as on-demand instances (no reservation any more); those in an
// ended capacity block are terminated.
func (s *Sim) SetCapacityReservationState(id, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.reservation(id)
	if cr == nil {
		return fmt.Errorf("capacity reservation %s: not found", id)
	}
	cr.State = state
	if state == "active" {
		return nil
	}
	for _, in := range s.instances {
		if in.ReservationID != id || in.State == "terminated" {
			continue
		}
		if cr.kind() == "capacity-block" {
			in.State = "shutting-down"
			continue
		}
		in.ReservationID = ""
	}
	return nil
}
