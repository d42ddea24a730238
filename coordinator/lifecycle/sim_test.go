package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/simstack/provisioning"
)

// TestLifecycleWithSim runs provisioner, launcher and lifecycle against a
// real control plane and the simulated EC2 region: the sim registers each
// instance's Node from its user data (with the pool's startup taint), the
// lifecycle registers and initializes every NodeClaim (removing the startup
// taint, as the coordinator does for the sim), and kube-scheduler can then
// bind every pod (no pod tolerates the startup taint).
func TestLifecycleWithSim(t *testing.T) {
	env := simstack.SchedulingEnv(t)
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx
	stack := provisioning.Start(t, r, env.Client, env.Config, "lc", 300*time.Millisecond, log)
	clients, cache, state := stack.Clients, stack.Cache, stack.State

	simstack.ApplyManifests(t, ctx, clients, "testdata/pool.yaml")
	replicas := int32(6)
	simstack.CreateInflate(t, ctx, clients.Kube, replicas, "3")

	simstack.Eventually(t, 2*time.Minute, "every pod bound and every nodeclaim ready", func() (bool, string) {
		all, bound, _, err := provisioning.Pods(ctx, clients.Kube, "app=inflate")
		if err != nil {
			t.Fatal(err)
		}
		claims := cache.NodeClaims()
		ready := 0
		for _, nc := range claims {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionReady) {
				ready++
			}
		}
		return bound == int(replicas) && ready == len(claims) && ready > 0,
			fmt.Sprintf("pods %d bound %d nodeclaims %d ready %d nodes %d", all, bound, len(claims), ready, len(cache.Nodes()))
	})

	for _, nc := range cache.NodeClaims() {
		n := cache.NodeByProviderID(nc.Status.ProviderID)
		if n == nil || nc.Status.NodeName != n.Name {
			t.Fatalf("nodeclaim %s: node %v, status.nodeName %q", nc.Name, n, nc.Status.NodeName)
		}
		for _, k := range []string{karpv1.LabelRegistered, karpv1.LabelInitialized} {
			if n.Labels[k] != "true" {
				t.Errorf("node %s: label %s = %q", n.Name, k, n.Labels[k])
			}
		}
		if n.Labels["team"] != "lifecycle" || n.Labels[karpv1.LabelNodePool] != "general" {
			t.Errorf("node %s: nodeclaim labels not synced: %v", n.Name, n.Labels)
		}
		if !slices.Contains(n.Finalizers, karpv1.TerminationFinalizer) {
			t.Errorf("node %s: finalizers %v", n.Name, n.Finalizers)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "example.com/cni-not-ready" {
				t.Errorf("node %s: startup taint still there", n.Name)
			}
		}
		if nc.Status.Allocatable.Cpu().IsZero() || nc.Status.ImageID == "" || nc.Labels[karpv1.LabelInstanceType] == "" {
			t.Errorf("nodeclaim %s: launched status incomplete: %+v labels %v", nc.Name, nc.Status, nc.Labels)
		}
		in, _ := state.Intent(nc.Annotations[karpv1.AnnotationLaunchID])
		if inst, _ := state.Instance(in.InstanceID); inst.State != fsm.InstanceReady || inst.NodeName != n.Name {
			t.Errorf("nodeclaim %s: instance %+v, want ready on %s", nc.Name, inst, n.Name)
		}
	}
	t.Logf("%d pods on %d initialized nodeclaims", replicas, len(cache.NodeClaims()))
}
