package cloud

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/requirements"
)

// Subnet is a resolved subnet.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	AvailableIPs int32
}

// AMI is a resolved image for one kind of instance type. An image that
// serves several kinds (the AL2 GPU image: NVIDIA and Neuron types) is one
// AMI per kind, as Karpenter lists it.
type AMI struct {
	ID           string
	Name         string
	Arch         string // amd64 or arm64
	CreationDate string
	Deprecated   bool
	// Requirements are what the image needs of an instance type besides
	// its architecture: for an alias's images the variant's (standard: no
	// GPU and no accelerator; nvidia: a GPU; neuron: an accelerator) or
	// Windows' (os, windows-build); none for images selected otherwise.
	Requirements []corev1.NodeSelectorRequirement
	// Joiner: the image is Joiner-built (tagged joiner.io/ami=true): it has
	// the joiner binary, so its user data may call "joiner bootstrap".
	// Stock images (every alias) have not.
	Joiner bool
}

// NodeSelectorRequirements are the image's requirements with its
// architecture, as EC2NodeClass status.amis lists them: sorted by key
// length, then key (Karpenter's order).
func (a AMI) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{a.Arch}}}
	for _, r := range a.Requirements {
		out = append(out, *r.DeepCopy())
	}
	slices.SortStableFunc(out, func(x, y corev1.NodeSelectorRequirement) int {
		return cmp.Or(cmp.Compare(len(x.Key), len(y.Key)), cmp.Compare(x.Key, y.Key))
	})
	return out
}

// Suits reports whether an instance type with these labels can boot the
// image (Karpenter's compatibility of the type's and the image's
// requirements: a label the type lacks satisfies only DoesNotExist).
func (a AMI) Suits(labels map[string]string) bool {
	reqs, err := requirements.FromNodeSelector(a.NodeSelectorRequirements())
	return err == nil && reqs.Matches(labels)
}

// PlacementGroup is a resolved placement group.
type PlacementGroup struct {
	ID   string
	Name string
	// Strategy: cluster, partition or spread.
	Strategy string
	// PartitionCount is the number of partitions (partition strategy).
	PartitionCount int32
	// SpreadLevel: host or rack (spread strategy).
	SpreadLevel string
}

// Placement group strategies.
const (
	PlacementStrategyCluster   = "cluster"
	PlacementStrategyPartition = "partition"
	PlacementStrategySpread    = "spread"
)

// EC2NodeClass condition types Karpenter v1.14 sets that the API package
// does not name.
const (
	ConditionPlacementGroupReady       = "PlacementGroupReady"
	ConditionCapacityReservationsReady = "CapacityReservationsReady"
)

// Resolved is an EC2NodeClass's selector terms resolved against EC2.
type Resolved struct {
	Subnets         []Subnet
	SecurityGroups  []awsv1.SecurityGroup
	AMIs            []AMI
	InstanceProfile string
	// PlacementGroup is the placementGroupSelector's group (nil when the
	// class has no selector).
	PlacementGroup *PlacementGroup
	// CapacityReservations are the active, unexpired reservations the
	// capacityReservationSelectorTerms select, by ID (status
	// capacityReservations).
	CapacityReservations []awsv1.CapacityReservation
	// NoReservedCapacity: Karpenter's ReservedCapacity feature gate is
	// off, so reservations are not resolved and the class has no
	// CapacityReservationsReady condition.
	NoReservedCapacity bool
}

// InstanceProfile is an IAM instance profile made for one of the
// cluster's EC2NodeClasses (by Joiner or Karpenter).
type InstanceProfile struct {
	Name string
	// Path is its IAM path, /karpenter/<region>/<cluster>/<class UID>/.
	Path string
}

// ClassUID is the UID of the class the profile was made for (the last
// segment of its path; "" when the path has none).
func (p InstanceProfile) ClassUID() string {
	segs := strings.Split(strings.Trim(p.Path, "/"), "/")
	if len(segs) < 4 {
		return ""
	}
	return segs[len(segs)-1]
}

