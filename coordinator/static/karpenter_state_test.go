package static

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// The cases here port Karpenter v1.14.1's NodePoolState, the per-pool
// NodeClaim counts static capacity reads: "NodePoolState Tracking" of
// pkg/controllers/state/suite_test.go and statenodepool_test.go. Karpenter
// updates the counts event by event and reserves node counts against
// limits.nodes; Joiner counts from the cache and raft each time (Collect)
// under a lock held from counting to committing the launches (Counter),
// whose committed intents count from then on. Karpenter's MarkForDeletion
// is a pending termination intent in raft, its UnmarkForDeletion the
// cancellation, and its release of a failed launch a failed intent, which
// no longer counts. One difference is kept (README, static NodePools): a
// NodeClaim whose termination is pending counts as pending disruption until
// it is deleted, where Karpenter's MarkForDeletion counts it as deleting.

// kState is the cluster a case counts: NodeClaims (pool, instance or ""
// for none, deleting) and raft's intents and terminations.
type kState struct {
	claims       []*karpv1.NodeClaim
	intents      []fsm.LaunchIntent
	terminations []fsm.TerminationIntent
}

func kClaim(name, pool, instance string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}}
	if pool != "" {
		nc.Labels = map[string]string{karpv1.LabelNodePool: pool}
	}
	if instance != "" {
		nc.Status.ProviderID = "aws:///us-east-1a/" + instance
	}
	return nc
}

func kDeleted(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	at := metav1.NewTime(t0)
	nc.DeletionTimestamp = &at
	return nc
}

func kMarked(state fsm.TerminationState, instances ...string) []fsm.TerminationIntent {
	var out []fsm.TerminationIntent
	for _, i := range instances {
		out = append(out, fsm.TerminationIntent{ID: "term-" + i, InstanceID: i, State: state, CreatedAt: t0})
	}
	return out
}

func (s kState) counts(now time.Time) map[string]disruption.StaticCount {
	return Counts(Collect(&Sources{Now: now, NodeClaims: s.claims, Intents: s.intents, Terminations: s.terminations,
		PodsByNode: map[string][]*corev1.Pod{}}))
}

