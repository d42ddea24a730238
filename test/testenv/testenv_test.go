package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	corev1k "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/testenv"
)

// waitTimeout bounds every wait on the control plane; it is a deadline for
// behaviour to happen, not a speed assertion.
const waitTimeout = 5 * time.Minute

var (
	nodePools     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaims    = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	ec2NodeClasss = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

// TestControlPlane proves the control plane behaves like a real cluster:
// CRDs with schemas, controllers, scheduler, PDBs and eviction.
func TestControlPlane(t *testing.T) {
	var pids []int
	t.Cleanup(func() { // runs after the environment's own cleanup stopped it
		for _, pid := range pids {
			if testenv.ProcessAlive(pid) {
				t.Errorf("process %d still running after the environment stopped", pid)
			}
		}
	})
	env := testenv.Start(t, testenv.Options{ControllerManager: true, Scheduler: true, CRDs: true})
	pids = env.PIDs()
	if len(pids) != 4 {
		t.Fatalf("PIDs() = %v, want etcd, apiserver, controller-manager, scheduler", pids)
	}
	ctx := t.Context()

	t.Run("every CRD applies", func(t *testing.T) { testCRDsApply(ctx, t, env) })
	t.Run("scheduler binds to a fake node, PDB blocks eviction", func(t *testing.T) { testScheduleAndEvict(ctx, t, env) })
	t.Run("API types round-trip", func(t *testing.T) { testRoundTrip(ctx, t, env.Dynamic()) })
	t.Run("invalid NodePool rejected", func(t *testing.T) { testInvalidNodePool(ctx, t, env.Dynamic()) })
	t.Run("deployment gets pods", func(t *testing.T) { testDeployment(ctx, t, env) })
}

func testCRDsApply(ctx context.Context, t *testing.T, env *testenv.Env) {
	dir := filepath.Join("..", "..", "packaging", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD files in %s (%v)", dir, err)
	}
	// Applying again updates every CRD in place.
	names, err := testenv.InstallCRDs(ctx, env.Dynamic(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(files) {
		t.Errorf("installed %d CRDs (%v) from %d files", len(names), names, len(files))
	}
	for _, want := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"} {
		if _, err := env.Dynamic().Resource(testenv.CRDResource).Get(ctx, want, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s: %v", want, err)
		}
	}
}

func dur(s string) corev1k.Duration {
	var d corev1k.Duration
	if err := json.Unmarshal([]byte(strconv.Quote(s)), &d); err != nil {
		panic(err)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

func validNodePool(name string) *corev1k.NodePool {
	return &corev1k.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1k.NodePoolSpec{
			Template: corev1k.NodeClaimTemplate{
				ObjectMeta: corev1k.ObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: corev1k.NodeClaimTemplateSpec{
					Taints: []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
					Requirements: []corev1k.NodeSelectorRequirementWithMinValues{
						{Key: "karpenter.sh/capacity-type", Operator: corev1k.OpIn, Values: []string{"spot", "on-demand"}},
						{Key: "karpenter.k8s.aws/instance-category", Operator: corev1k.OpIn, Values: []string{"c", "m", "r"}, MinValues: ptr(2)},
					},
					NodeClassRef:           &corev1k.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					TerminationGracePeriod: ptr(dur("48h")),
					ExpireAfter:            dur("720h"),
				},
			},
			Disruption: corev1k.Disruption{
				ConsolidateAfter:    dur("30s"),
				ConsolidationPolicy: corev1k.ConsolidationPolicyWhenEmptyOrUnderutilized,
				Budgets: []corev1k.Budget{
					{Nodes: "10%"},
					{Nodes: "0", Schedule: ptr("@daily"), Duration: ptr(dur("10m")), Reasons: []corev1k.DisruptionReason{corev1k.DisruptionReasonDrifted}},
				},
			},
			Limits: corev1k.Limits{corev1.ResourceCPU: resource.MustParse("1k"), corev1.ResourceMemory: resource.MustParse("1000Gi")},
			Weight: ptr(int32(10)),
		},
	}
}

func testRoundTrip(ctx context.Context, t *testing.T, dc dynamic.Interface) {
	pool := validNodePool("roundtrip")
	class := &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0123456789abcdef0"}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			AMIFamily:                  ptr("AL2023"),
			Role:                       "KarpenterNodeRole-demo",
			Tags:                       map[string]string{"env": "test"},
			Kubelet: &awsv1.KubeletConfiguration{
				MaxPods:                 ptr(int32(110)),
				SystemReserved:          map[string]string{"cpu": "100m"},
				EvictionSoft:            map[string]string{"memory.available": "500Mi"},
				EvictionSoftGracePeriod: map[string]corev1k.Duration{"memory.available": dur("1m")},
			},
			BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{
				DeviceName: ptr("/dev/xvda"), RootVolume: true,
				EBS: &awsv1.BlockDevice{VolumeSize: ptr(resource.MustParse("100Gi")), VolumeType: ptr("gp3"), Encrypted: ptr(true), DeleteOnTermination: ptr(true)},
			}},
			MetadataOptions: &awsv1.MetadataOptions{
				HTTPEndpoint: ptr("enabled"), HTTPProtocolIPv6: ptr("disabled"),
				HTTPPutResponseHopLimit: ptr(int64(1)), HTTPTokens: ptr("required"),
			},
		},
	}
	claim := &corev1k.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "roundtrip-abcde", Labels: map[string]string{"karpenter.sh/nodepool": "roundtrip"}},
		Spec: corev1k.NodeClaimSpec{
			Requirements: []corev1k.NodeSelectorRequirementWithMinValues{
				{Key: "node.kubernetes.io/instance-type", Operator: corev1k.OpIn, Values: []string{"m5.large", "c5.large"}},
			},
			Resources:              corev1k.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourcePods: resource.MustParse("5")}},
			NodeClassRef:           &corev1k.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			TerminationGracePeriod: ptr(dur("1h")),
			ExpireAfter:            dur("Never"),
		},
	}

	gotPool := &corev1k.NodePool{}
	createAndGet(ctx, t, dc.Resource(nodePools), pool, gotPool)
	if !apiequality.Semantic.DeepEqual(pool.Spec, gotPool.Spec) {
		t.Errorf("NodePool spec changed on the way:\nsent %+v\ngot  %+v", pool.Spec, gotPool.Spec)
	}
	gotClass := &awsv1.EC2NodeClass{}
	createAndGet(ctx, t, dc.Resource(ec2NodeClasss), class, gotClass)
	if !apiequality.Semantic.DeepEqual(class.Spec, gotClass.Spec) {
		t.Errorf("EC2NodeClass spec changed on the way:\nsent %+v\ngot  %+v", class.Spec, gotClass.Spec)
	}
	gotClaim := &corev1k.NodeClaim{}
	createAndGet(ctx, t, dc.Resource(nodeClaims), claim, gotClaim)
	if !apiequality.Semantic.DeepEqual(claim.Spec, gotClaim.Spec) {
		t.Errorf("NodeClaim spec changed on the way:\nsent %+v\ngot  %+v", claim.Spec, gotClaim.Spec)
	}
	if gotPool.Name != pool.Name || gotClaim.Labels["karpenter.sh/nodepool"] != "roundtrip" {
		t.Errorf("metadata changed: pool %q, claim labels %v", gotPool.Name, gotClaim.Labels)
	}
}

