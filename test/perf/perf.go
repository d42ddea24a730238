// Package perf is Joiner's end-to-end performance suite, modelled on
// Karpenter's KWOK performance suite (kubernetes-sigs/karpenter v1.14
// test/suites/performance): the same workloads (deployments, replica
// counts, requests, topology constraints, scale-in targets) and the same
// NodePool shape (on-demand c/m/r amd64 types under 32 vCPU,
// WhenEmptyOrUnderutilized after 30 s, budget 100 %), each run on a fresh
// harness: the real control plane, `joiner sim` registering Nodes, three
// `joiner coordinator` processes and the harness's kubelet stand-in. No
// agent runs: these scenarios involve no interruption notice and the
// coordinators drain nodes themselves.
//
// Each phase reports what Karpenter's suite reports: time, nodes, reserved
// CPU and memory utilisation (the mean over Joiner's nodes of the pods'
// requests over allocatable), pods disrupted, and the coordinators' peak
// RSS, CPU seconds and Kubernetes API requests.
package perf

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/harness"
)

// Namespace holds every workload; Discovery labels every workload pod.
const (
	Namespace = "default"
	Discovery = "perf"
)

// Options configure a suite run.
type Options struct {
	// Dir holds each scenario's harness directory.
	Dir string
	// JoinerBin is the joiner binary.
	JoinerBin string
	// BootDelay is the sim's time from launch to a registered Node.
	BootDelay time.Duration
	// SimKubeQPS and SimKubeBurst limit the sim's Kubernetes client.
	SimKubeQPS   float32
	SimKubeBurst int
	// Out receives progress lines.
	Out io.Writer
	Log *zap.Logger
}

// Result is one phase of one scenario.
type Result struct {
	Scenario, Phase string
	Pods            int
	// Total is from the phase's trigger (workload created, scaled, drift
	// triggered) to done; AfterLastPod from the newest pod's creation to
	// every pod Running (scale-out phases).
	Total, AfterLastPod time.Duration
	Nodes               int
	CPUUtil, MemUtil    float64
	Disrupted           int
	// Coordinator figures: the largest peak RSS (MiB) of the three, and
	// the CPU seconds and API requests of all three during the phase.
	PeakRSSMiB  float64
	CPUSeconds  float64
	APIRequests float64
	// Gate is Karpenter's bound for the phase, Target Joiner's; Note says
	// what went wrong, if anything.
	Gate, Target string
	Note         string
}

// Scenario is one workload run on a fresh harness.
type Scenario struct {
	Name string
	Run  func(ctx context.Context, r *Run) ([]Result, error)
}

// Scenarios are the suite, in order.
var Scenarios = []Scenario{
	{"basic", basic},
	{"single-deployment", singleDeployment},
	{"hostname-spreading", hostnameSpreading},
	{"self-anti-affinity", selfAntiAffinity},
	{"wide-deployments", wideDeployments},
	{"drift", drift},
	{"do-not-disrupt", doNotDisruptScenario},
}

// Run is one scenario's harness and its clients.
type Run struct {
	H    *harness.Harness
	opts Options
	name string
}

