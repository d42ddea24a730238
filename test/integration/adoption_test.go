package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/karpenterstate"
	"github.com/joiner-dev/joiner/test/testenv"
)

// adoptCluster is the harness's cluster name: the sim's subnets and
// security group carry karpenter.sh/discovery=demo, and Karpenter tagged
// the instances kubernetes.io/cluster/demo=owned.
const adoptCluster = "demo"

// adoptionClaims are the 20 NodeClaims Karpenter launched: 7 on-demand
// amd64 nodes of pool web and 5 arm64 spot nodes of pool jobs (class
// "latest", al2023@latest), 8 on-demand amd64 nodes of pool system (class
// "pinned", one AL2023 image by ID), over three zones.
func adoptionClaims() []karpenterstate.Claim {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
		corev1.ResourcePods: resource.MustParse("1")}
	var out []karpenterstate.Claim
	add := func(pool, capacityType string, types ...string) {
		for i, typ := range types {
			zone := harness.Region + string(rune('a'+i%3))
			out = append(out, karpenterstate.Claim{NodePool: pool, InstanceType: typ, Zone: zone, CapacityType: capacityType, Requests: req})
		}
	}
	add("web", karpv1.CapacityTypeOnDemand, "c5.xlarge", "m5.large", "c6i.large", "c6a.large", "m6i.large", "c5.xlarge", "m5.large")
	add("jobs", karpv1.CapacityTypeSpot, "m7g.large", "c7g.xlarge", "m7g.large", "c7g.xlarge", "m7g.large")
	add("system", karpv1.CapacityTypeOnDemand, "m5.large", "m5.large", "m5.large", "m5.xlarge", "m5.xlarge", "m5.xlarge", "m5.large", "m5.xlarge")
	return out
}

// readKarpenterCluster reads the classes and pools of
// testdata/karpenter-cluster.yaml.
func readKarpenterCluster(t *testing.T) ([]*awsv1.EC2NodeClass, []*karpv1.NodePool) {
	t.Helper()
	objs, err := testenv.ReadObjects(filepath.Join("testdata", "karpenter-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var classes []*awsv1.EC2NodeClass
	var pools []*karpv1.NodePool
	for _, o := range objs {
		b, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		switch o.GetKind() {
		case "EC2NodeClass":
			var nc awsv1.EC2NodeClass
			err = json.Unmarshal(b, &nc)
			classes = append(classes, &nc)
		case "NodePool":
			var np karpv1.NodePool
			err = json.Unmarshal(b, &np)
			pools = append(pools, &np)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return classes, pools
}

// adoptionWorkloads are one Deployment per pool with one pod per node
// (hostname anti-affinity): every node holds a pod, so emptiness never
// applies and a drifted node's pod needs a replacement node.
func adoptionWorkloads(claims []karpenterstate.Claim) []*appsv1.Deployment {
	perPool := map[string]int32{}
	for _, c := range claims {
		perPool[c.NodePool]++
	}
	var out []*appsv1.Deployment
	for _, pool := range slices.Sorted(maps.Keys(perPool)) {
		n := perPool[pool]
		app := pool + "-app"
		lbl := map[string]string{"app": app, "adopt": "yes"}
		zero := int64(0)
		spec := corev1.PodSpec{
			NodeSelector:                  map[string]string{karpv1.LabelNodePool: pool},
			TerminationGracePeriodSeconds: &zero,
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}},
			Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"),
					corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		}
		if pool == "jobs" {
			spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "jobs", Effect: corev1.TaintEffectNoSchedule}}
		}
		out = append(out, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace},
			Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}}})
	}
	return out
}