// createAndGet creates obj (a typed API object) and reads it back into out.
func createAndGet(ctx context.Context, t *testing.T, rc dynamic.ResourceInterface, obj metav1.Object, out any) {
	t.Helper()
	u := toUnstructured(t, obj)
	if _, err := rc.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	got, err := rc.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s back: %v", obj.GetName(), err)
	}
	data, err := json.Marshal(got.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("decoding %s: %v\n%s", obj.GetName(), err, data)
	}
}

func toUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	return kubetest.Unstructured(t, obj)
}

func testInvalidNodePool(ctx context.Context, t *testing.T, dc dynamic.Interface) {
	cases := []invalidCase{
		{
			name:   "missing nodeClassRef",
			mutate: func(p *corev1k.NodePool) { p.Spec.Template.Spec.NodeClassRef = nil },
			want:   []string{"spec.template.spec.nodeClassRef", "Required value"},
		},
		{
			name:   "bad expireAfter",
			mutate: func(p *corev1k.NodePool) { p.Spec.Template.Spec.ExpireAfter = corev1k.Duration{Raw: "forever"} },
			want:   []string{"spec.template.spec.expireAfter", "should match"},
		},
	}
	cel := celCases()
	if len(cel) == 0 {
		t.Log("the NodePool CRD carries none of the known CEL rules yet; only schema rules checked")
	}
	cases = append(cases, cel...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validNodePool("invalid-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"))
			tc.mutate(p)
			_, err := dc.Resource(nodePools).Create(ctx, toUnstructured(t, p), metav1.CreateOptions{})
			if err == nil {
				t.Fatalf("invalid NodePool accepted")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error %v is not Invalid (422)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// testScheduleAndEvict: a fake Node lets the scheduler bind a pod; once the
// pod runs, a PDB gets its status computed and blocks the pod's eviction.
func testScheduleAndEvict(ctx context.Context, t *testing.T, env *testenv.Env) {
	c := env.Client
	// Play the kubelet: a Ready node that reports its capacity.
	const nodeName = "fake-node-1"
	kubetest.RegisterNode(ctx, t, c, nodeName, "", nil)

	ns := "evict"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "registry.invalid/web:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := waitFor(ctx, t, "pod bound by the scheduler", func() (*corev1.Pod, bool) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return p, err == nil && p.Spec.NodeName != ""
	})
	if bound.Spec.NodeName != nodeName {
		t.Fatalf("pod bound to %q, want %q", bound.Spec.NodeName, nodeName)
	}

	// Play the kubelet: the pod runs and is ready.
	bound.Status.Phase = corev1.PodRunning
	bound.Status.Conditions = append(bound.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitFor(ctx, t, "PDB status computed by the disruption controller", func() (*policyv1.PodDisruptionBudget, bool) {
		p, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		return p, err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 1 && p.Status.CurrentHealthy == 1
	})
	if got.Status.DisruptionsAllowed != 0 || got.Status.DesiredHealthy != 1 {
		t.Errorf("PDB status = %+v, want desiredHealthy 1, disruptionsAllowed 0", got.Status)
	}

	err := c.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction of a PDB-protected pod: err = %v, want 429 Too Many Requests", err)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("pod gone after a refused eviction: %v", err)
	}
}

