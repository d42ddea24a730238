package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// podCache is the informer cache as PodEvents reads it, and the status
// writer it writes through.
type podCache struct {
	now    time.Time
	pods   []*corev1.Pod
	claims map[string]*karpv1.NodeClaim
	nodes  map[string]*corev1.Node // by provider ID
	writes int
	err    error
}

func (c *podCache) NodeByProviderID(id string) *corev1.Node { return c.nodes[id] }

// claimOn adds a NodeClaim and its Node (named node, linked by provider ID).
func (c *podCache) claimOn(name, node string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-" + node
	nc.Status.NodeName = node
	c.claims[name] = nc
	c.nodes[nc.Status.ProviderID] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	return nc
}

func (c *podCache) Pods() []*corev1.Pod { return c.pods }
func (c *podCache) NodeClaims() []*karpv1.NodeClaim {
	var out []*karpv1.NodeClaim
	for _, nc := range c.claims {
		out = append(out, nc)
	}
	return out
}
func (c *podCache) Changes() (<-chan struct{}, func()) { return nil, func() {} }

func (c *podCache) UpdateNodeClaimStatus(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if c.err != nil {
		return nil, c.err
	}
	c.writes++
	c.claims[nc.Name] = nc
	return nc, nil
}

func (c *podCache) bind(name, node string, uid types.UID, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := testPod(name, "100m")
	p.UID, p.Spec.NodeName = uid, node
	for _, m := range mutate {
		m(p)
	}
	c.pods = append(c.pods, p)
	return p
}

func (c *podCache) last(claim string) time.Time { return c.claims[claim].Status.LastPodEventTime.Time }

// PodEvents writes lastPodEventTime as Karpenter's podevents controller
// does: a pod bound to the node, finishing or terminating is an event
// (DaemonSet pods are not), events within 10 s of the recorded one are not
// written, and the first pass only takes stock.
func TestLastPodEventTimeFollowsPodEvents(t *testing.T) {
	c := &podCache{now: t0, claims: map[string]*karpv1.NodeClaim{}, nodes: map[string]*corev1.Node{}}
	for _, n := range []string{"a", "b"} {
		c.claimOn("nc-"+n, n)
	}
	web := c.bind("web", "a", "u1")
	pe := NewPodEvents(PodEventsConfig{Now: func() time.Time { return c.now }}, c, c, nil)
	pass := func() {
		t.Helper()
		if err := pe.Reconcile(context.Background()); err != nil {
			t.Fatalf("pass: %v", err)
		}
	}
	pass()
	if c.writes != 0 {
		t.Fatalf("first pass wrote %d times", c.writes)
	}

	// A pod bound to b.
	c.now = t0.Add(time.Minute)
	c.bind("api", "b", "u2")
	pass()
	if !c.last("nc-b").Equal(c.now) || !c.last("nc-a").IsZero() || c.writes != 1 {
		t.Fatalf("after a bind: a %v, b %v, %d writes", c.last("nc-a"), c.last("nc-b"), c.writes)
	}

	// Another within 10 s: not written (Karpenter's dedupe).
	c.now = c.now.Add(5 * time.Second)
	c.bind("api-2", "b", "u3")
	pass()
	if c.writes != 1 {
		t.Fatalf("event within the dedupe window written")
	}

	// A DaemonSet pod is no event; a pod going terminal is.
	c.now = c.now.Add(time.Minute)
	c.bind("ds-a", "a", "u4", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}
	})
	pass()
	if c.writes != 1 {
		t.Fatalf("DaemonSet pod wrote an event")
	}
	web.Status.Phase = corev1.PodSucceeded
	pass()
	if !c.last("nc-a").Equal(c.now) {
		t.Fatalf("terminal pod: a %v, want %v", c.last("nc-a"), c.now)
	}

	// A terminating pod is an event; a failed write is retried (a
	// conflict, another writer first, is not reported as a failure).
	c.now = c.now.Add(time.Minute)
	c.pods[1].DeletionTimestamp = &metav1.Time{Time: c.now}
	c.err = errors.New("connection refused")
	if err := pe.Reconcile(context.Background()); err == nil {
		t.Fatal("failed write not reported")
	}
	c.err = apierrors.NewConflict(schema.GroupResource{Group: karpv1.Group, Resource: "nodeclaims"}, "nc-b", errors.New("the object has been modified"))
	if err := pe.Reconcile(context.Background()); err != nil {
		t.Fatalf("a conflict reported as a failure: %v", err)
	}
	c.err = nil
	at := c.now
	c.now = c.now.Add(time.Second)
	pass()
	if !c.last("nc-b").Equal(at) {
		t.Fatalf("terminating pod: b %v, want %v (the event's time, written on retry)", c.last("nc-b"), at)
	}

	// A StatefulSet pod recreated under its name on the same node is an
	// event (a new UID).
	c.now = c.now.Add(time.Minute)
	c.pods[2].UID = "u3-again"
	pass()
	if !c.last("nc-b").Equal(c.now) {
		t.Fatalf("recreated pod: b %v, want %v", c.last("nc-b"), c.now)
	}
}