// TestAdoptKarpenterCluster: a cluster as Karpenter v1.14 leaves it is
// adopted by Joiner without churn, and drift is then judged as Karpenter
// judges it.
//
// Seeded before any coordinator runs (test/karpenterstate): two
// EC2NodeClasses and three NodePools with Karpenter's hash annotations and
// status, and 20 NodeClaims (web 7, jobs 5 on class "latest" =
// al2023@latest; system 8 on class "pinned" = one AL2023 image by ID),
// each with its instance launched through the sim's EC2 API as Karpenter
// launches (launch template with Karpenter's user data, CreateFleet,
// Karpenter's tags), its Node registered by the sim from that user data,
// and the NodeClaim, Node and instance tags written as Karpenter's
// lifecycle and tagging controllers write them; one pod runs on every
// node. Only drift can disrupt: the pools have consolidateAfter Never (no
// emptiness, no consolidation), expireAfter Never and a budget of one
// node.
//
// Adoption: a coordinator starts and makes at least 5 disruption passes
// after it has judged every NodeClaim (its Consolidatable condition is on
// each): no NodeClaim is Drifted, deleted or added, no instance is
// terminated or launched, no node is tainted, no disruption decision is
// made, and each NodePool's status counts its nodes.
//
// Drift: a new AL2023 release behind al2023@latest drifts exactly the 12
// NodeClaims of class "latest" (Drifted, reason AMIDrift), which are
// replaced (new NodeClaims on the new images, old instances terminated)
// with at most one node per pool disrupted at a time; the 8 NodeClaims of
// class "pinned" are never drifted or touched.
func TestAdoptKarpenterCluster(t *testing.T) {
	began := time.Now()
	h := harness.StartTest(t, harness.Options{ClusterName: adoptCluster, Coordinators: 1, BootDelay: time.Second, Kubelet: true,
		DeferCoordinators: true, CoordinatorArgs: []string{"--nodeclass-refresh=5s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// Karpenter's cluster.
	classes, pools := readKarpenterCluster(t)
	caBundle, err := karpenterstate.CABundle(h.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ec2c, ssmc, iamc := karpenterstate.AWSClients(h.SimURL, harness.Region)
	claims := adoptionClaims()
	seeded, err := karpenterstate.Seed(ctx, karpenterstate.Clients{Kube: h.Env.Client, Dynamic: h.Env.Dynamic(), EC2: ec2c, SSM: ssmc, IAM: iamc},
		// The cluster the sim's DescribeCluster describes to the coordinator.
		karpenterstate.Cluster{Name: adoptCluster, Endpoint: h.Env.Config.Host, CABundle: caBundle, ServiceCIDR: sim.DefaultServiceCIDR,
			KubernetesVersion: sim.DefaultClusterVersion, Region: harness.Region},
		karpenterstate.Spec{NodeClasses: classes, NodePools: pools, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range adoptionWorkloads(claims) {
		if _, err := h.Env.Client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const sel = "adopt=yes"
	st := waitState(ctx, t, h, sel, "a running pod on every seeded node", func(s *harness.State) bool {
		return s.Pods == len(claims) && s.Running == len(claims) && s.Bound == len(claims)
	})
	for _, n := range st.Nodes {
		if n.Pods != 1 {
			t.Fatalf("node %s holds %d workload pods, want 1", n.Name, n.Pods)
		}
	}
	if err := karpenterstate.RecordPodEvents(ctx, karpenterstate.Clients{Dynamic: h.Env.Dynamic()}, seeded, time.Now()); err != nil {
		t.Fatal(err)
	}
	seededIDs := map[string]string{} // nodeclaim -> instance
	latest := map[string]bool{}      // nodeclaims of class "latest"
	for name, nc := range seeded.NodeClaims {
		seededIDs[name] = seeded.Instances[name]
		if nc.Spec.NodeClassRef.Name == "latest" {
			latest[name] = true
		}
	}
	t.Logf("seeded Karpenter's cluster in %s: %d nodeclaims (%d on al2023@latest), %s",
		time.Since(began).Round(time.Second), len(seeded.NodeClaims), len(latest), st.Line())

	clients, err := kube.NewClients(h.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := watchClaims(ctx, t, h)

	// Joiner takes over.
	if err := h.StartCoordinators(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := h.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	adoptStart := time.Now()
	noChurn := func(s *harness.State) {
		t.Helper()
		if v := churn(s, seeded, seededIDs); len(v) > 0 {
			t.Fatalf("adoption churned:\n  %s\n%s", strings.Join(v, "\n  "), s.Line())
		}
		if d := w.messages(); len(d) > 0 {
			t.Fatalf("nodeclaims drifted on adoption: %v", d)
		}
	}
	passes := func() float64 { return metric(ctx, t, h, leader, "joiner_disruption_passes_total", "") }
	// Joiner's first pass judges every NodeClaim and writes its
	// Consolidatable condition (Karpenter writes none with
	// consolidateAfter Never): from then on every pass judges them again.
	waitState(ctx, t, h, sel, "joiner's disruption conditions on every seeded nodeclaim", func(s *harness.State) bool {
		noChurn(s)
		return w.judged(seeded.ClaimNames())
	})
	first := passes()
	const observed = 5
	waitState(ctx, t, h, sel, fmt.Sprintf("%d more disruption passes", observed), func(s *harness.State) bool {
		noChurn(s)
		return passes() >= first+observed
	})
	st, err = h.State(ctx, namespace, sel)
	if err != nil {
		t.Fatal(err)
	}
	noChurn(st)
	for _, m := range []string{"joiner_disruption_decisions_total", "joiner_nodeclaims_created_total", "joiner_nodeclaims_lifecycle_deleted_total",
		"joiner_nodeclaims_terminated_total", "joiner_launch_errors_total"} {
		if v := metric(ctx, t, h, leader, m, ""); v != 0 {
			t.Errorf("%s = %v after adoption, want 0", m, v)
		}
	}
	if v := metric(ctx, t, h, leader, "joiner_nodes_eligible_for_disruption", `method="Drift"`); v != 0 {
		t.Errorf("joiner_nodes_eligible_for_disruption{method=Drift} = %v after adoption, want 0", v)
	}
	poolNodes := map[string]int64{}
	for _, c := range claims {
		poolNodes[c.NodePool]++
	}
	nps, err := kube.List[karpv1.NodePool](ctx, clients, kube.NodePoolsGVR)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range nps {
		ready := meta.FindStatusCondition(np.Status.Conditions, awsv1.ConditionReady)
		if np.Status.Nodes == nil || *np.Status.Nodes != poolNodes[np.Name] || ready == nil || ready.Status != metav1.ConditionTrue {
			t.Errorf("nodepool %s status: nodes %v, Ready %v; want NODES=%d and Ready", np.Name, np.Status.Nodes, ready, poolNodes[np.Name])
		}
	}
	t.Logf("adopted without churn: %.0f disruption passes in %s after joiner started; %s", passes(),
		time.Since(adoptStart).Round(time.Second), st.Line())
	if t.Failed() {
		return
	}

	// Drift: a new AL2023 release behind al2023@latest.
	moved, err := h.ReleaseImages(ctx, "AL2023")
	if err != nil || len(moved) == 0 {
		t.Fatalf("releasing AL2023 images: %v (moved %v)", err, moved)
	}
	newImages := slices.Collect(maps.Values(moved))
	driftStart := time.Now()
	maxDisrupted := map[string]int{}
	st = waitState(ctx, t, h, sel, "every nodeclaim of class latest replaced", func(s *harness.State) bool {
		if v := driftViolations(s, seeded, seededIDs, latest, maxDisrupted); len(v) > 0 {
			t.Fatalf("drift replacement:\n  %s\n%s", strings.Join(v, "\n  "), s.Line())
		}
		if v := metric(ctx, t, h, leader, "joiner_disruption_rollbacks_total", ""); v > 0 {
			t.Fatalf("%v disruption(s) rolled back during the drift replacement: %s", v, s.Line())
		}
		if s.Pods != len(claims) || s.Running != len(claims) || s.Pending != 0 {
			return false
		}
		perPool := map[string]int64{}
		for _, nc := range s.NodeClaims {
			if latest[nc.Name] || nc.Deleting || !nc.Initialized {
				return false
			}
			perPool[nc.NodePool]++
		}
		if !maps.Equal(perPool, poolNodes) {
			return false
		}
		for _, in := range s.Instances {
			if _, ok := seededIDs[in.Tags[karpv1.TagNodeClaim]]; ok && latest[in.Tags[karpv1.TagNodeClaim]] && in.State != "terminated" {
				return false
			}
		}
		return true
	})
	t.Logf("drift replaced %d nodeclaims in %s; at most %v disrupted at once per pool; %s", len(latest),
		time.Since(driftStart).Round(time.Second), maxDisrupted, st.Line())
	if d := w.drifted(); !maps.Equal(d, expectDrift(latest)) {
		t.Errorf("drifted nodeclaims (reason) = %v, want exactly the %d of class latest with AMIDrift", d, len(latest))
	}
	for _, pool := range []string{"web", "jobs"} {
		if maxDisrupted[pool] != 1 {
			t.Errorf("pool %s: at most %d node(s) disrupted at once, want 1 (its budget)", pool, maxDisrupted[pool])
		}
	}
	ncs, err := kube.List[karpv1.NodeClaim](ctx, clients, kube.NodeClaimsGVR)
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range ncs {
		if _, old := seeded.NodeClaims[nc.Name]; old {
			continue
		}
		if nc.Annotations[karpv1.AnnotationLaunchID] == "" || !slices.Contains(newImages, nc.Status.ImageID) {
			t.Errorf("replacement %s: launch-id %q, image %s; want Joiner's launch on one of the new images %v",
				nc.Name, nc.Annotations[karpv1.AnnotationLaunchID], nc.Status.ImageID, newImages)
		}
	}
	if live := st.LiveInstances(); live != len(claims) {
		t.Errorf("%d live instances after the replacement, want %d", live, len(claims))
	}
	if v := metric(ctx, t, h, leader, "joiner_disruption_decisions_total", `action="replace",method="Drift"`); v != float64(len(latest)) {
		t.Errorf("joiner_disruption_decisions_total{action=replace,method=Drift} = %v, want %d", v, len(latest))
	}
	if v := metric(ctx, t, h, leader, "joiner_disruption_decisions_total", ""); v != float64(len(latest)) {
		t.Errorf("joiner_disruption_decisions_total = %v, want %d (drift only)", v, len(latest))
	}
	t.Logf("test took %s", time.Since(began).Round(time.Second))
}

func expectDrift(latest map[string]bool) map[string]string {
	out := map[string]string{}
	for n := range latest {
		out[n] = "AMIDrift"
	}
	return out
}

// churn lists what Joiner must not have done to the seeded cluster.
func churn(s *harness.State, seeded *karpenterstate.Seeded, ids map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, nc := range s.NodeClaims {
		seen[nc.Name] = true
		switch {
		case seeded.NodeClaims[nc.Name] == nil:
			out = append(out, fmt.Sprintf("nodeclaim %s was created (launch-id %q)", nc.Name, nc.LaunchID))
		case nc.Deleting:
			out = append(out, fmt.Sprintf("nodeclaim %s is being deleted (reason %q)", nc.Name, nc.DisruptionReason))
		case nc.DisruptionReason != "":
			out = append(out, fmt.Sprintf("nodeclaim %s has disruption reason %q", nc.Name, nc.DisruptionReason))
		}
	}
	for name := range seeded.NodeClaims {
		if !seen[name] {
			out = append(out, "nodeclaim "+name+" is gone")
		}
	}
	live := 0
	for _, in := range s.Instances {
		if in.State == "pending" || in.State == "running" {
			live++
		} else if _, ok := ids[in.Tags[karpv1.TagNodeClaim]]; ok {
			out = append(out, fmt.Sprintf("instance %s of nodeclaim %s is %s", in.ID, in.Tags[karpv1.TagNodeClaim], in.State))
		}
	}
	if live != len(ids) {
		out = append(out, fmt.Sprintf("%d live instances, want the %d seeded", live, len(ids)))
	}
	for _, n := range s.Nodes {
		if n.Disrupted || n.Unschedulable {
			out = append(out, "node "+n.Name+" is tainted or cordoned")
		}
	}
	sort.Strings(out)
	return out
}

// driftViolations checks one look during the drift: the pinned class's
// claims and instances untouched; per pool at most one node disrupted
// (its claim deleting, or its node tainted) and at most one replacement
// in flight. maxDisrupted records the most disrupted at once per pool.
func driftViolations(s *harness.State, seeded *karpenterstate.Seeded, ids map[string]string, latest map[string]bool, maxDisrupted map[string]int) []string {
	var out []string
	claimOfNode := map[string]harness.NodeClaimInfo{}
	disrupted := map[string]int{}
	inFlight := map[string]int{}
	present := map[string]bool{}
	for _, nc := range s.NodeClaims {
		present[nc.Name] = true
		claimOfNode[nc.NodeName] = nc
		_, old := seeded.NodeClaims[nc.Name]
		switch {
		case old && !latest[nc.Name] && (nc.Deleting || nc.DisruptionReason != ""):
			out = append(out, fmt.Sprintf("nodeclaim %s of class pinned is being disrupted (%q)", nc.Name, nc.DisruptionReason))
		case !old && nc.NodePool == "system":
			out = append(out, fmt.Sprintf("nodeclaim %s was created in pool system", nc.Name))
		case !old && !nc.Initialized:
			inFlight[nc.NodePool]++
		}
		// Karpenter's budgets count a deleting NodeClaim until its
		// instance is terminating (InstanceTerminating): then the next
		// one may start.
		if nc.Deleting && !nc.InstanceTerminating {
			disrupted[nc.NodePool]++
		}
	}
	for name := range seeded.NodeClaims {
		if !latest[name] && !present[name] {
			out = append(out, "nodeclaim "+name+" of class pinned is gone")
		}
	}
	for _, n := range s.Nodes {
		if nc, ok := claimOfNode[n.Name]; ok && (n.Disrupted || n.Unschedulable) && !nc.Deleting {
			disrupted[nc.NodePool]++
		}
	}
	for _, in := range s.Instances {
		name := in.Tags[karpv1.TagNodeClaim]
		if _, ok := ids[name]; ok && !latest[name] && in.State != "running" {
			out = append(out, fmt.Sprintf("instance %s of nodeclaim %s (class pinned) is %s", in.ID, name, in.State))
		}
	}
	for pool, n := range disrupted {
		maxDisrupted[pool] = max(maxDisrupted[pool], n)
		if n > 1 {
			out = append(out, fmt.Sprintf("pool %s: %d nodes disrupted at once with a budget of 1", pool, n))
		}
	}
	for pool, n := range inFlight {
		if n > 1 {
			out = append(out, fmt.Sprintf("pool %s: %d replacements in flight at once with a budget of 1", pool, n))
		}
	}
	sort.Strings(out)
	return out
}

// waitState polls the harness state (pods matching sel) until cond holds;
// cond may fail the test.
func waitState(ctx context.Context, t *testing.T, h *harness.Harness, sel, what string, cond func(*harness.State) bool) *harness.State {
	t.Helper()
	return pollState(ctx, t, h, sel, what, nil, 500*time.Millisecond, cond)
}

// metric sums a metric's samples whose labels contain match on a
// coordinator's /metrics page (0 when absent).
func metric(ctx context.Context, t *testing.T, h *harness.Harness, c *harness.Coordinator, name, match string) float64 {
	t.Helper()
	body, err := h.Metrics(ctx, c)
	if err != nil {
		t.Fatalf("metrics of %s: %v", c.Name, err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metricName, labels, _ := strings.Cut(key, "{")
		if metricName != name || !strings.Contains(labels, match) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// claimWatch records, from a watch on every NodeClaim, each claim's
// Drifted reason and whether Joiner's Consolidatable condition was seen:
// events, so nothing that happens between two polls is missed.
type claimWatch struct {
	mu      sync.Mutex
	drift   map[string]string // nodeclaim -> Drifted reason (first seen)
	message map[string]string // nodeclaim -> Drifted message (first seen)
	judgedN map[string]bool   // nodeclaim -> Consolidatable condition seen
}

func watchClaims(ctx context.Context, t *testing.T, h *harness.Harness) *claimWatch {
	t.Helper()
	w := &claimWatch{drift: map[string]string{}, message: map[string]string{}, judgedN: map[string]bool{}}
	ri := h.Env.Dynamic().Resource(karpenterstate.NodeClaimsGVR)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		w.record(list.Items[i].Object)
	}
	rv := list.GetResourceVersion()
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		for wctx.Err() == nil {
			if rv == "" { // the watch broke: list again, then watch from there
				l, err := ri.List(wctx, metav1.ListOptions{})
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				for i := range l.Items {
					w.record(l.Items[i].Object)
				}
				rv = l.GetResourceVersion()
			}
			wi, err := ri.Watch(wctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				rv = ""
				continue
			}
			for ev := range wi.ResultChan() {
				u, ok := ev.Object.(interface {
					UnstructuredContent() map[string]any
					GetResourceVersion() string
				})
				if ev.Type == watch.Error || !ok {
					break
				}
				w.record(u.UnstructuredContent())
				rv = u.GetResourceVersion()
			}
			wi.Stop()
			rv = ""
		}
	}()
	return w
}

func (w *claimWatch) record(obj map[string]any) {
	var nc karpv1.NodeClaim
	b, err := json.Marshal(obj)
	if err != nil || json.Unmarshal(b, &nc) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDrifted); c != nil && c.Status == metav1.ConditionTrue {
		if _, ok := w.drift[nc.Name]; !ok {
			w.drift[nc.Name], w.message[nc.Name] = c.Reason, c.Message
		}
	}
	if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionConsolidatable) != nil {
		w.judgedN[nc.Name] = true
	}
}

// drifted returns the claims seen Drifted, with their reason.
func (w *claimWatch) drifted() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.drift)
}

// messages returns the Drifted messages seen.
func (w *claimWatch) messages() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.message)
}

// judged reports whether every named claim got Joiner's Consolidatable
// condition.
func (w *claimWatch) judged(names []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		if !w.judgedN[n] {
			return false
		}
	}
	return true
}