// "NodePoolState Tracking": a NodeClaim's state in its pool's counts.
func TestKarpenterNodePoolStateTracking(t *testing.T) {
	now := t0.Add(time.Hour)
	count := func(active, deleting, pending int) disruption.StaticCount {
		return disruption.StaticCount{Active: active, Deleting: deleting, PendingDisruption: pending}
	}
	for _, tc := range []struct {
		name  string
		state kState
		want  map[string]disruption.StaticCount
	}{
		{name: "New NodeClaim gets added: should track NodeClaim in running state when created with ProviderID",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1")}},
			want:  map[string]disruption.StaticCount{"default": count(1, 0, 0)}},
		{name: "New NodeClaim gets added: should track NodeClaim without ProviderID",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim-no-provider", "default", "")}},
			want:  map[string]disruption.StaticCount{"default": count(1, 0, 0)}},
		{name: "New NodeClaim gets added: should not track NodeClaim that has no nodepool",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim-no-provider", "", "i-1")}}},
		{name: "New NodeClaim gets added: should track multiple NodeClaims in the same NodePool",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1"), kClaim("test-nodeclaim-2", "default", "i-2")}},
			want:  map[string]disruption.StaticCount{"default": count(2, 0, 0)}},
		{name: "New NodeClaim gets added: should track NodeClaims across different NodePools",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1"), kClaim("test-nodeclaim-2", "nodepool2", "i-2")}},
			want:  map[string]disruption.StaticCount{"default": count(1, 0, 0), "nodepool2": count(1, 0, 0)}},
		{name: "Updates to existing NodeClaim: should be a no-op when NodeClaim is already tracked and no state change",
			state: func() kState {
				nc := kClaim("test-nodeclaim", "default", "i-1")
				nc.Annotations = map[string]string{"test": "annotation"}
				return kState{claims: []*karpv1.NodeClaim{nc}}
			}(),
			want: map[string]disruption.StaticCount{"default": count(1, 0, 0)}},
		{name: "Updates to existing NodeClaim: should handle NodeClaim ProviderID change (the old one marked)",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-new")}, terminations: kMarked(fsm.TerminationPending, "i-old")},
			want:  map[string]disruption.StaticCount{"default": count(1, 0, 0)}},
		// Kept difference: pending disruption, Karpenter's deleting.
		{name: "Updates to existing NodeClaim: should handle NodeClaim ProviderID change (the new one marked)",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-new")}, terminations: kMarked(fsm.TerminationPending, "i-new")},
			want:  map[string]disruption.StaticCount{"default": count(0, 0, 1)}},
		{name: "Updates to existing NodeClaim: should move NodeClaim to deleting state when Node is marked for deletion",
			state: kState{claims: []*karpv1.NodeClaim{kDeleted(kClaim("test-nodeclaim", "default", "i-1"))}, terminations: kMarked(fsm.TerminationPending, "i-1")},
			want:  map[string]disruption.StaticCount{"default": count(0, 1, 0)}},
		{name: "Updates to existing NodeClaim: should handle NodeClaim cleanup correctly", state: kState{}},
		{name: "Mark NodeClaims pendingdisruption: should handle marking multiple NodeClaims (one)",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1"), kClaim("test-nodeclaim-2", "default", "i-2")},
				terminations: kMarked(fsm.TerminationPending, "i-1")},
			want: map[string]disruption.StaticCount{"default": count(1, 0, 1)}},
		{name: "Mark NodeClaims pendingdisruption: should handle marking multiple NodeClaims (both)",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1"), kClaim("test-nodeclaim-2", "default", "i-2")},
				terminations: kMarked(fsm.TerminationPending, "i-1", "i-2")},
			want: map[string]disruption.StaticCount{"default": count(0, 0, 2)}},
		{name: "DeleteNodeClaim: should remove NodeClaim from nodepool state", state: kState{}},
		// Once the disruption controller deletes them, deleting, as
		// Karpenter's MarkForDeletion counts them at once.
		{name: "MarkForDeletion: should handle marking multiple NodeClaims for deletion",
			state: kState{claims: []*karpv1.NodeClaim{kDeleted(kClaim("test-nodeclaim", "default", "i-1")), kDeleted(kClaim("test-nodeclaim-2", "default", "i-2"))},
				terminations: kMarked(fsm.TerminationPending, "i-1", "i-2")},
			want: map[string]disruption.StaticCount{"default": count(0, 2, 0)}},
		{name: "MarkForDeletion: should move NodeClaim from running to deleting state",
			state: kState{claims: []*karpv1.NodeClaim{kDeleted(kClaim("test-nodeclaim", "default", "i-1"))}},
			want:  map[string]disruption.StaticCount{"default": count(0, 1, 0)}},
		{name: "UnmarkForDeletion: should move NodeClaim from deleting to running state",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1")}, terminations: kMarked(fsm.TerminationCancelled, "i-1")},
			want:  map[string]disruption.StaticCount{"default": count(1, 0, 0)}},
		{name: "UnmarkForDeletion: should handle unmarking multiple NodeClaims",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("test-nodeclaim", "default", "i-1"), kClaim("test-nodeclaim-2", "default", "i-2")},
				terminations: kMarked(fsm.TerminationCancelled, "i-1", "i-2")},
			want: map[string]disruption.StaticCount{"default": count(2, 0, 0)}},
		// Counted from what is, a NodeClaim marked, pending disruption and
		// deleted at once is one NodeClaim in one state.
		{name: "Transitions: should handle concurrent NodeClaim updates and state changes",
			state: kState{claims: []*karpv1.NodeClaim{kDeleted(kClaim("race-test-nodeclaim", "default", "i-1"))},
				terminations: append(kMarked(fsm.TerminationPending, "i-1"), kMarked(fsm.TerminationCancelled, "i-1")...)},
			want: map[string]disruption.StaticCount{"default": count(0, 1, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.state.counts(now)
			if len(got) != len(tc.want) {
				t.Fatalf("counts %+v, want %+v", got, tc.want)
			}
			for pool, want := range tc.want {
				if got[pool] != want {
					t.Errorf("%s: %+v, want %+v", pool, got[pool], want)
				}
			}
		})
	}
}

