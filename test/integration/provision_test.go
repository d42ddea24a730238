// Package integration runs Joiner as real processes (internal/harness): the
// test control plane, `joiner sim` and three `joiner coordinator` replicas.
// The tests skip under -short and when the control plane tools are not
// built (`make tools`).
package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/testenv"
)

const (
	namespace = "default"
	selector  = "app=inflate"
	replicas  = 50
)

// examples reads examples/nodepool.yaml (with consolidation off: this test
// checks that NodeClaims stay when their pods go; at most 8 vCPUs per
// instance) and examples/deployment.yaml with n replicas.
func examples(t *testing.T, n int) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "examples")
	var objs []*unstructured.Unstructured
	for _, f := range []string{"nodepool.yaml", "deployment.yaml"} {
		o, err := testenv.ReadObjects(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "NodePool":
			err = unstructured.SetNestedField(o.Object, "Never", "spec", "disruption", "consolidateAfter")
			if err == nil {
				// Small instances: the 50 pods need several NodeClaims, so
				// the leader dies with some of them still to launch.
				reqs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "requirements")
				reqs = append(reqs, map[string]any{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": []any{"9"}})
				err = unstructured.SetNestedSlice(o.Object, reqs, "spec", "template", "spec", "requirements")
			}
		case "Deployment":
			err = unstructured.SetNestedField(o.Object, int64(n), "spec", "replicas")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// waitFor polls the cluster state until cond holds, a process dies or ctx
// ends; it logs a status line now and then.
func waitFor(ctx context.Context, t *testing.T, h *harness.Harness, what string, killed []string, cond func(*harness.State) bool) *harness.State {
	t.Helper()
	return pollState(ctx, t, h, selector, what, killed, 50*time.Millisecond, cond)
}

// pollState polls the state of the pods matching sel every interval
// until cond holds (cond may fail the test), a process other than killed
// dies or ctx ends; it logs a status line every 10 s.
func pollState(ctx context.Context, t *testing.T, h *harness.Harness, sel, what string, killed []string, every time.Duration, cond func(*harness.State) bool) *harness.State {
	t.Helper()
	var last time.Time
	var st *harness.State
	for {
		if err := h.CheckAlive(killed...); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		var err error
		st, err = h.State(ctx, namespace, sel)
		if err == nil && cond(st) {
			t.Logf("%s: %s", what, st.Line())
			return st
		}
		if err == nil && time.Since(last) > 10*time.Second {
			t.Logf("waiting for %s: %s", what, st.Line())
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			line := "no state"
			if st != nil {
				line = st.Line()
			}
			t.Fatalf("waiting for %s: %v (last: %s)", what, ctx.Err(), line)
		case <-time.After(every):
		}
	}
}

// TestProvisionWithLeaderKill is issue 9's process integration test: a
// NodePool, an EC2NodeClass and a 50-replica Deployment are applied to a
// cluster with three coordinator processes; the leader is killed as soon
// as the first NodeClaim appears. In the end every pod is bound, no launch
// produced two live instances, every NodeClaim has exactly one instance;
// after a scale to 0 the NodeClaims stay; after Stop no process is left.
func TestProvisionWithLeaderKill(t *testing.T) {
	h, ctx := harness.StartReady(t, harness.Options{BootDelay: time.Second, Kubelet: true}, 12*time.Minute)
	leader, err := h.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader: %s", leader.Name)

	if err := h.Apply(ctx, examples(t, replicas)...); err != nil {
		t.Fatal(err)
	}
	// Kill the leader mid-scale-up: right after the first NodeClaim shows.
	st := waitFor(ctx, t, h, "the first nodeclaim", nil, func(s *harness.State) bool { return len(s.NodeClaims) > 0 })
	if err := h.Kill(leader.Name); err != nil {
		t.Fatal(err)
	}
	killed := []string{leader.Name}
	launched := 0
	for _, nc := range st.NodeClaims {
		if nc.Launched {
			launched++
		}
	}
	t.Logf("killed leader %s with %d nodeclaim(s) (%d launched), %d instance(s), %d/%d pods bound",
		leader.Name, len(st.NodeClaims), launched, st.LiveInstances(), st.Bound, st.Pods)
	next, err := h.WaitLeader(ctx, leader.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader: %s", next.Name)
	if err := h.Restart(leader.Name); err != nil {
		t.Fatal(err)
	}
	killed = nil

	st = waitFor(ctx, t, h, "every pod bound", killed, func(s *harness.State) bool {
		return s.Pods == replicas && s.Bound == replicas
	})
	st = waitFor(ctx, t, h, "one running instance per nodeclaim", killed, func(s *harness.State) bool {
		return len(oneInstancePerClaim(s)) == 0 && len(s.Duplicates()) == 0 && len(s.Nodes) > 0 && len(s.Nodes) >= len(s.NodeClaims)
	})
	if dup := st.Duplicates(); len(dup) > 0 {
		t.Errorf("duplicate instances: %v", dup)
	}
	if len(st.Nodes) == 0 || len(st.Nodes) < len(st.NodeClaims) {
		t.Errorf("%d nodes for %d nodeclaims", len(st.Nodes), len(st.NodeClaims))
	}
	claims := claimNames(st)
	t.Logf("nodeclaims after scale-up: %v; nodes %s", claims, st.Types())

	// Scale to 0: the NodeClaims stay (consolidation is off in this pool).
	if err := h.ScaleDeployment(ctx, namespace, "inflate", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, h, "no pods", killed, func(s *harness.State) bool { return s.Pods == 0 })
	// Give the leader loops time to act on the change; nothing should.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(10 * time.Second):
	}
	st, err = h.State(ctx, namespace, selector)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimNames(st); !slices.Equal(got, claims) {
		t.Errorf("nodeclaims after scale to 0: %v, want %v", got, claims)
	}
	for _, nc := range st.NodeClaims {
		if nc.Deleting {
			t.Errorf("nodeclaim %s is being deleted after scale to 0 (joiner.io/disruption-reason=%q)", nc.Name, nc.DisruptionReason)
		}
	}
	if dup := st.Duplicates(); len(dup) > 0 {
		t.Errorf("duplicate instances after scale to 0: %v", dup)
	}

	// Every process the harness started is gone after Stop.
	pids := h.PIDs()
	h.Stop()
	for _, pid := range pids {
		if testenv.ProcessAlive(pid) {
			t.Errorf("process %d alive after Stop", pid)
		}
	}
}

// oneInstancePerClaim returns a message per NodeClaim that does not have
// exactly one live instance tagged with its name.
func oneInstancePerClaim(s *harness.State) []string {
	count := map[string]int{}
	for _, in := range s.Instances {
		if in.State == "pending" || in.State == "running" {
			count[in.Tags[karpv1.TagNodeClaim]]++
		}
	}
	var out []string
	for _, nc := range s.NodeClaims {
		if n := count[nc.Name]; n != 1 {
			out = append(out, fmt.Sprintf("%s: %d instances", nc.Name, n))
		}
	}
	sort.Strings(out)
	return out
}

func claimNames(s *harness.State) []string {
	var names []string
	for _, nc := range s.NodeClaims {
		names = append(names, nc.Name)
	}
	slices.Sort(names)
	return names
}