// ImageFor returns the image for an instance type with these labels: the
// first AMI (newest first) that suits it, as Karpenter's
// MapToInstanceTypes picks; "" when none does.
func (r Resolved) ImageFor(labels map[string]string) string {
	for _, a := range r.AMIs {
		if a.Suits(labels) {
			return a.ID
		}
	}
	return ""
}

// JoinerImages reports whether every one of the images is a resolved
// Joiner-built AMI (false for none, and for an ID not among the AMIs).
func (r Resolved) JoinerImages(ids []string) bool {
	for _, id := range ids {
		if !slices.ContainsFunc(r.AMIs, func(a AMI) bool { return a.ID == id && a.Joiner }) {
			return false
		}
	}
	return len(ids) > 0
}

// SecurityGroupIDs are the resolved security groups' IDs, in order.
func (r Resolved) SecurityGroupIDs() []string {
	out := make([]string, 0, len(r.SecurityGroups))
	for _, g := range r.SecurityGroups {
		out = append(out, g.ID)
	}
	return out
}

// StatusAMIs is the AMIs as EC2NodeClass status entries.
func (r Resolved) StatusAMIs() []awsv1.AMI {
	out := make([]awsv1.AMI, 0, len(r.AMIs))
	for _, a := range r.AMIs {
		out = append(out, awsv1.AMI{ID: a.ID, Name: a.Name, Requirements: a.NodeSelectorRequirements(), Deprecated: a.Deprecated})
	}
	return out
}

