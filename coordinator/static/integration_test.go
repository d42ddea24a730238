package static_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/static"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/simstack/provisioning"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestStaticPoolFollowsReplicas runs the static loop with the provisioner,
// launcher, lifecycle, nodeclass and termination loops against a real
// control plane and the simulated EC2 region: a NodePool with replicas: 3
// gets three nodes without a single pod; scaling it through the scale
// subresource (what `kubectl scale nodepool static --replicas=N` does) to 5
// and then to 2 brings it there, and the subresource reports the nodes.
func TestStaticPoolFollowsReplicas(t *testing.T) {
	// The node lifecycle controller lifts the not-ready taint new Nodes get
	// once the sim reports them Ready.
	env := testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true})
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx
	stack := provisioning.Start(t, r, env.Client, env.Config, "it", 300*time.Millisecond, log)
	counter := &static.Counter{Cache: stack.Cache, State: stack.State}
	loop := static.New(static.Config{Resync: time.Second, MinInterval: 100 * time.Millisecond},
		static.Deps{Cache: stack.Cache, Views: stack.Views, Counter: counter, Launcher: stack.Provisioner, Kube: stack.Clients, Log: log})
	term, err := termination.New(termination.Config{Resync: time.Second}, termination.Deps{Cache: stack.Cache, Claims: stack.Clients,
		Kube: stack.Clients.Kube, State: stack.State, Raft: stack.Raft, Cloud: stack.Cloud, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Go(loop.Run)
	r.Go(term.Run)

	simstack.ApplyManifests(t, ctx, stack.Clients, "testdata/static.yaml")

	// wantNodes waits until the pool has n NodeClaims, none deleting, each
	// with its registered Node, nothing else left over, and the scale
	// subresource reports n.
	wantNodes := func(n int) {
		t.Helper()
		simstack.Eventually(t, 2*time.Minute, fmt.Sprintf("%d nodes in static pool", n), func() (bool, string) {
			claims, nodes := 0, 0
			var states []string
			for _, nc := range stack.Cache.NodeClaims() {
				if nc.Labels[karpv1.LabelNodePool] != "static" {
					return false, "nodeclaim " + nc.Name + " of another pool"
				}
				claims++
				st := "active"
				if nc.DeletionTimestamp != nil {
					st = "deleting"
				}
				states = append(states, nc.Name+":"+st)
			}
			for _, node := range stack.Cache.Nodes() {
				if node.Labels[karpv1.LabelNodePool] == "static" {
					nodes++
				}
			}
			scale, err := stack.Clients.Dynamic.Resource(kube.NodePoolsGVR).Get(ctx, "static", metav1.GetOptions{}, "scale")
			if err != nil {
				return false, err.Error()
			}
			spec, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
			status, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas")
			state := fmt.Sprintf("nodeclaims [%s], nodes %d, scale spec %d status %d", strings.Join(states, " "), nodes, spec, status)
			return claims == n && nodes == n && status == int64(n), state
		})
	}
	wantNodes(3)

	// kubectl scale patches the scale subresource.
	scaleTo := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := stack.Clients.Dynamic.Resource(kube.NodePoolsGVR).Patch(ctx, "static", types.MergePatchType, []byte(patch),
			metav1.PatchOptions{}, "scale"); err != nil {
			t.Fatalf("scaling to %d: %v", n, err)
		}
	}
	scaleTo(5)
	wantNodes(5)
	scaleTo(2)
	wantNodes(2)

	// Every instance left is one of the two NodeClaims'.
	simstack.Eventually(t, time.Minute, "instances of the scaled-down nodes terminated", func() (bool, string) {
		insts, err := stack.Cloud.List(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		live := 0
		for _, in := range insts {
			if !in.Gone() {
				live++
			}
		}
		return live == 2, fmt.Sprintf("%d live instances", live)
	})
}
