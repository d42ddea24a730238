package events

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// show is an Event as "Kind/name Type Reason: message".
func show(e Event) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", e.Object), "*v1.")
	name := "<nil>"
	if o, err := meta.Accessor(e.Object); err == nil && o != nil {
		name = o.GetName()
	}
	return fmt.Sprintf("%s/%s %s %s: %s", kind, name, e.Type, e.Reason, e.Message)
}

// TestKarpentersWords: each constructor gives the reason, type, object and
// message Karpenter v1.14 (or its AWS provider) records for the same
// happening; the expected texts are Karpenter's, written out.
func TestKarpentersWords(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "p1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", UID: "n1"}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", UID: "c1"}}
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np1"}}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "ec1"}}
	end := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 300)
	cases := []struct {
		reason string
		got    []Event
		want   []string
	}{
		{Nominated, []Event{NominatedPod(pod, "default-abcde", "")}, []string{"Pod/web-1 Normal Nominated: Pod should schedule on: nodeclaim/default-abcde"}},
		{Nominated, []Event{NominatedPod(pod, "default-abcde", "ip-10-0-0-1")}, []string{"Pod/web-1 Normal Nominated: Pod should schedule on: nodeclaim/default-abcde, node/ip-10-0-0-1"}},
		{FailedScheduling, []Event{PodFailedToSchedule(pod, "incompatible with nodepool \"default\"")},
			[]string{`Pod/web-1 Warning FailedScheduling: Failed to schedule pod, incompatible with nodepool "default"`}},
		{NoCompatibleInstanceTypes, []Event{PoolHasNoInstanceTypes(pool, false), PoolHasNoInstanceTypes(pool, true)}, []string{
			"NodePool/default Warning NoCompatibleInstanceTypes: NodePool requirements filtered out all compatible available instance types",
			"NodePool/default Warning NoCompatibleInstanceTypes: NodePool requirements filtered out all compatible available instance types due to minValues incompatibility",
		}},
		{DisruptionLaunching, []Event{Launching(nc, "underutilized")}, []string{"NodeClaim/default-abcde Normal DisruptionLaunching: Launching NodeClaim: Underutilized"}},
		{DisruptionWaitingReadiness, []Event{WaitingOnReadiness(nc)}, []string{"NodeClaim/default-abcde Normal DisruptionWaitingReadiness: Waiting on readiness to continue disruption"}},
		{DisruptionTerminating, Terminating(node, nc, "Drifted"), []string{
			"Node/ip-10-0-0-1 Normal DisruptionTerminating: Disrupting Node: Drifted",
			"NodeClaim/default-abcde Normal DisruptionTerminating: Disrupting NodeClaim: Drifted",
		}},
		{Unconsolidatable, NodeUnconsolidatable(node, nc, "Can't replace with a cheaper node"), []string{
			"Node/ip-10-0-0-1 Normal Unconsolidatable: Can't replace with a cheaper node",
			"NodeClaim/default-abcde Normal Unconsolidatable: Can't replace with a cheaper node",
		}},
		{DisruptionBlocked, Blocked(node, nc, `Pdb "default/web" prevents pod evictions`), []string{
			`Node/ip-10-0-0-1 Normal DisruptionBlocked: Pdb "default/web" prevents pod evictions`,
			`NodeClaim/default-abcde Normal DisruptionBlocked: Pdb "default/web" prevents pod evictions`,
		}},
		{DisruptionBlocked, []Event{PoolBlockedFor(pool, karpv1.DisruptionReasonDrifted), PoolBlocked(pool)}, []string{
			"NodePool/default Normal DisruptionBlocked: No allowed disruptions for disruption reason Drifted due to blocking budget",
			"NodePool/default Normal DisruptionBlocked: No allowed disruptions due to blocking budget",
		}},
		{Evicted, []Event{PodEvicted(pod, "Underutilized")}, []string{"Pod/web-1 Normal Evicted: Evicted pod: Underutilized"}},
		{FailedDraining, []Event{DrainFailed(node, PDBBlocksEviction("default/web-1"))}, []string{
			"Node/ip-10-0-0-1 Warning FailedDraining: Failed to drain node, evicting pod violates a PDB (Pod=default/web-1)",
		}},
		{AwaitingVolumeDetachment, []Event{AwaitingVolumes(node, []string{"a", "b"}), AwaitingVolumes(node, []string{"a", "b", "c", "d", "e", "f", "g"})}, []string{
			"Node/ip-10-0-0-1 Normal AwaitingVolumeDetachment: Awaiting deletion of bound volumeattachments (a, b)",
			"Node/ip-10-0-0-1 Normal AwaitingVolumeDetachment: Awaiting deletion of bound volumeattachments (a, b, c, d, e and 2 other(s))",
		}},
		{ConsolidationCandidate, append(Candidate(node, nc, Command("replace", []string{"ip-10-0-0-1"}, 1), 0.0416),
			Candidate(node, nc, CommandForNode("ignored", "delete", "ip-10-0-0-1", 3), 0.5)...), []string{
			"Node/ip-10-0-0-1 Normal ConsolidationCandidate: Consolidation candidate: replace: [ip-10-0-0-1] -> [1 replacement] (savings: $0.04)",
			"NodeClaim/default-abcde Normal ConsolidationCandidate: Consolidation candidate: replace: [ip-10-0-0-1] -> [1 replacement] (savings: $0.04)",
			"Node/ip-10-0-0-1 Normal ConsolidationCandidate: Consolidation candidate: delete: [ip-10-0-0-1] (part of 3-node consolidation) (savings: $0.50)",
			"NodeClaim/default-abcde Normal ConsolidationCandidate: Consolidation candidate: delete: [ip-10-0-0-1] (part of 3-node consolidation) (savings: $0.50)",
		}},
		{ConsolidationRejected, Rejected(node, nc, Command("delete", []string{"ip-10-0-0-1"}, 0), "churn", 1.25), []string{
			"Node/ip-10-0-0-1 Normal ConsolidationRejected: Consolidation rejected: delete: [ip-10-0-0-1], reason: churn (savings: $1.25)",
			"NodeClaim/default-abcde Normal ConsolidationRejected: Consolidation rejected: delete: [ip-10-0-0-1], reason: churn (savings: $1.25)",
		}},
		{ConsolidationApproved, append(Approved(node, nc, 0.75, 0.5, 2, 10, 13.3333), PoolApproved(pool, math.Inf(1), 0.5, 2, 20, 0)), []string{
			"Node/ip-10-0-0-1 Normal ConsolidationApproved: score 0.75 >= threshold 0.50 (k: 2, savings 10.0%, disruption 13.3%)",
			"NodeClaim/default-abcde Normal ConsolidationApproved: score 0.75 >= threshold 0.50 (k: 2, savings 10.0%, disruption 13.3%)",
			"NodePool/default Normal ConsolidationApproved: score +Inf >= threshold 0.50 (k: 2, savings 20.0%, disruption 0.0%)",
		}},
		{TerminationGracePeriodExpiring, []Event{GracePeriodExpiring(node, "2026-11-27T12:00:00Z"), GracePeriodExpiring(nc, "soon")}, []string{
			"Node/ip-10-0-0-1 Warning TerminationGracePeriodExpiring: All pods will be deleted by 2026-11-27T12:00:00Z",
			"NodeClaim/default-abcde Warning TerminationGracePeriodExpiring: All pods will be deleted by soon",
		}},
		{InsufficientCapacityError, []Event{NoCapacity(nc, errors.New("all requested instance types were unavailable during launch")), NoCapacity(nc, errors.New(long))}, []string{
			"NodeClaim/default-abcde Warning InsufficientCapacityError: NodeClaim default-abcde event: all requested instance types were unavailable during launch",
			"NodeClaim/default-abcde Warning InsufficientCapacityError: NodeClaim default-abcde event: " + long + "...",
		}},
		{NodeClassNotReady, []Event{ClassNotReady(nc, errors.New(`EC2NodeClass "default" not ready`))}, []string{
			`NodeClaim/default-abcde Warning NodeClassNotReady: NodeClaim default-abcde event: EC2NodeClass "default" not ready`,
		}},
		{UnregisteredTaintMissing, []Event{TaintMissing(nc)}, []string{
			"NodeClaim/default-abcde Warning UnregisteredTaintMissing: Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter-managed nodes",
		}},
		{FailedConsistencyCheck, []Event{ConsistencyIssue(nc, "expected 58 of resource pods, but found 29 (50.0% of expected)")}, []string{
			"NodeClaim/default-abcde Warning FailedConsistencyCheck: expected 58 of resource pods, but found 29 (50.0% of expected)",
		}},
		{"Launched", []Event{ConditionTransitioned(nc, "Launched", "Unknown", "True", "Launched", ""), ConditionTransitioned(nc, "Drifted", "Unknown", "True", "AMIDrift", "AMI drifted")}, []string{
			"NodeClaim/default-abcde Normal Launched: Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched",
			"NodeClaim/default-abcde Normal Drifted: Status condition transitioned, Type: Drifted, Status: Unknown -> True, Reason: AMIDrift, Message: AMI drifted",
		}},
		{Finalized, []Event{FinalizerRemoved(nc, "karpenter.sh/termination")}, []string{"NodeClaim/default-abcde Normal Finalized: Finalized karpenter.sh/termination"}},
		{SpotInterrupted, SpotInterruption(node, nc), []string{
			"NodeClaim/default-abcde Warning SpotInterrupted: Spot interruption warning was triggered",
			"Node/ip-10-0-0-1 Warning SpotInterrupted: Spot interruption warning was triggered",
		}},
		{SpotRebalanceRecommendation, RebalanceRecommendation(node, nc), []string{
			"NodeClaim/default-abcde Normal SpotRebalanceRecommendation: Spot rebalance recommendation was triggered",
			"Node/ip-10-0-0-1 Normal SpotRebalanceRecommendation: Spot rebalance recommendation was triggered",
		}},
		{CapacityReservationInstanceInterrupted, ReservationInterruption(node, nc), []string{
			"NodeClaim/default-abcde Warning CapacityReservationInstanceInterrupted: Capacity Reservation interruption warning was triggered",
			"Node/ip-10-0-0-1 Warning CapacityReservationInstanceInterrupted: Capacity Reservation interruption warning was triggered",
		}},
		{InstanceStopping, Stopping(node, nc), []string{
			"NodeClaim/default-abcde Warning InstanceStopping: Instance is stopping",
			"Node/ip-10-0-0-1 Warning InstanceStopping: Instance is stopping",
		}},
		{InstanceTerminating, InstanceGoingAway(node, nc), []string{
			"NodeClaim/default-abcde Warning InstanceTerminating: Instance is terminating",
			"Node/ip-10-0-0-1 Warning InstanceTerminating: Instance is terminating",
		}},
		{InstanceUnhealthy, Unhealthy(node, nc), []string{
			"NodeClaim/default-abcde Warning InstanceUnhealthy: An unhealthy warning was triggered for the instance",
			"Node/ip-10-0-0-1 Warning InstanceUnhealthy: An unhealthy warning was triggered for the instance",
		}},
		{TerminatingOnInterruption, InterruptionTerminates(node, nc), []string{
			"NodeClaim/default-abcde Warning TerminatingOnInterruption: Interruption triggered termination for the NodeClaim",
			"Node/ip-10-0-0-1 Warning TerminatingOnInterruption: Interruption triggered termination for the Node",
		}},
		{WaitingOnNodeClaimTermination, []Event{ClassWaitsForClaims(class, []string{"a", "b", "c", "d", "e", "f"})}, []string{
			"EC2NodeClass/default Normal WaitingOnNodeClaimTermination: Waiting on NodeClaim termination for a, b, c, d, e and 1 other(s)",
		}},
		// Joiner's own.
		{Cordoned, []Event{NodeCordoned(node, "spot-interruption", "notice i-1")}, []string{"Node/ip-10-0-0-1 Warning Cordoned: Cordoned (spot-interruption): notice i-1"}},
		{Draining, []Event{NodeDraining(node, end, "notice i-1")}, []string{"Node/ip-10-0-0-1 Warning Draining: Draining before 2026-11-27T12:00:00Z: notice i-1"}},
		{Drained, []Event{NodeDrained(node, "Drained: 3 evicted")}, []string{"Node/ip-10-0-0-1 Normal Drained: Drained: 3 evicted"}},
	}
	tested := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if len(tc.got) != len(tc.want) {
				t.Fatalf("%d Events, want %d", len(tc.got), len(tc.want))
			}
			for i, e := range tc.got {
				if got := show(e); got != tc.want[i] {
					t.Errorf("Event %d:\n got %s\nwant %s", i, got, tc.want[i])
				}
				if e.Reason == tc.reason {
					tested[tc.reason] = true
				}
			}
		})
	}
	for _, r := range karpenterReasons {
		if !tested[r] {
			t.Errorf("Karpenter's reason %s has no case", r)
		}
	}
}

// TestPublishSkipsMissingObjects: the Node half of an Event pair is left
// out while the Node does not exist.
func TestPublishSkipsMissingObjects(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	Publish(rec, SpotInterruption(nil, nc)...)
	Publish(rec, Event{Type: corev1.EventTypeNormal, Reason: "X", Message: "no object"})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if want := "Warning SpotInterrupted Spot interruption warning was triggered"; len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want [%q]", got, want)
	}
}
