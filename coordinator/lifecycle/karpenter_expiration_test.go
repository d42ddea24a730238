package lifecycle

// Karpenter v1.14.1's NodeClaim expiration and hydration suites, and its
// Node hydration suite. Joiner's disruption controller expires NodeClaims
// that have a Node (coordinator/disruption, karpenter_expiration_test.go);
// the lifecycle expires those that have none, which the disruption
// controller never sees.

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/observe"
)

var foreignRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}

func expireAfter(d karpv1.Duration) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) { nc.Spec.ExpireAfter = d }
}

// TestExpirationAsKarpenter: a NodeClaim past its expireAfter is deleted
// even when no Node ever joined (Karpenter's expiration controller acts on
// every NodeClaim it manages), and counted in
// karpenter_nodeclaims_disrupted_total as expired, once.
func TestExpirationAsKarpenter(t *testing.T) {
	thirty := expireAfter(karpv1.NewDuration(30 * time.Second))
	adoptedForeign := func(nc *karpv1.NodeClaim) { nc.Annotations, nc.Spec.NodeClassRef = nil, foreignRef.DeepCopy() }
	spot := func(nc *karpv1.NodeClaim) { nc.Labels[karpv1.LabelCapacityType] = "spot" }
	// Registered, then its Node went (deleted by hand).
	nodeGone := func(nc *karpv1.NodeClaim) {
		launchedClaim(t0)(nc)
		withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0)(nc)
	}
	for _, tc := range []struct {
		name     string
		claim    *karpv1.NodeClaim
		intent   fsm.IntentState // "": none
		node     bool
		after    time.Duration
		expired  bool
		capacity string // the capacity_type label counted
	}{
		{name: `Metrics "should fire a karpenter_nodeclaims_disrupted_total metric when expired"`, claim: claim(thirty), intent: fsm.IntentPending,
			after: 60 * time.Second, expired: true},
		{name: `Metrics "should fire a karpenter_nodeclaims_disrupted_total metric when expired" (a spot NodeClaim)`, claim: claim(thirty, spot, launchedClaim(t0)),
			intent: fsm.IntentLaunched, after: 60 * time.Second, expired: true, capacity: "spot"},
		{name: `Expiration "should remove nodeclaims that are expired"`, claim: claim(thirty), intent: fsm.IntentPending, after: 60 * time.Second, expired: true},
		{name: `Expiration "should ignore expired NodeClaims that are not managed by this Karpenter instance"`, claim: claim(thirty, adoptedForeign),
			after: 60 * time.Second},
		{name: `"should not remove the NodeClaims when expiration is disabled"`, claim: claim(expireAfter(karpv1.NeverDuration())), intent: fsm.IntentPending,
			after: 60 * time.Second},
		{name: `"should not remove non-expired NodeClaims"`, claim: claim(expireAfter(karpv1.NewDuration(200 * time.Second))), intent: fsm.IntentPending,
			after: 60 * time.Second},
		// "should delete NodeClaims if the nodeClaim is expired but the node
		// isn't": a NodeClaim with a Node is the disruption controller's
		// (coordinator/disruption's port of this suite); the lifecycle
		// leaves it.
		{name: "expired with its Node there: left to the disruption controller", claim: claim(thirty, launchedClaim(t0),
			withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0)), intent: fsm.IntentLaunched, node: true, after: time.Hour},
		{name: "launched, no Node yet, expired before the registration timeout", claim: claim(expireAfter(karpv1.NewDuration(5*time.Minute)), launchedClaim(t0)),
			intent: fsm.IntentLaunched, after: 6 * time.Minute, expired: true, capacity: "spot"},
		{name: "registered, its Node gone, expired", claim: claim(thirty, nodeGone), intent: fsm.IntentLaunched, after: time.Hour, expired: true, capacity: "spot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.capacity != "" {
				tc.claim.Labels[karpv1.LabelCapacityType] = tc.capacity
			}
			h := newHarness(t, Config{}, tc.claim)
			if tc.intent != "" {
				h.commitIntent(tc.intent)
			}
			if tc.node {
				if _, err := h.kube.nodes.CoreV1().Nodes().Create(context.Background(), node(noTaints), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h.now = t0.Add(tc.after)
			h.reconcile()
			labels := map[string]string{"reason": "expired", "nodepool": "default", "capacity_type": tc.capacity}
			if !tc.expired {
				if len(h.kube.deleted) != 0 {
					t.Fatalf("deleted %v", h.kube.deleted)
				}
				if got, _ := observe.Sample(t, h.reg, "karpenter_nodeclaims_disrupted_total", labels); got != 0 {
					t.Fatalf("karpenter_nodeclaims_disrupted_total%v = %v", labels, got)
				}
				return
			}
			h.wantDeleted(ReasonExpired)
			// Karpenter's "shouldn't expire the same NodeClaim multiple
			// times": the termination finalizer holds it; a second pass
			// counts nothing more.
			h.reconcile()
			if len(h.kube.deleted) != 1 {
				t.Fatalf("deleted again: %v", h.kube.deleted)
			}
			if got, _ := observe.Sample(t, h.reg, "karpenter_nodeclaims_disrupted_total", labels); got != 1 {
				t.Fatalf("karpenter_nodeclaims_disrupted_total%v = %v, want 1", labels, got)
			}
		})
	}
}

