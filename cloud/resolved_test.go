package cloud

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// TestCapacityReservationsStatus: the resolved reservations are the
// class's status.capacityReservations and CapacityReservationsReady is
// True, with or without any; when EC2 could not be asked it is left as it
// was, Unknown (AwaitingReconciliation) on a new class, as Karpenter's
// reconciler returns the error, and the class is not Ready; with the
// ReservedCapacity gate off the class has no such condition.
func TestCapacityReservationsStatus(t *testing.T) {
	rs := []awsv1.CapacityReservation{{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"}}
	tests := []struct {
		name   string
		r      Resolved
		err    error
		status metav1.ConditionStatus
		reason string
		ready  bool
	}{
		{"reservations", Resolved{CapacityReservations: rs}, nil, metav1.ConditionTrue, ConditionCapacityReservationsReady, true},
		{"none", Resolved{}, nil, metav1.ConditionTrue, ConditionCapacityReservationsReady, true},
		{"describe failed", Resolved{}, &ResolveError{CapacityReservations: errors.New("throttled")}, metav1.ConditionUnknown,
			"AwaitingReconciliation", false},
		{"gate off", Resolved{NoReservedCapacity: true}, nil, "", "", true},
	}
	for _, tc := range tests {
		nc := &awsv1.EC2NodeClass{}
		ApplyStatus(nc, tc.r, tc.err, metav1.Now())
		c := meta.FindStatusCondition(nc.Status.Conditions, ConditionCapacityReservationsReady)
		if tc.status == "" {
			if c != nil || len(nc.Status.Conditions) != 7 || !meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) {
				t.Errorf("%s: conditions %+v, want 7 without %s, Ready", tc.name, nc.Status.Conditions, ConditionCapacityReservationsReady)
			}
			continue
		}
		if c == nil || c.Status != tc.status || c.Reason != tc.reason || meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) != tc.ready ||
			len(nc.Status.CapacityReservations) != len(tc.r.CapacityReservations) {
			t.Errorf("%s: condition %+v, status %+v", tc.name, c, nc.Status)
		}
	}
}