// RunSuite runs the named scenarios (all when names is empty), each on its
// own harness, and returns every phase's result. A scenario that fails is
// reported and the suite goes on.
func RunSuite(ctx context.Context, opts Options, names []string) ([]Result, error) {
	var out []Result
	for _, sc := range Scenarios {
		if len(names) > 0 && !slices.Contains(names, sc.Name) {
			continue
		}
		res, err := runScenario(ctx, opts, sc)
		out = append(out, res...)
		if err != nil {
			fmt.Fprintf(opts.Out, "scenario %s: %v\n", sc.Name, err)
			out = append(out, Result{Scenario: sc.Name, Phase: "error", Note: err.Error()})
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

func runScenario(ctx context.Context, opts Options, sc Scenario) ([]Result, error) {
	dir := opts.Dir + "/" + sc.Name
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Out, "== %s: starting the harness in %s\n", sc.Name, dir)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	h, err := harness.Start(sctx, harness.Options{Dir: dir, JoinerBin: opts.JoinerBin, Coordinators: 3, ClusterName: "perf",
		BootDelay: opts.BootDelay, SimKubeQPS: opts.SimKubeQPS, SimKubeBurst: opts.SimKubeBurst, Kubelet: true, Log: opts.Log,
		CoordinatorArgs: []string{"--log-level", "info"}})
	cancel()
	if h != nil {
		defer h.Stop()
	}
	if err != nil {
		return nil, fmt.Errorf("starting the harness: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	err = h.WaitReady(wctx)
	wcancel()
	if err != nil {
		return nil, fmt.Errorf("waiting for the coordinators: %w", err)
	}
	r := &Run{H: h, opts: opts, name: sc.Name}
	if err := r.apply(ctx, nodeClassAndPool); err != nil {
		return nil, err
	}
	return sc.Run(ctx, r)
}

// nodeClassAndPool is Karpenter's perf suite NodePool on the sim: on-demand
// c/m/r amd64 types with fewer than 32 vCPU, consolidation when empty or
// underutilised after 30 s, every node disruptable at once.
const nodeClassAndPool = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-perf
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: perf
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: perf
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: perf
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: Never
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.k8s.aws/instance-cpu
          operator: Lt
          values: ["32"]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets:
      - nodes: "100%"
`

func (r *Run) apply(ctx context.Context, yaml string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yaml), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				break
			}
			return fmt.Errorf("decoding manifests: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return r.H.Apply(ctx, objs...)
}

func (r *Run) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Out, "[%s] "+format+"\n", append([]any{r.name}, args...)...)
}

// deployment is Karpenter's test.Deployment of CreateDeploymentOptions:
// pods labelled app=<name> (and the discovery label) requesting cpu and
// memory, shaped by mods.
func deployment(name string, replicas int32, cpu, mem string, mods ...func(*corev1.PodTemplateSpec)) *appsv1.Deployment {
	lbl := map[string]string{"app": name, "perf": Discovery}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
	for _, m := range mods {
		m(&t)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: t},
	}
}

// selfSelector is a selector of the pod template's own labels (as
// Karpenter's WithHostnameSpread and WithPodAntiAffinity build it).
func selfSelector(t *corev1.PodTemplateSpec) *metav1.LabelSelector {
	m := map[string]string{}
	for k, v := range t.Labels {
		m[k] = v
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func hostnameSpread(t *corev1.PodTemplateSpec) {
	t.Spec.TopologySpreadConstraints = append(t.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: karpv1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selfSelector(t)})
}

func zoneSpreadOn(app string) func(*corev1.PodTemplateSpec) {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.TopologySpreadConstraints = append(t.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: karpv1.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func hostnameSpreadOn(app string) func(*corev1.PodTemplateSpec) {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.TopologySpreadConstraints = append(t.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: karpv1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func antiAffinityHostname(t *corev1.PodTemplateSpec) {
	if t.Spec.Affinity == nil {
		t.Spec.Affinity = &corev1.Affinity{}
	}
	t.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: karpv1.LabelHostname, LabelSelector: selfSelector(t)}}}
}

func labelled(k, v string) func(*corev1.PodTemplateSpec) {
	return func(t *corev1.PodTemplateSpec) { t.Labels[k] = v }
}

func doNotDisrupt(t *corev1.PodTemplateSpec) {
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
}

func (r *Run) create(ctx context.Context, deps ...*appsv1.Deployment) error {
	for _, d := range deps {
		if _, err := r.H.Env.Client.AppsV1().Deployments(Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

func (r *Run) scale(ctx context.Context, replicas map[string]int32) error {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range replicas {
			if !yield(k) {
				return
			}
		}
	}) {
		if err := r.H.ScaleDeployment(ctx, Namespace, name, replicas[name]); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable prints results as a table.
func WriteTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPHASE\tPODS\tTIME\tAFTER LAST POD\tNODES\tCPU UTIL\tMEM UTIL\tDISRUPTED\tPEAK RSS\tCPU-S\tAPI REQS\tKARPENTER GATE\tTARGET\tNOTE")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%d\t%.0f MiB\t%.1f\t%.0f\t%s\t%s\t%s\n", r.Scenario, r.Phase, r.Pods,
			dur(r.Total), dur(r.AfterLastPod), r.Nodes, pct(r.CPUUtil), pct(r.MemUtil), r.Disrupted, r.PeakRSSMiB, r.CPUSeconds,
			r.APIRequests, r.Gate, r.Target, r.Note)
	}
	tw.Flush()
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

func pct(f float64) string {
	if f == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}
