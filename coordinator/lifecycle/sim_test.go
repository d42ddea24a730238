package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/cloudadapter"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/internal/testenv"
	"github.com/joiner-dev/joiner/userdata"
)

// What the lead wires: the real types satisfy the lifecycle's interfaces.
var (
	_ Cache    = (*kube.Cache)(nil)
	_ Writer   = (*kube.Clients)(nil)
	_ State    = (*fsm.FSM)(nil)
	_ Cloud    = (*joineraws.Provider)(nil)
	_ Proposer = (*fsmtest.Direct)(nil)
)

func applyManifests(t *testing.T, ctx context.Context, c *kube.Clients, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		gvr := map[string]schema.GroupVersionResource{"NodePool": kube.NodePoolsGVR, "EC2NodeClass": kube.EC2NodeClassesGVR}[u.GetKind()]
		if _, err := c.Dynamic.Resource(gvr).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

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
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}

	cfg := sim.DefaultConfig()
	cfg.BootDelay = sim.Duration{Duration: 300 * time.Millisecond}
	s := sim.New(sim.Options{Config: cfg, Kube: env.Client, Logger: log})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	run(s.Run)

	const cluster = "lc"
	ec2c, ssmc := joineraws.NewClients(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "secret", "")}, srv.URL)
	prov, err := joineraws.New(joineraws.Options{EC2: ec2c, SSM: ssmc, Cluster: cluster, Region: "us-east-1",
		KubernetesVersion: sim.DefaultKubernetesVersion, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cache := kube.NewCache(clients, log)
	run(cache.Run)
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	state := fsm.New()
	raft := fsmtest.New(state)
	reg := prometheus.NewRegistry()
	rec := kube.NewRecorder(ctx, clients.Kube, "joiner")
	launch := launcher.New(launcher.Config{Cluster: cluster, Interval: 200 * time.Millisecond}, cloudadapter.New(cluster, prov), raft, state, log)
	p, err := provisioner.New(provisioner.Config{
		Cluster:   userdata.Cluster{Name: cluster, Endpoint: env.Config.Host, ServiceCIDR: "10.100.0.0/16"},
		BatchIdle: 300 * time.Millisecond, BatchMax: 2 * time.Second, Resync: time.Second, Wake: launch.Wake,
	}, cache, clients, state, raft, prov, reg, rec, log)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := New(Config{RemoveStartupTaints: true, Resync: time.Second}, cache, clients, clients.Kube, state, raft, prov, reg, rec, log)
	if err != nil {
		t.Fatal(err)
	}
	run(launch.Run)
	run(p.Run)
	run(lc.Run)

	applyManifests(t, ctx, clients, "testdata/pool.yaml")
	replicas := int32(6)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "inflate"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
			},
		},
	}
	if _, err := clients.Kube.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
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
		if bound == int(replicas) && ready == len(claims) && ready > 0 {
			break
		}
		state := fmt.Sprintf("pods %d bound %d nodeclaims %d ready %d nodes %d", len(pods.Items), bound, len(claims), ready, len(cache.Nodes()))
		if state != last {
			t.Logf("waiting: %s", state)
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", state)
		}
		time.Sleep(200 * time.Millisecond)
	}

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
		in, _ := state.Intent(nc.Annotations[AnnotationLaunchID])
		if inst, _ := state.Instance(in.InstanceID); inst.State != fsm.InstanceReady || inst.NodeName != n.Name {
			t.Errorf("nodeclaim %s: instance %+v, want ready on %s", nc.Name, inst, n.Name)
		}
	}
	t.Logf("%d pods on %d initialized nodeclaims", replicas, len(cache.NodeClaims()))
}
