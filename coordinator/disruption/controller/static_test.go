package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// staticCounter is a fake StaticCounter: fixed counts, and a record of
// whether the launch happened under its lock.
type staticCounter struct {
	mu     sync.Mutex
	held   bool
	counts map[string]disruption.StaticCount
}

func (s *staticCounter) Lock()   { s.mu.Lock(); s.held = true }
func (s *staticCounter) Unlock() { s.held = false; s.mu.Unlock() }
func (s *staticCounter) Counts(time.Time) map[string]disruption.StaticCount {
	return s.counts
}

func staticDriftCluster(t *testing.T) *cluster {
	c := newCluster(t)
	p := testPool("static")
	two := int64(2)
	p.Spec.Replicas = &two
	c.pools = []*karpv1.NodePool{p}
	c.hashes["static"] = "old"
	c.addNode("s1", "static", 2, testPod("web", "1"))
	c.addNode("s2", "static", 2)
	c.hashes["static"] = "new"
	return c
}

// Static drift: both drifted nodes of a static pool are replaced at once,
// one empty node of the pool each (under the static lock), then deleted as
// Drifted once the replacements are up.
func TestStaticDriftReplacesOneForOne(t *testing.T) {
	c := staticDriftCluster(t)
	ctl := c.controller(nil)
	counter := &staticCounter{counts: map[string]disruption.StaticCount{"static": {Active: 2}}}
	ctl.d.Static = counter
	launcher := ctl.d.Launcher
	ctl.d.Launcher = lockCheck{Launcher: launcher, counter: counter, t: t}
	c.reconcile(ctl)
	ops := c.takeOps()
	if len(ops) != 6 || ops[0] != "commit term-i-s1" || ops[1] != "commit term-i-s2" || !strings.HasPrefix(ops[2], "launch static-r") ||
		!strings.HasPrefix(ops[3], "launch static-r") || ops[4] != "taint s1" || ops[5] != "taint s2" {
		t.Fatalf("ops = %q, want two commits, two launches, two taints", ops)
	}
	reps := []string{strings.TrimPrefix(ops[2], "launch "), strings.TrimPrefix(ops[3], "launch ")}
	for _, r := range reps {
		if in, _ := c.fsm.Intent("intent-" + r); len(in.Pods) != 0 {
			t.Fatalf("replacement %s holds pods %v", r, in.Pods)
		}
	}
	for _, r := range reps {
		c.initialize(r)
	}
	c.reconcile(ctl)
	ops = c.takeOps()
	if !slices.Equal(ops, []string{"annotate s1 Drifted", "delete s1", "annotate s2 Drifted", "delete s2"}) {
		t.Fatalf("ops = %q, want both annotated Drifted and deleted", ops)
	}
}

// Counted again under the lock, a pool with no room left (limits.nodes,
// or NodeClaims the static loop launched meanwhile) postpones its drift.
func TestStaticDriftRecountedUnderTheLock(t *testing.T) {
	c := staticDriftCluster(t)
	c.pools[0].Spec.Limits = karpv1.Limits{karpv1.ResourceNodes: resource.MustParse("3")}
	ctl := c.controller(nil)
	counter := &staticCounter{counts: map[string]disruption.StaticCount{"static": {Active: 2}}}
	ctl.d.Static = counter
	in := ctl.input(ctl.pass(c.Build(c.now), c.now))
	res, err := disruption.Decide(in)
	if err != nil || res.Decision == nil || res.Decision.Method != disruption.MethodStaticDrift || len(res.Decision.Candidates) != 1 {
		t.Fatalf("decision %+v, %v: want one static drift (limits.nodes 3, 2 nodeclaims)", res, err)
	}
	// Meanwhile a third NodeClaim took the last room.
	counter.counts = map[string]disruption.StaticCount{"static": {Active: 3}}
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("ops = %q, want none (postponed)", ops)
	}
	counter.counts = map[string]disruption.StaticCount{"static": {Active: 2}}
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 3 || ops[0] != "commit term-i-s1" {
		t.Fatalf("ops = %q, want s1 replaced", ops)
	}
}

// A static pool over its replicas (a scale-down due, or a replacement of
// its own under way) postpones its drift until
// the static loop has brought it back (Karpenter's StaticDrift skips a
// pool whose running plus pending-disruption NodeClaims exceed its
// replicas; the static deprovisioning suite's counterpart of the "only
// running nodeclaims" rule).
func TestStaticDriftWaitsForScaleDown(t *testing.T) {
	cases := []struct {
		name   string
		counts disruption.StaticCount
		want   int // ops: 0 postponed, 3 for s1 replaced (commit, launch, taint)
	}{
		{name: "scale-down due", counts: disruption.StaticCount{Active: 3}},
		{name: "a replacement under way", counts: disruption.StaticCount{Active: 2, PendingDisruption: 1}},
		{name: "deleting ones do not hold it", counts: disruption.StaticCount{Active: 2, Deleting: 2}, want: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := staticDriftCluster(t)
			ctl := c.controller(nil)
			ctl.d.Static = &staticCounter{counts: map[string]disruption.StaticCount{"static": tc.counts}}
			c.reconcile(ctl)
			if ops := c.takeOps(); len(ops) != tc.want {
				t.Fatalf("ops = %q, want %d", ops, tc.want)
			}
		})
	}
}

type lockCheck struct {
	Launcher
	counter *staticCounter
	t       *testing.T
}

func (l lockCheck) LaunchClaims(ctx context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error) {
	if !l.counter.held {
		l.t.Error("static replacements launched without the static lock")
	}
	return l.Launcher.LaunchClaims(ctx, claims, pods, reason)
}
