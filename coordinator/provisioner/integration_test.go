package provisioner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/simstack/provisioning"
	"github.com/joiner-dev/joiner/test/testenv"
)

const clusterName = "it"

// TestProvisionDeployment runs the provisioner and launcher against a real
// control plane (kube-scheduler binds the pods) and the simulated EC2
// region reached through the real SDK: a 12-replica Deployment gets
// NodeClaims, instances and Nodes, and every pod binds; one instance per
// launch intent; scaling to zero leaves the NodeClaims alone.
func TestProvisionDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane (skipped under -short)")
	}
	// The node lifecycle controller stays on: it lifts the not-ready taint
	// new Nodes get once the sim reports them Ready (and the sim renews
	// their heartbeats).
	env := testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true, Scheduler: true})
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx
	stack := provisioning.Start(t, r, env.Client, env.Config, clusterName, 500*time.Millisecond, log)
	prov, clients, cache, state := stack.Cloud, stack.Clients, stack.Cache, stack.State

	simstack.ApplyManifests(t, ctx, clients, "testdata/pool.yaml")
	replicas := int32(12)
	simstack.CreateInflate(t, ctx, clients.Kube, replicas, "1")

	simstack.Eventually(t, 2*time.Minute, "every pod bound", func() (bool, string) {
		all, bound, _, err := provisioning.Pods(ctx, clients.Kube, "app=inflate")
		if err != nil {
			return false, err.Error()
		}
		nodes := ""
		for _, n := range cache.Nodes() {
			nodes += fmt.Sprintf(" [%s taints=%v alloc=%v ready=%v]", n.Name, n.Spec.Taints, n.Status.Allocatable.Cpu(), n.Status.Conditions)
		}
		return all == int(replicas) && bound == int(replicas),
			"pods " + itoa(all) + " bound " + itoa(bound) + " nodeclaims " + itoa(len(cache.NodeClaims())) + " nodes" + nodes
	})

	// One instance per launch intent, one NodeClaim per intent.
	insts, err := prov.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, in := range insts {
		id := in.Tags[karpv1.TagLaunchID]
		if prev, dup := seen[id]; dup {
			t.Fatalf("launch %s has two instances: %s and %s", id, prev, in.ID)
		}
		seen[id] = in.ID
	}
	// The cache and the launcher may lag the pods by a pass.
	var claims []*karpv1.NodeClaim
	simstack.Eventually(t, 2*time.Minute, "one instance per nodeclaim, every intent launched", func() (bool, string) {
		insts, err := prov.List(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]string{}
		for _, in := range insts {
			seen[in.Tags[karpv1.TagLaunchID]] = in.ID
		}
		claims = cache.NodeClaims()
		if len(claims) != len(insts) || len(claims) == 0 {
			return false, fmt.Sprintf("%d nodeclaims, %d instances", len(claims), len(insts))
		}
		for _, nc := range claims {
			id := nc.Annotations[karpv1.AnnotationLaunchID]
			if _, ok := seen[id]; !ok {
				return false, fmt.Sprintf("nodeclaim %s: launch %q has no instance", nc.Name, id)
			}
			if in, ok := state.Intent(id); !ok || in.State != fsm.IntentLaunched {
				return false, fmt.Sprintf("nodeclaim %s: intent %q state %q", nc.Name, id, in.State)
			}
		}
		return true, ""
	})
	t.Logf("%d pods on %d nodeclaims", replicas, len(claims))

	// Scale to zero: nothing is disrupted by the provisioner.
	zero := int32(0)
	cur, err := clients.Kube.AppsV1().Deployments("default").Get(ctx, "inflate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = &zero
	if _, err := clients.Kube.AppsV1().Deployments("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without a kubelet, deleted pods stay Terminating: wait for that.
	simstack.Eventually(t, time.Minute, "pods terminating", func() (bool, string) {
		_, _, live, err := provisioning.Pods(ctx, clients.Kube, "app=inflate")
		if err != nil {
			return false, err.Error()
		}
		return live == 0, "live pods " + itoa(live)
	})
	time.Sleep(2 * time.Second) // a few provisioner and lifecycle passes
	if got := len(cache.NodeClaims()); got != len(claims) {
		t.Fatalf("after scale to zero: %d nodeclaims, want %d", got, len(claims))
	}
}

func itoa(n int) string {
	return resource.NewQuantity(int64(n), resource.DecimalSI).String()
}