// Which failed parts keep the last resolution: failures to ask, not
// answers.
func TestKeepOnFailure(t *testing.T) {
	prev := Resolved{Subnets: []Subnet{{ID: "subnet-old"}}, AMIs: []AMI{{ID: "ami-old"}}, InstanceProfile: "old"}
	cur := Resolved{Subnets: []Subnet{{ID: "subnet-new"}}, InstanceProfile: "new"}
	throttled := errors.New("api error RequestLimitExceeded: Request limit exceeded.")
	tests := []struct {
		name                string
		err                 error
		wantSubnet, wantAMI string
		wantKept            []string
		wantErr             error // nil: none left
	}{
		{"no error", nil, "subnet-new", "", nil, nil},
		{"AMIs throttled", &ResolveError{AMIs: throttled}, "subnet-new", "ami-old", []string{awsv1.ConditionAMIsReady}, nil},
		{"AMIs match nothing", &ResolveError{AMIs: ErrNoAMIs}, "subnet-new", "", nil, ErrNoAMIs},
		{"alias unsupported", &ResolveError{AMIs: fmt.Errorf("al2@latest: %w", ErrUnsupportedAlias)}, "subnet-new", "", nil, ErrUnsupportedAlias},
		{"one of each", &ResolveError{Subnets: throttled, AMIs: ErrNoAMIs}, "subnet-old", "", []string{awsv1.ConditionSubnetsReady}, ErrNoAMIs},
		{"not a resolution error", throttled, "subnet-old", "ami-old", []string{awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady,
			awsv1.ConditionAMIsReady, awsv1.ConditionInstanceProfileReady, ConditionPlacementGroupReady, ConditionCapacityReservationsReady}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, kept, err := KeepOnFailure(prev, cur, tt.err)
			var ami string
			if len(got.AMIs) > 0 {
				ami = got.AMIs[0].ID
			}
			if got.Subnets[0].ID != tt.wantSubnet || ami != tt.wantAMI || !slices.Equal(kept, tt.wantKept) {
				t.Errorf("subnet %s, AMI %q, kept %v; want %s, %q, %v", got.Subnets[0].ID, ami, kept, tt.wantSubnet, tt.wantAMI, tt.wantKept)
			}
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestValidationAndReadyFollowTheParts: ValidationSucceeded is Karpenter's
// derivation from AMIsReady, InstanceProfileReady, SecurityGroupsReady and
// SubnetsReady (False with DependenciesNotReady while one is False), and
// Ready lists its unhealthy dependencies, most recently changed first, as
// operatorpkg does.
func TestValidationAndReadyFollowTheParts(t *testing.T) {
	t0 := metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := metav1.NewTime(t0.Add(time.Minute))
	type want struct {
		validation metav1.ConditionStatus
		ready      metav1.ConditionStatus
		reason     string // Ready's
		message    string // Ready's
	}
	tests := []struct {
		name  string
		steps []error // one ApplyStatus each, a minute apart
		want  want
	}{
		{"resolved", []error{nil}, want{metav1.ConditionTrue, metav1.ConditionTrue, awsv1.ConditionReady, ""}},
		{"no subnets", []error{&ResolveError{Subnets: ErrNoSubnets}},
			want{metav1.ConditionFalse, metav1.ConditionFalse, "UnhealthyDependents", "SubnetsReady=False, ValidationSucceeded=False"}},
		{"no placement group: validation does not wait for it", []error{&ResolveError{PlacementGroup: ErrNoPlacementGroup}},
			want{metav1.ConditionTrue, metav1.ConditionFalse, "UnhealthyDependents", "PlacementGroupReady=False"}},
		{"AMIs, then subnets too: the latest first", []error{&ResolveError{AMIs: ErrNoAMIs}, &ResolveError{AMIs: ErrNoAMIs, Subnets: ErrNoSubnets}},
			want{metav1.ConditionFalse, metav1.ConditionFalse, "UnhealthyDependents", "SubnetsReady=False, AMIsReady=False, ValidationSucceeded=False"}},
		{"recovered", []error{&ResolveError{InstanceProfile: ErrNoRole}, nil},
			want{metav1.ConditionTrue, metav1.ConditionTrue, awsv1.ConditionReady, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			for i, err := range tc.steps {
				now := t0
				if i > 0 {
					now = t1
				}
				ApplyStatus(nc, Resolved{}, err, now)
			}
			v := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionValidationSucceeded)
			r := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionReady)
			if v == nil || r == nil {
				t.Fatalf("conditions %+v", nc.Status.Conditions)
			}
			if v.Status != tc.want.validation || v.ObservedGeneration != 2 {
				t.Errorf("ValidationSucceeded %+v, want %s", v, tc.want.validation)
			}
			if v.Status == metav1.ConditionFalse && (v.Reason != "DependenciesNotReady" ||
				v.Message != "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution") {
				t.Errorf("ValidationSucceeded %+v, want Karpenter's reason and message", v)
			}
			if r.Status != tc.want.ready || r.Reason != tc.want.reason || r.Message != tc.want.message {
				t.Errorf("Ready %s/%s %q, want %s/%s %q", r.Status, r.Reason, r.Message, tc.want.ready, tc.want.reason, tc.want.message)
			}
		})
	}
}

// ValidationSucceeded is Unknown (DependenciesNotReady) while a dependency
// is Unknown or not set and none is False; Ready is then Unknown
// (ReconcilingDependents).
func TestValidationUnknownWhileADependencyIs(t *testing.T) {
	now := metav1.Now()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	for _, typ := range []string{awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady, awsv1.ConditionInstanceProfileReady,
		ConditionPlacementGroupReady, ConditionCapacityReservationsReady} {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, ObservedGeneration: 1})
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: awsv1.ConditionAMIsReady, Status: metav1.ConditionUnknown,
		Reason: "AwaitingReconciliation", ObservedGeneration: 1})
	setValidation(nc, now)
	setReady(nc, now)
	v := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionValidationSucceeded)
	r := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionReady)
	if v.Status != metav1.ConditionUnknown || v.Reason != ReasonDependenciesNotReady {
		t.Errorf("ValidationSucceeded %+v, want Unknown DependenciesNotReady", v)
	}
	if r.Status != metav1.ConditionUnknown || r.Reason != "ReconcilingDependents" {
		t.Errorf("Ready %+v, want Unknown ReconcilingDependents", r)
	}
}