// statenodepool_test.go's ReserveNodeCount and ReleaseNodeCount: how many
// NodeClaims a static pool may launch against limits.nodes. A reservation
// is a committed launch intent (it counts until its NodeClaim exists, then
// the NodeClaim does); a release is a launch that failed.
func TestKarpenterNodePoolStateReserve(t *testing.T) {
	now := t0.Add(time.Minute)
	committed := func(n int, state fsm.IntentState) []fsm.LaunchIntent {
		var out []fsm.LaunchIntent
		for i := range n {
			in := fsm.LaunchIntent{ID: string(rune('a' + i)), State: state, CreatedAt: t0, UpdatedAt: now}
			in.Spec.LaunchSpec = cloud.LaunchSpec{NodePool: "nodepool-2", NodeClaim: "nodepool-2-" + in.ID}
			out = append(out, in)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		state    kState
		replicas int64 // what the pool wants in all
		want     int   // launched, with limits.nodes 5
	}{
		{name: "ReserveNodeCount: should reserve requested capacity when available", replicas: 3, want: 3},
		{name: "ReserveNodeCount: should reserve requested capacity when available (then the rest)", state: kState{intents: committed(3, fsm.IntentPending)},
			replicas: 5, want: 2},
		{name: "ReserveNodeCount: should grant partial capacity when requested exceeds available", state: kState{intents: committed(4, fsm.IntentPending)},
			replicas: 9, want: 1},
		{name: "ReserveNodeCount: should return zero when no capacity available", state: kState{intents: committed(5, fsm.IntentPending)},
			replicas: 6},
		{name: "ReserveNodeCount: should account for running NodeClaims",
			state: kState{claims: []*karpv1.NodeClaim{kClaim("nodepool-2-x", "nodepool-2", "i-1")}}, replicas: 5, want: 4},
		{name: "ReserveNodeCount: should account for running NodeClaims (then none left)",
			state:    kState{claims: []*karpv1.NodeClaim{kClaim("nodepool-2-x", "nodepool-2", "i-1")}, intents: committed(4, fsm.IntentLaunching)},
			replicas: 6},
		{name: "ReserveNodeCount: should account for deleting NodeClaims",
			state: kState{claims: []*karpv1.NodeClaim{kDeleted(kClaim("nodepool-2-x", "nodepool-2", "i-1"))}}, replicas: 4, want: 4},
		{name: "ReleaseNodeCount: should release reserved capacity",
			state: kState{intents: append(committed(2, fsm.IntentPending), committed(3, fsm.IntentFailed)[2:]...)}, replicas: 6, want: 3},
		{name: "ReleaseNodeCount: should handle releasing more than reserved", state: kState{intents: committed(5, fsm.IntentFailed)},
			replicas: 5, want: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := withLimit(pool("nodepool-2", tc.replicas), 5)
			claims := Collect(&Sources{Now: now, NodeClaims: tc.state.claims, Intents: tc.state.intents, Terminations: tc.state.terminations})
			res := Decide(&Input{Now: now, NodePools: []*karpv1.NodePool{p}, Ready: map[string]bool{"nodepool-2": true}, Claims: claims})
			got := 0
			for _, l := range res.Launches {
				got += l.Count
			}
			if got != tc.want {
				t.Fatalf("launches %d, want %d (%+v)", got, tc.want, res)
			}
		})
	}
}