// TestExpiresAt: Karpenter's "should return the requeue interval for the
// time between now and when the nodeClaim expires" (its controller requeues
// for then; Joiner's passes look every Resync): the NodeClaim expires
// expireAfter after its creation, not after its Node's.
func TestExpiresAt(t *testing.T) {
	nc := claim(expireAfter(karpv1.NewDuration(200 * time.Second)))
	at, ok := ExpiresAt(nc)
	if !ok || at.Sub(t0.Add(100*time.Second)) != 100*time.Second {
		t.Fatalf("ExpiresAt = %v %v, want 100 s after the claim's 100th second", at, ok)
	}
	for _, d := range []karpv1.Duration{karpv1.NeverDuration(), {}} {
		if _, ok := ExpiresAt(claim(expireAfter(d))); ok {
			t.Errorf("expireAfter %q expires", d.String())
		}
	}
}

// TestHydrationAsKarpenter: the karpenter.k8s.aws/ec2nodeclass label goes
// onto a NodeClaim and its Node that lack it (Karpenter's nodeclaim and
// node hydration suites), not onto another provider's.
func TestHydrationAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		foreign bool
	}{
		{`NodeClaim "should hydrate missing metadata onto the NodeClaim", Node "should hydrate missing metadata onto the Node"`, false},
		{`NodeClaim "should ignore NodeClaims which aren't managed by this Karpenter instance", Node "should ignore Nodes which aren't managed by this Karpenter instance"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Registered and initialized long ago (Karpenter's, adopted):
			// only hydration has anything to do.
			nc := claim(launchedClaim(t0), func(nc *karpv1.NodeClaim) {
				nc.Annotations = nil
				for _, c := range []string{karpv1.ConditionRegistered, karpv1.ConditionInitialized} {
					withCond(c, metav1.ConditionTrue, t0)(nc)
				}
				if tc.foreign {
					nc.Spec.NodeClassRef = foreignRef.DeepCopy()
				}
			})
			h := newHarness(t, Config{}, nc)
			if _, err := h.kube.nodes.CoreV1().Nodes().Create(context.Background(), node(noTaints), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.now = t0.Add(time.Hour)
			h.reconcile()
			want := "default"
			if tc.foreign {
				want = ""
			}
			if got := h.claim().Labels[karpv1.LabelNodeClass]; got != want {
				t.Errorf("nodeclaim label %s = %q, want %q", karpv1.LabelNodeClass, got, want)
			}
			if got := h.node().Labels[karpv1.LabelNodeClass]; got != want {
				t.Errorf("node label %s = %q, want %q", karpv1.LabelNodeClass, got, want)
			}
			// Nothing else changed: the claim's other labels stay.
			if h.claim().Labels["team"] != "a" {
				t.Errorf("nodeclaim labels %v", h.claim().Labels)
			}
		})
	}
}

// TestHydrateLabels: the label takes the class the NodeClaim names, is
// left alone when it does, and nothing is written without a reference.
func TestHydrateLabels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ref     *karpv1.NodeClassReference
		labels  map[string]string
		changed bool
		want    string
	}{
		{"missing", &karpv1.NodeClassReference{Name: "default"}, nil, true, "default"},
		{"another class named", &karpv1.NodeClassReference{Name: "default"}, map[string]string{karpv1.LabelNodeClass: "old"}, true, "default"},
		{"already there", &karpv1.NodeClassReference{Name: "default"}, map[string]string{karpv1.LabelNodeClass: "default"}, false, "default"},
		{"no reference", nil, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{NodeClassRef: tc.ref}}
			labels := tc.labels
			if got := HydrateLabels(nc, &labels); got != tc.changed || labels[karpv1.LabelNodeClass] != tc.want {
				t.Errorf("HydrateLabels = %v, label %q; want %v, %q", got, labels[karpv1.LabelNodeClass], tc.changed, tc.want)
			}
		})
	}
}