// StatusSubnets is the subnets as EC2NodeClass status entries, in
// Karpenter's order: most free addresses first, then by ID.
func (r Resolved) StatusSubnets() []awsv1.Subnet {
	sorted := slices.Clone(r.Subnets)
	slices.SortFunc(sorted, func(a, b Subnet) int {
		return cmp.Or(cmp.Compare(b.AvailableIPs, a.AvailableIPs), cmp.Compare(a.ID, b.ID))
	})
	out := make([]awsv1.Subnet, 0, len(sorted))
	for _, s := range sorted {
		out = append(out, awsv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	return out
}

// SubnetPerZone picks one subnet per zone: the one with the most free
// addresses (ties: the lowest ID).
func SubnetPerZone(subnets []Subnet) map[string]string {
	best := map[string]Subnet{}
	for _, s := range subnets {
		b, ok := best[s.Zone]
		if !ok || s.AvailableIPs > b.AvailableIPs || (s.AvailableIPs == b.AvailableIPs && s.ID < b.ID) {
			best[s.Zone] = s
		}
	}
	out := make(map[string]string, len(best))
	for z, s := range best {
		out[z] = s.ID
	}
	return out
}

// Karpenter's messages of a False part condition whose selector matched
// nothing.
const (
	MessageNoSubnets        = "SubnetSelector did not match any Subnets"
	MessageNoSecurityGroups = "SecurityGroupSelector did not match any SecurityGroups"
	MessageNoAMIs           = "AMISelector did not match any AMIs"
	// MessagePlacementGroupFailed: DescribePlacementGroups failed.
	MessagePlacementGroupFailed = "Failed to resolve placement group"
)

// ApplyStatus sets the NodeClass's resolved status and its conditions from
// a Resolve result, as Karpenter's EC2NodeClass reconcilers do: a resolved
// part True with its status; an answer (the selector matched nothing, the
// alias is not supported) False with Karpenter's reason and message; a
// part EC2, SSM or IAM could not be asked for (throttled, refused) keeps
// its status and condition (Unknown, AwaitingReconciliation, when it has
// none yet), as Karpenter's reconcilers return the error and leave them,
// but the placement group, which Karpenter marks False
// (PlacementGroupResolutionFailed). Conditions not set yet start Unknown,
// as operatorpkg's condition set starts them. Then ValidationSucceeded and
// Ready from the parts (see setValidation and setReady). Conditions whose
// status did not change keep their transition time.
func ApplyStatus(nc *awsv1.EC2NodeClass, r Resolved, err error, now metav1.Time) {
	var rerr *ResolveError
	if !errors.As(err, &rerr) {
		rerr = &ResolveError{}
		if err != nil { // not a resolution error: every part is unknown
			rerr = &ResolveError{Subnets: err, SecurityGroups: err, AMIs: err, InstanceProfile: err, PlacementGroup: err, CapacityReservations: err}
		}
	}
	initConditions(nc, &r.NoReservedCapacity, now)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: nc.Generation, LastTransitionTime: now})
	}
	parts := []struct {
		typ, reason string
		err         error
		status      func() // writes the part's status fields
	}{
		{awsv1.ConditionSubnetsReady, "SubnetsNotFound", rerr.Subnets, func() { nc.Status.Subnets = r.StatusSubnets() }},
		{awsv1.ConditionSecurityGroupsReady, "SecurityGroupsNotFound", rerr.SecurityGroups, func() { nc.Status.SecurityGroups = r.SecurityGroups }},
		{awsv1.ConditionAMIsReady, amisReason(rerr.AMIs), rerr.AMIs, func() {
			if !errors.Is(rerr.AMIs, ErrUnsupportedAlias) { // Karpenter leaves status.amis to an unsupported alias
				nc.Status.AMIs = r.StatusAMIs()
			}
		}},
		{awsv1.ConditionInstanceProfileReady, "InstanceProfileNotFound", rerr.InstanceProfile, func() { nc.Status.InstanceProfile = r.InstanceProfile }},
		// CapacityReservationsReady is a condition of Karpenter's
		// reservedCapacity feature gate (on by default): True with or
		// without reservations.
		{ConditionCapacityReservationsReady, "", rerr.CapacityReservations, func() { nc.Status.CapacityReservations = r.CapacityReservations }},
	}
	for _, p := range parts {
		switch {
		case p.typ == ConditionCapacityReservationsReady && r.NoReservedCapacity:
			// Karpenter does not reconcile reservations with the gate off.
			nc.Status.CapacityReservations = nil
		case p.err == nil:
			p.status()
			set(p.typ, metav1.ConditionTrue, p.typ, "")
		case settled(p.err):
			p.status()
			set(p.typ, metav1.ConditionFalse, p.reason, conditionMessage(p.err))
		}
	}
	// Karpenter sets PlacementGroupReady on every class: True without a
	// selector.
	switch pg := rerr.PlacementGroup; {
	case pg == nil:
		set(ConditionPlacementGroupReady, metav1.ConditionTrue, ConditionPlacementGroupReady, "")
	case settled(pg):
		set(ConditionPlacementGroupReady, metav1.ConditionFalse, "PlacementGroupNotFound", conditionMessage(pg))
	default:
		set(ConditionPlacementGroupReady, metav1.ConditionFalse, "PlacementGroupResolutionFailed", MessagePlacementGroupFailed)
	}
	setValidation(nc, now)
	setReady(nc, now)
}

// MarkNotValid sets ValidationSucceeded False with reason and message (the
// class failed a check of its own, not of its parts), starting unset
// conditions Unknown, and Ready from the conditions.
func MarkNotValid(nc *awsv1.EC2NodeClass, reason, message string, now metav1.Time) {
	initConditions(nc, nil, now)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: awsv1.ConditionValidationSucceeded, Status: metav1.ConditionFalse,
		Reason: reason, Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: now})
	setReady(nc, now)
}

// initConditions starts each of Ready's dependencies that is not set
// Unknown (AwaitingReconciliation), its last transition the class's
// creation, as operatorpkg's condition set does. CapacityReservationsReady
// is a condition of the reservedCapacity gate: with noReserved true it is
// removed, with nil (the gate is not known) left as it is.
func initConditions(nc *awsv1.EC2NodeClass, noReserved *bool, now metav1.Time) {
	at := nc.CreationTimestamp
	if at.IsZero() {
		at = now
	}
	for _, typ := range append([]string{awsv1.ConditionReady}, readyDependencies...) {
		if typ == ConditionCapacityReservationsReady && (noReserved == nil || *noReserved) {
			if noReserved != nil {
				meta.RemoveStatusCondition(&nc.Status.Conditions, typ)
			}
			continue
		}
		if meta.FindStatusCondition(nc.Status.Conditions, typ) == nil {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionUnknown,
				Reason: "AwaitingReconciliation", Message: "object is awaiting reconciliation", ObservedGeneration: nc.Generation, LastTransitionTime: at})
		}
	}
}

