package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/testenv"
	"github.com/joiner-dev/joiner/userdata"
)

// TestLifecycleWithSim runs provisioner, launcher and lifecycle against a
// real control plane and the simulated EC2 region: the sim registers each
// instance's Node from its user data (with the pool's startup taint), the
// lifecycle registers and initializes every NodeClaim (removing the startup
// taint, as the coordinator does for the sim), and kube-scheduler can then
// bind every pod (no pod tolerates the startup taint).
func TestLifecycleWithSim(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane (skipped under -short)")
	}
	env := testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true, Scheduler: true,
		Controllers: []string{"*", "-node-lifecycle-controller"},
		// No node lifecycle controller to lift admission's not-ready taint.
		APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}})
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx

	const cluster = "lc"
	prov := simstack.Cloud(t, r, env.Client, 300*time.Millisecond, cluster, log)
	clients, cache := simstack.Kube(t, r, env.Config, log)
	state := fsm.New()
	raft := fsmtest.New(state)
	reg := prometheus.NewRegistry()
	rec := kube.NewRecorder(ctx, clients.Kube, "joiner")
	catalog, views := simstack.Classes(t, r, clients, cache, prov, state, log)
	launch := launcher.New(launcher.Config{Cluster: cluster, Interval: 200 * time.Millisecond},
		launcher.Deps{Cloud: prov, Raft: raft, State: state, Log: log})
	p, err := provisioner.New(provisioner.Config{
		Cluster:   userdata.Cluster{Name: cluster, Endpoint: env.Config.Host, ServiceCIDR: "10.100.0.0/16"},
		BatchIdle: 300 * time.Millisecond, BatchMax: 2 * time.Second, Resync: time.Second, Wake: launch.Wake,
	}, provisioner.Deps{Cache: cache, Kube: clients, State: state, Raft: raft, Cloud: prov, Views: views, Classes: catalog,
		Registerer: reg, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := New(Config{RemoveStartupTaints: true, Resync: time.Second}, Deps{Cache: cache, Claims: clients, Nodes: clients.Kube,
		State: state, Raft: raft, Cloud: prov, Classes: catalog, Registerer: reg, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Go(launch.Run)
	r.Go(p.Run)
	r.Go(lc.Run)

	simstack.ApplyManifests(t, ctx, clients, "testdata/pool.yaml")
	replicas := int32(6)
	simstack.CreateInflate(t, ctx, clients.Kube, replicas, "3")

	simstack.Eventually(t, 2*time.Minute, "every pod bound and every nodeclaim ready", func() (bool, string) {
		pods, err := clients.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		claims := cache.NodeClaims()
		ready := 0
		for _, nc := range claims {
			if isTrue(nc.Status.Conditions, karpv1.ConditionReady) {
				ready++
			}
		}
		return bound == int(replicas) && ready == len(claims) && ready > 0,
			fmt.Sprintf("pods %d bound %d nodeclaims %d ready %d nodes %d", len(pods.Items), bound, len(claims), ready, len(cache.Nodes()))
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