func testDeployment(ctx context.Context, t *testing.T, env *testenv.Env) {
	c := env.Client
	ns := "deploy"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "api"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "registry.invalid/api:1"}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitFor(ctx, t, "3 pods from the deployment's ReplicaSet", func() (*corev1.PodList, bool) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
		return l, err == nil && len(l.Items) == 3
	})
	for _, p := range pods.Items {
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod %s owners = %v, want one ReplicaSet", p.Name, p.OwnerReferences)
		}
	}
}

// waitFor polls get until it reports done, failing the test at waitTimeout.
func waitFor[T any](ctx context.Context, t *testing.T, what string, get func() (T, bool)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		v, ok := get()
		if ok {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %+v)", what, ctx.Err(), v)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestStopKillsEverything: Stop leaves no process behind, also when the test
// fails or the test binary is killed.
func TestStopKillsEverything(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		env := testenv.Start(t, testenv.Options{ControllerManager: true, Scheduler: true})
		pids := env.PIDs()
		for _, pid := range pids {
			if !testenv.ProcessAlive(pid) {
				t.Fatalf("process %d not running before Stop", pid)
			}
		}
		env.Stop()
		for _, pid := range pids {
			if testenv.ProcessAlive(pid) {
				t.Errorf("process %d still running after Stop", pid)
			}
		}
	})
	for _, mode := range []string{"fail", "sigkill"} {
		t.Run("helper test "+mode, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(testenv.ToolsBin(), testenv.APIServerBin)); err != nil || testing.Short() {
				t.Skip("needs the control plane: run `make tools` (and not -short)")
			}
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pids")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnv$", "-test.v")
			// The helper's temporary directories go under ours: a killed
			// helper cannot remove its own.
			cmd.Env = append(os.Environ(), "JOINER_TESTENV_HELPER="+mode, "JOINER_TESTENV_PIDFILE="+pidFile, "TMPDIR="+dir)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if mode == "sigkill" {
				// Kill the test binary as a go test timeout or ^C would, once it
				// has written its PIDs.
				waitFor(t.Context(), t, "helper PIDs", func() (string, bool) {
					data, _ := os.ReadFile(pidFile)
					return string(data), strings.HasSuffix(string(data), "\n")
				})
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			if err := <-done; err == nil {
				t.Fatalf("helper test passed, want failure; output:\n%s", out)
			}
			data, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("helper wrote no PIDs: %v\n%s", err, out)
			}
			pids := strings.Fields(string(data))
			if len(pids) != 4 {
				t.Fatalf("helper PIDs = %v, want 4\n%s", pids, out)
			}
			for _, s := range pids {
				pid, _ := strconv.Atoi(s)
				// A killed parent's children are re-parented and reaped by init;
				// allow them time to go, then insist.
				waitFor(t.Context(), t, fmt.Sprintf("process %d to end", pid), func() (int, bool) {
					return pid, !testenv.ProcessAlive(pid) || isZombie(pid)
				})
			}
			if mode == "fail" && !strings.Contains(out.String(), "process logs") {
				t.Errorf("failed helper did not print process logs:\n%s", out)
			}
		})
	}
}

// isZombie reports whether pid has exited but not been reaped yet (its parent
// was killed and init has not collected it).
func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestHelperEnv runs only as a child of TestStopKillsEverything.
func TestHelperEnv(t *testing.T) {
	mode := os.Getenv("JOINER_TESTENV_HELPER")
	if mode == "" {
		t.Skip("helper for TestStopKillsEverything")
	}
	env := testenv.Start(t, testenv.Options{ControllerManager: true, Scheduler: true})
	var b strings.Builder
	for _, pid := range env.PIDs() {
		fmt.Fprintf(&b, "%d ", pid)
	}
	b.WriteString("\n")
	if err := os.WriteFile(os.Getenv("JOINER_TESTENV_PIDFILE"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if mode == "sigkill" {
		<-t.Context().Done() // until killed
	}
	t.Fatal("helper fails on purpose")
}