// conditionMessage is the condition message of a resolution answer:
// Karpenter's words where it has them, else the error.
func conditionMessage(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return se.Message
	case errors.Is(err, ErrNoSubnets):
		return MessageNoSubnets
	case errors.Is(err, ErrNoSecurityGroups):
		return MessageNoSecurityGroups
	case errors.Is(err, ErrNoAMIs):
		return MessageNoAMIs
	}
	return err.Error()
}

// ReasonDependenciesNotReady and MessageDependenciesNotReady are
// Karpenter's ValidationSucceeded reason and message while a part it
// validates with is not resolved.
const (
	ReasonDependenciesNotReady  = "DependenciesNotReady"
	MessageDependenciesNotReady = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"
)

// validationDependencies are the conditions Karpenter's validation waits
// for.
var validationDependencies = []string{awsv1.ConditionAMIsReady, awsv1.ConditionInstanceProfileReady,
	awsv1.ConditionSecurityGroupsReady, awsv1.ConditionSubnetsReady}

// setValidation sets ValidationSucceeded as Karpenter's validation
// reconciler does before its dry runs: False (DependenciesNotReady) when a
// dependency is False, Unknown (the same reason) while one is Unknown or
// not set, else True. Joiner makes none of Karpenter's dry-run calls
// (CreateLaunchTemplate, CreateFleet, RunInstances): a class whose
// dependencies resolved is valid, and a refused permission shows at
// launch.
func setValidation(nc *awsv1.EC2NodeClass, now metav1.Time) {
	status := metav1.ConditionTrue
	for _, typ := range validationDependencies {
		c := meta.FindStatusCondition(nc.Status.Conditions, typ)
		switch {
		case c != nil && c.Status == metav1.ConditionFalse:
			status = metav1.ConditionFalse
		case (c == nil || c.Status == metav1.ConditionUnknown) && status == metav1.ConditionTrue:
			status = metav1.ConditionUnknown
		}
	}
	c := metav1.Condition{Type: awsv1.ConditionValidationSucceeded, Status: status, Reason: awsv1.ConditionValidationSucceeded,
		ObservedGeneration: nc.Generation, LastTransitionTime: now}
	if status != metav1.ConditionTrue {
		c.Reason, c.Message = ReasonDependenciesNotReady, MessageDependenciesNotReady
	}
	meta.SetStatusCondition(&nc.Status.Conditions, c)
}

// readyDependencies are the conditions an EC2NodeClass's Ready sums up
// (Karpenter's, with its reservedCapacity feature gate on).
var readyDependencies = []string{awsv1.ConditionAMIsReady, awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady,
	awsv1.ConditionInstanceProfileReady, awsv1.ConditionValidationSucceeded, ConditionPlacementGroupReady, ConditionCapacityReservationsReady}