// status.subnets lists the subnets as Karpenter's: most free addresses
// first, then by ID.
func TestStatusSubnetsOrder(t *testing.T) {
	r := Resolved{Subnets: []Subnet{{ID: "subnet-a", AvailableIPs: 10}, {ID: "subnet-b", AvailableIPs: 200},
		{ID: "subnet-d", AvailableIPs: 50}, {ID: "subnet-c", AvailableIPs: 50}}}
	var got []string
	for _, s := range r.StatusSubnets() {
		got = append(got, s.ID)
	}
	if want := []string{"subnet-b", "subnet-c", "subnet-d", "subnet-a"}; !slices.Equal(got, want) {
		t.Errorf("status.subnets %v, want %v", got, want)
	}
	if r.Subnets[0].ID != "subnet-a" {
		t.Errorf("StatusSubnets reordered the resolution: %v", r.Subnets)
	}
}

// TestValidationPreconditionsAsKarpenter ports the "Preconditions" tables
// of Karpenter's validation suite: with AMIsReady, InstanceProfileReady,
// SecurityGroupsReady and SubnetsReady True but one, ValidationSucceeded is
// False (DependenciesNotReady) when that one is False, Unknown (the same
// reason) when it is Unknown.
func TestValidationPreconditionsAsKarpenter(t *testing.T) {
	now := metav1.Now()
	for _, typ := range validationDependencies {
		for _, tc := range []struct {
			table  string
			status metav1.ConditionStatus
		}{
			{"should set validated status condition to false when any required condition is false", metav1.ConditionFalse},
			{"should set validated status condition to unknown when no required condition is false and any are unknown", metav1.ConditionUnknown},
		} {
			t.Run(tc.table+"/"+typ, func(t *testing.T) {
				nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
				for _, dep := range validationDependencies {
					c := metav1.Condition{Type: dep, Status: metav1.ConditionTrue, Reason: dep, ObservedGeneration: 1, LastTransitionTime: now}
					if dep == typ {
						c.Status, c.Reason, c.Message = tc.status, "test", "test"
					}
					meta.SetStatusCondition(&nc.Status.Conditions, c)
				}
				setValidation(nc, now)
				v := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionValidationSucceeded)
				if v.Status != tc.status || v.Reason != ReasonDependenciesNotReady || v.Message != MessageDependenciesNotReady {
					t.Errorf("ValidationSucceeded %+v, want %s %s", v, tc.status, ReasonDependenciesNotReady)
				}
			})
		}
	}
}

// TestConditionsStartUnknown: a class's conditions start as operatorpkg
// starts them, Unknown (AwaitingReconciliation), so a part EC2 could not
// be asked for on the first try shows Unknown, not False, and Ready lists
// it as ReconcilingDependents; a validation failure of the class's own
// (MarkNotValid) makes Ready False naming ValidationSucceeded among the
// waiting parts.
func TestConditionsStartUnknown(t *testing.T) {
	now := metav1.Now()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	ApplyStatus(nc, Resolved{}, &ResolveError{AMIs: errors.New("throttled")}, now)
	ami := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionAMIsReady)
	ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionReady)
	if ami == nil || ami.Status != metav1.ConditionUnknown || ami.Reason != "AwaitingReconciliation" || ami.Message != "object is awaiting reconciliation" {
		t.Errorf("AMIsReady %+v, want Unknown AwaitingReconciliation", ami)
	}
	if ready.Status != metav1.ConditionUnknown || ready.Reason != "ReconcilingDependents" || ready.Message != "AMIsReady=Unknown, ValidationSucceeded=Unknown" {
		t.Errorf("Ready %+v", ready)
	}
	fresh := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	MarkNotValid(fresh, "ClusterDiscoveryFailed", "cluster unknown", now)
	ready = meta.FindStatusCondition(fresh.Status.Conditions, awsv1.ConditionReady)
	if len(fresh.Status.Conditions) != 7 || ready.Status != metav1.ConditionFalse || ready.Reason != "UnhealthyDependents" ||
		!strings.Contains(ready.Message, "ValidationSucceeded=False") || !strings.Contains(ready.Message, "SubnetsReady=Unknown") {
		t.Errorf("conditions %+v", fresh.Status.Conditions)
	}
}