// TestPodEventsAsKarpenter: Karpenter v1.14.1's nodeclaim podevents suite.
// Karpenter reconciles each pod event as it comes; Joiner's loop compares
// passes, and its first pass only takes stock (README: a new leader does
// not count every pod as an event), so each case starts with a pass over
// the node without the pod, then binds it.
func TestPodEventsAsKarpenter(t *testing.T) {
	type step struct {
		after time.Duration // since the previous step
		bind  string        // a pod bound to node "n" ("": none)
		// want is lastPodEventTime then, as an offset from t0 (-1: unset).
		want time.Duration
	}
	const unset = -1
	for _, tc := range []struct {
		name   string
		claim  func(c *podCache) // puts the NodeClaim (and Node) in the cache
		before time.Duration     // lastPodEventTime already there, before t0 (0: unset)
		steps  []step
		writes int
	}{
		{name: "should set the nodeclaim lastPodEvent", claim: func(c *podCache) { c.claimOn("nc", "n") },
			steps: []step{{bind: "p", want: 0}}, writes: 1},
		{name: "should not set the nodeclaim lastPodEvent when the node does not exist",
			claim: func(c *podCache) { nc := c.claimOn("nc", "n"); delete(c.nodes, nc.Status.ProviderID) },
			steps: []step{{bind: "p", want: unset}}},
		{name: "should succeed when the nodeclaim lastPodEvent when the nodeclaim does not exist",
			claim: func(c *podCache) { nc := c.claimOn("nc", "n"); delete(c.claims, nc.Name) }, steps: []step{{bind: "p"}}},
		{name: "should set the nodeclaim lastPodEvent when it's been set before", claim: func(c *podCache) { c.claimOn("nc", "n") },
			before: 5 * time.Minute, steps: []step{{bind: "p", want: 0}}, writes: 1},
		{name: "should only set the nodeclaim lastPodEvent once within the dedupe timeframe", claim: func(c *podCache) { c.claimOn("nc", "n") },
			steps: []step{{bind: "p", want: 0}, {after: 5 * time.Second, bind: "q", want: 0}, {after: 5 * time.Second, bind: "r", want: 10 * time.Second}}, writes: 2},
		// Karpenter's IsManaged, beyond its suite: another provider's
		// NodeClaim is not written.
		{name: "another provider's NodeClaim is left alone", claim: func(c *podCache) {
			c.claimOn("nc", "n").Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		}, steps: []step{{bind: "p", want: unset}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &podCache{now: t0.Add(-time.Minute), claims: map[string]*karpv1.NodeClaim{}, nodes: map[string]*corev1.Node{}}
			tc.claim(c)
			if nc := c.claims["nc"]; nc != nil && tc.before > 0 {
				nc.Status.LastPodEventTime = metav1.NewTime(t0.Add(-tc.before))
			}
			pe := NewPodEvents(PodEventsConfig{Now: func() time.Time { return c.now }}, c, c, nil)
			if err := pe.Reconcile(context.Background()); err != nil { // takes stock
				t.Fatal(err)
			}
			c.now = t0
			for i, s := range tc.steps {
				c.now = c.now.Add(s.after)
				if s.bind != "" {
					c.bind(s.bind, "n", types.UID("uid-"+s.bind))
				}
				if err := pe.Reconcile(context.Background()); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				nc := c.claims["nc"]
				if nc == nil {
					continue
				}
				want := time.Time{}
				switch {
				case s.want >= 0:
					want = t0.Add(s.want)
				case tc.before > 0:
					want = t0.Add(-tc.before)
				}
				if got := nc.Status.LastPodEventTime.Time; !got.Equal(want) {
					t.Fatalf("step %d: lastPodEventTime %v, want %v", i, got, want)
				}
			}
			if c.writes != tc.writes {
				t.Errorf("%d writes, want %d", c.writes, tc.writes)
			}
		})
	}
}