// setReady sets Ready from its dependencies as operatorpkg computes a root
// condition: True when every one is True at the class's generation; else
// its message lists the others ("SubnetsReady=False, ValidationSucceeded=
// False"), most recently changed first, and it is False
// (UnhealthyDependents) when one of them is False at the class's
// generation, Unknown (ReconcilingDependents) otherwise.
func setReady(nc *awsv1.EC2NodeClass, now metav1.Time) {
	var unhealthy []metav1.Condition
	for _, c := range nc.Status.Conditions {
		if slices.Contains(readyDependencies, c.Type) && (c.Status != metav1.ConditionTrue || c.ObservedGeneration != nc.Generation) {
			unhealthy = append(unhealthy, c)
		}
	}
	slices.SortStableFunc(unhealthy, func(a, b metav1.Condition) int {
		return b.LastTransitionTime.Compare(a.LastTransitionTime.Time)
	})
	ready := metav1.Condition{Type: awsv1.ConditionReady, Status: metav1.ConditionTrue, Reason: awsv1.ConditionReady,
		ObservedGeneration: nc.Generation, LastTransitionTime: now}
	if len(unhealthy) > 0 {
		ready.Status, ready.Reason = metav1.ConditionUnknown, "ReconcilingDependents"
		msgs := make([]string, 0, len(unhealthy))
		for _, c := range unhealthy {
			msgs = append(msgs, c.Type+"="+string(c.Status))
			if c.Status == metav1.ConditionFalse && c.ObservedGeneration == nc.Generation {
				ready.Status, ready.Reason = metav1.ConditionFalse, "UnhealthyDependents"
			}
		}
		ready.Message = strings.Join(msgs, ", ")
	}
	meta.SetStatusCondition(&nc.Status.Conditions, ready)
}

// amisReason is Karpenter's reason for a False AMIsReady: UnsupportedAlias
// when AWS publishes no image of the alias for the cluster's Kubernetes
// version, else AMINotFound.
func amisReason(err error) string {
	if errors.Is(err, ErrUnsupportedAlias) {
		return "UnsupportedAlias"
	}
	return "AMINotFound"
}

// settled reports whether a part's resolution error is an answer (the
// selector matched nothing, the alias or profile does not exist), not a
// failure to ask (throttling, a timeout, a refused call).
func settled(err error) bool {
	for _, s := range []error{ErrNoSubnets, ErrNoSecurityGroups, ErrNoAMIs, ErrUnknownAlias, ErrUnsupportedAlias, ErrNoRole, ErrNoPlacementGroup, ErrNotFound} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// KeepOnFailure merges a new resolution with the last good one, as
// Karpenter's EC2NodeClass reconcilers leave a part's status alone when
// they could not ask EC2: each part whose resolution failed (an error that
// is not an answer, see settled) is taken from prev and its error dropped.
// It returns the merged resolution, the condition types of the parts kept
// from prev and the error that remains (nil when none).
func KeepOnFailure(prev, cur Resolved, err error) (Resolved, []string, error) {
	if err == nil {
		return cur, nil, nil
	}
	var rerr *ResolveError
	if !errors.As(err, &rerr) {
		// Not a resolution error: nothing of cur was resolved.
		if settled(err) {
			return cur, nil, err
		}
		return prev, []string{awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady, awsv1.ConditionAMIsReady,
			awsv1.ConditionInstanceProfileReady, ConditionPlacementGroupReady, ConditionCapacityReservationsReady}, nil
	}
	left := *rerr
	var kept []string
	keep := func(typ string, partErr *error, take func()) {
		if *partErr != nil && !settled(*partErr) {
			take()
			*partErr = nil
			kept = append(kept, typ)
		}
	}
	keep(awsv1.ConditionSubnetsReady, &left.Subnets, func() { cur.Subnets = prev.Subnets })
	keep(awsv1.ConditionSecurityGroupsReady, &left.SecurityGroups, func() { cur.SecurityGroups = prev.SecurityGroups })
	keep(awsv1.ConditionAMIsReady, &left.AMIs, func() { cur.AMIs = prev.AMIs })
	keep(awsv1.ConditionInstanceProfileReady, &left.InstanceProfile, func() { cur.InstanceProfile = prev.InstanceProfile })
	keep(ConditionPlacementGroupReady, &left.PlacementGroup, func() { cur.PlacementGroup = prev.PlacementGroup })
	keep(ConditionCapacityReservationsReady, &left.CapacityReservations, func() { cur.CapacityReservations = prev.CapacityReservations })
	if len(left.parts()) == 0 {
		return cur, kept, nil
	}
	return cur, kept, &left
}
