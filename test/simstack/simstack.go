// Package simstack sets up, for tests, what the coordinator's leader loops
// run on in process: goroutines bound to one context, Kubernetes clients
// with a synced informer cache, and the simulated EC2 region behind the
// real AWS SDK. Test code only.
package simstack

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/nodeclass"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/test/testenv"
)

// Region is the region of the simulated cloud.
const Region = "us-east-1"

// AccessKeyID is the access key the stack's AWS clients sign with: a
// caller the sim does not list, held to its default (the shipped) policy.
const AccessKeyID = "AKIDSIM"

// Clients are AWS SDK clients that reach the simulated region served at
// endpoint, signing as the caller whose access key ID is key (static
// credentials).
func Clients(endpoint, key string) joineraws.Clients {
	return joineraws.NewClients(aws.Config{Region: Region,
		Credentials: credentials.NewStaticCredentialsProvider(key, "secret", "")}, endpoint)
}

// Runner owns the goroutines of a test: Go starts one on Ctx, Stop cancels
// Ctx and waits for all of them.
type Runner struct {
	Ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewRunner returns a Runner whose context derives from parent.
func NewRunner(parent context.Context) *Runner {
	ctx, cancel := context.WithCancel(parent)
	return &Runner{Ctx: ctx, cancel: cancel}
}

// Go runs f(r.Ctx) on a goroutine; its error is dropped (a loop returns
// when the context ends).
func (r *Runner) Go(f func(context.Context) error) {
	r.wg.Add(1)
	go func() { defer r.wg.Done(); _ = f(r.Ctx) }()
}

// Stop cancels the context and waits for every goroutine started by Go.
func (r *Runner) Stop() {
	r.cancel()
	r.wg.Wait()
}

// SchedulingEnv starts a control plane where kube-scheduler binds pods to
// the sim's Nodes: CRDs, kube-scheduler and kube-controller-manager
// without the node lifecycle controller, and without the admission that
// taints new Nodes not-ready (no node lifecycle controller would lift it).
// It skips the test when the control plane cannot run.
func SchedulingEnv(t testing.TB) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test control plane (skipped under -short)")
	}
	return testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true, Scheduler: true,
		Controllers:   []string{"*", "-node-lifecycle-controller"},
		APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}})
}

// Kube returns clients for cfg and an informer cache run by r, synced.
func Kube(t testing.TB, r *Runner, cfg *rest.Config, log *zap.Logger) (*kube.Clients, *kube.Cache) {
	t.Helper()
	clients, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cache := kube.NewCache(clients, log)
	r.Go(cache.Run)
	if err := cache.WaitForSync(r.Ctx); err != nil {
		t.Fatal(err)
	}
	return clients, cache
}

// Cloud starts the simulated EC2 region (run by r, registering Nodes
// through kc, booting instances after bootDelay), serves it until the test
// ends, and returns a Provider of cluster reaching it through the real SDK.
func Cloud(t testing.TB, r *Runner, kc kubernetes.Interface, bootDelay time.Duration, cluster string, log *zap.Logger) *joineraws.Provider {
	t.Helper()
	return StartCloud(t, r, kc, SimConfig(bootDelay), cluster, log).Provider
}

// SimConfig is the default sim config with instances booting after
// bootDelay.
func SimConfig(bootDelay time.Duration) sim.Config {
	cfg := sim.DefaultConfig()
	cfg.BootDelay = sim.Duration{Duration: bootDelay}
	return cfg
}

// SimCloud is a simulated region a test started: the sim, the AWS clients
// that reach it and a Provider of the cluster on them.
type SimCloud struct {
	Sim      *sim.Sim
	Clients  joineraws.Clients
	Provider *joineraws.Provider
}

// StartCloud is Cloud on a sim of cfg, returning the sim and its clients
// too.
func StartCloud(t testing.TB, r *Runner, kc kubernetes.Interface, cfg sim.Config, cluster string, log *zap.Logger) SimCloud {
	t.Helper()
	s := sim.New(sim.Options{Config: cfg, Kube: kc, Logger: log})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	r.Go(s.Run)
	ac := Clients(srv.URL, AccessKeyID)
	prov, err := joineraws.New(joineraws.Options{EC2: ac.EC2, SSM: ac.SSM, IAM: ac.IAM, Cluster: cluster, Region: Region,
		KubernetesVersion: sim.DefaultKubernetesVersion, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return SimCloud{Sim: s, Clients: ac, Provider: prov}
}

// Classes runs the nodeclass loop on r (resolving classes through prov) and
// returns the catalog it publishes, with the view builder that reads it
// and state. Classes applied later are published within about a second.
func Classes(t testing.TB, r *Runner, clients *kube.Clients, cache *kube.Cache, prov cloud.Provider, state view.State,
	log *zap.Logger) (*view.Catalog, *view.Builder) {
	t.Helper()
	catalog := view.NewCatalog()
	loop := nodeclass.New(nodeclass.Config{MinInterval: 100 * time.Millisecond},
		nodeclass.Deps{Cache: cache, Kube: clients, Cloud: prov, Catalog: catalog, Log: log})
	r.Go(loop.Run)
	return catalog, &view.Builder{Cache: cache, State: state, Classes: catalog}
}

// ApplyManifests creates the NodePools and EC2NodeClasses of a YAML file.
func ApplyManifests(t testing.TB, ctx context.Context, c *kube.Clients, path string) {
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

// CreateInflate creates the Deployment default/inflate: replicas pause
// pods labelled app=inflate, each requesting cpu; each of pod (optional)
// changes their spec.
func CreateInflate(t testing.TB, ctx context.Context, c kubernetes.Interface, replicas int32, cpu string, pod ...func(*corev1.PodSpec)) {
	t.Helper()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "inflate"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			},
		},
	}
	for _, f := range pod {
		f(&dep.Spec.Template.Spec)
	}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Eventually polls cond until it holds, logging each new state it reports,
// and fails t after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != last {
			t.Logf("waiting for %s: %s", what, state)
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last: %s)", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
