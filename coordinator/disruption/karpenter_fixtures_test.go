package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/test/fixture"
)

// Fixtures for the ports of Karpenter v1.14.1's disruption suites
// (karpenter_*_test.go). Each port is a table of karpCase: the behaviour
// Karpenter pins (name), the Karpenter test it comes from (from: file,
// context and It) and a check run against Decide / Status / AllowedByPool.
// The scenarios are rebuilt on this package's catalogue (testTypes: t-N has
// N vCPU, on-demand 0.05/vCPU, spot 0.02/vCPU, zone-a) rather than
// Karpenter's fake cloud provider; what each one pins is Karpenter's
// observable outcome (which nodes go, with how many replacements, or that
// nothing happens).

// karpCase is one ported Karpenter scenario.
type karpCase struct {
	name string // the Karpenter behaviour pinned
	from string // the Karpenter v1.14.1 test it ports
	in   func() *Input
	want karpCheck
}

// karpCheck asserts something about Decide's (or Status's) view of in.
type karpCheck func(t *testing.T, in *Input)

func runKarpenterCases(t *testing.T, cases []karpCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			tc.want(t, tc.in())
			if t.Failed() {
				t.Logf("ported from Karpenter v1.14.1 %s", tc.from)
			}
		})
	}
}

// kNow is the decision time of the ports: an hour after testNode's nodes
// were created and initialized (t0).
var kNow = t0.Add(time.Hour)

// kIn is testInput at kNow with a current nodepool hash for every pool, so
// a node marked with driftedNode() is drifted and every other node is not.
func kIn(pools []*karpv1.NodePool, nodes ...*Node) *Input {
	in := testInput(kNow, pools, nodes...)
	in.NodePoolHashes = map[string]string{}
	for _, p := range pools {
		in.NodePoolHashes[p.Name] = "current"
	}
	return in
}

// kPools is a shorthand for a pool list.
func kPools(ps ...*karpv1.NodePool) []*karpv1.NodePool { return ps }

// kPool is testPool (on-demand, WhenEmptyOrUnderutilized, consolidateAfter
// 0s, budget 100%, expireAfter Never) with options applied.
func kPool(name string, opts ...func(*karpv1.NodePool)) *karpv1.NodePool {
	p := testPool(name, od)
	for _, o := range opts {
		o(p)
	}
	return p
}

func withPolicy(policy karpv1.ConsolidationPolicy) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) { p.Spec.Disruption.ConsolidationPolicy = policy }
}

func withConsolidateAfter(d karpv1.Duration) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) { p.Spec.Disruption.ConsolidateAfter = d }
}

func withBudgets(bs ...karpv1.Budget) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) { p.Spec.Disruption.Budgets = bs }
}

func withNodesBudget(nodes string) func(*karpv1.NodePool) {
	return withBudgets(karpv1.Budget{Nodes: nodes})
}

// withCapacityTypes replaces the pool's capacity-type requirement.
func withCapacityTypes(cts ...string) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) {
		p.Spec.Template.Spec.Requirements[0].Values = cts
	}
}

func withExpireAfter(d karpv1.Duration) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) { p.Spec.Template.Spec.ExpireAfter = d }
}

func withReplicas(n int64) func(*karpv1.NodePool) {
	return func(p *karpv1.NodePool) { p.Spec.Replicas = &n }
}

// driftedNode marks n drifted: its nodepool hash is not kIn's current one.
func driftedNode(n *Node) *Node {
	n.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "stale"
	return n
}

// driftedSince also gives n a Drifted condition that turned true at at, as
// Joiner's status writer and Karpenter's drift controller record it.
func driftedSince(n *Node, at time.Time) *Node {
	driftedNode(n)
	n.NodeClaim.Status.Conditions = append(n.NodeClaim.Status.Conditions, metav1.Condition{
		Type: karpv1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: DriftNodePool,
		LastTransitionTime: metav1.NewTime(at),
	})
	return n
}

func nodeAnnotated(n *Node, key, value string) *Node {
	n.Annotations[key] = value
	return n
}

func createdAt(n *Node, at time.Time) *Node {
	n.NodeClaim.CreationTimestamp = metav1.NewTime(at)
	return n
}

func initializedAt(n *Node, at time.Time) *Node {
	n.InitializedAt = at
	return n
}

func lastPodEventAt(n *Node, at time.Time) *Node {
	n.NodeClaim.Status.LastPodEventTime = metav1.NewTime(at)
	return n
}

func withTGP(n *Node) *Node {
	n.NodeClaim.Spec.TerminationGracePeriod = dur("5m")
	return n
}

func uninitializedNode(n *Node) *Node {
	n.Initialized = false
	n.InitializedAt = time.Time{}
	return n
}

func beingDeleted(n *Node) *Node {
	n.MarkedForDeletion = true
	return n
}

// withNodeLabel sets a label on both the Node and its NodeClaim.
func withNodeLabel(n *Node, key, value string) *Node {
	n.Node.Labels[key] = value
	if n.NodeClaim != nil {
		n.NodeClaim.Labels[key] = value
	}
	return n
}

// withoutNodeLabel removes a label from both the Node and its NodeClaim.
func withoutNodeLabel(n *Node, key string) *Node {
	delete(n.Node.Labels, key)
	if n.NodeClaim != nil {
		delete(n.NodeClaim.Labels, key)
	}
	return n
}

// unmanagedNode is a node Joiner does not manage (no NodeClaim) of cpu vCPU.
func unmanagedNode(name string, cpu int64, pods ...*corev1.Pod) *Node {
	n := testNode(name, "", od, cpu, pods...)
	delete(n.Node.Labels, karpv1.LabelNodePool)
	n.NodeClaim = nil
	n.Price = 0
	return n
}

// kNodes are count nodes "<prefix>-<i>" of pool, each made by mk.
func kNodes(prefix string, count int, mk func(name string, i int) *Node) []*Node {
	out := make([]*Node, count)
	for i := range out {
		out[i] = mk(fmt.Sprintf("%s-%d", prefix, i), i)
	}
	return out
}

// Pods. Owners carry their real API versions: Karpenter's pod
// classification (pkg/utils/pod) matches group, version and kind.

func ownedBy(p *corev1.Pod, apiVersion, kind, name string) *corev1.Pod {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: new(true)})
	return p
}

func rsPod(name, cpu string) *corev1.Pod {
	return ownedBy(testPod(name, cpu), "apps/v1", "ReplicaSet", "rs")
}

func stsPod(name, cpu string) *corev1.Pod {
	return ownedBy(testPod(name, cpu), "apps/v1", "StatefulSet", "sts")
}

func daemonPod(name string) *corev1.Pod {
	return ownedBy(testPod(name, "100m"), "apps/v1", "DaemonSet", "ds")
}

// mirrorPod is a static pod of node (owned by the Node, with the mirror
// annotation the kubelet sets).
func mirrorPod(name, node string) *corev1.Pod {
	p := ownedBy(testPod(name, "100m"), "v1", "Node", node)
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "mirror"}
	return p
}

func podAnnotated(p *corev1.Pod, key, value string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return p
}

func withDoNotDisrupt(p *corev1.Pod, value string) *corev1.Pod {
	return podAnnotated(p, karpv1.AnnotationDoNotDisrupt, value)
}

func podStartedAt(p *corev1.Pod, at time.Time) *corev1.Pod {
	p.Status.StartTime = &metav1.Time{Time: at}
	return p
}

func podDeleting(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: kNow.Add(-10 * time.Second)}
	return p
}

func podPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func podUnready(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
	return p
}

func podLabelled(p *corev1.Pod, key, value string) *corev1.Pod {
	p.Labels[key] = value
	return p
}

func podSelecting(p *corev1.Pod, key, value string) *corev1.Pod {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[key] = value
	return p
}

// maxUnavailableZeroPDB is Karpenter's "fully blocking" PDB (maxUnavailable 0):
// no eviction of the pods it selects (label app=app) is ever allowed.
func maxUnavailableZeroPDB(name, app string) *policyv1.PodDisruptionBudget {
	zero := intstr.FromInt32(0)
	p := testPDB(name, 0, app)
	p.Spec.MinAvailable = nil
	p.Spec.MaxUnavailable = &zero
	return p
}

// kType is a catalogue type of cpu vCPU (4 GiB and 20 pods per vCPU) with
// the given offerings.
func kType(name string, cpu int64, offerings ...catalog.Offering) *catalog.InstanceType {
	return fixture.InstanceType(name, cpu, offerings...)
}

// tenPools are the pools pool-0 .. pool-9 (made with opts), each with 3
// empty nodes of cpu vCPU.
func tenPools(cpu int64, opts ...func(*karpv1.NodePool)) *Input {
	var pools []*karpv1.NodePool
	var nodes []*Node
	for i := range 10 {
		name := fmt.Sprintf("pool-%d", i)
		pools = append(pools, kPool(name, opts...))
		nodes = append(nodes, kNodes(name, 3, func(n string, _ int) *Node { return testNode(n, name, od, cpu) })...)
	}
	return kIn(pools, nodes...)
}

// perPool is n for each of tenPools' pools.
func perPool(n int) map[string]int {
	out := map[string]int{}
	for i := range 10 {
		out[fmt.Sprintf("pool-%d", i)] = n
	}
	return out
}

// withTypes makes types the catalogue of in's class default.
func withTypes(in *Input, types ...*catalog.InstanceType) *Input {
	in.InstanceTypes = map[string][]*catalog.InstanceType{"default": types}
	return in
}

func kOffering(zone, ct string, price float64, available bool) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: ct, Price: price, Available: available}
}

// ofType relabels n as an instance of type it, at price.
func ofType(n *Node, it string, price float64) *Node {
	withNodeLabel(n, karpv1.LabelInstanceType, it)
	n.Price = price
	return n
}

// Checks.

func kDecide(t *testing.T, in *Input) *Result {
	t.Helper()
	r, err := Decide(in)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return r
}

func describeResult(r *Result) string {
	if r.Decision == nil {
		return "no decision"
	}
	d := r.Decision
	types := make([]string, len(d.Replacements))
	for i, rep := range d.Replacements {
		types[i] = rep.InstanceType
	}
	return fmt.Sprintf("%s of %v with %d replacement(s) %v (%s)", d.Method, names(d.Candidates), len(d.Replacements), types, d.Message)
}

func skippedSummary(r *Result) string {
	var b strings.Builder
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "\n  %s %s: %s", s.Node, s.Method, s.Reason)
	}
	return b.String()
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// allOf runs every check.
func allOf(cs ...karpCheck) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		for _, c := range cs {
			c(t, in)
		}
	}
}

// afterwards changes the input (time passing, a blocker lifting) and checks
// again.
func afterwards(change func(in *Input), c karpCheck) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		change(in)
		c(t, in)
	}
}

// clockAt moves the decision time to now.
func clockAt(now time.Time) func(in *Input) { return func(in *Input) { in.Now = now } }

// decides: the decision is method m on exactly nodes (in any order).
func decides(m Method, nodes ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || r.Decision.Method != m || !sameSet(names(r.Decision.Candidates), nodes) {
			t.Errorf("got %s, want %s of %v; skipped:%s", describeResult(r), m, nodes, skippedSummary(r))
		}
	}
}

// disrupts: the decision disrupts exactly nodes (any method).
func disrupts(nodes ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || !sameSet(names(r.Decision.Candidates), nodes) {
			t.Errorf("got %s, want %v disrupted; skipped:%s", describeResult(r), nodes, skippedSummary(r))
		}
	}
}

// replacing: the decision launches n replacements.
func replacing(n int) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || len(r.Decision.Replacements) != n {
			t.Errorf("got %s, want %d replacement(s)", describeResult(r), n)
		}
	}
}

// replacementTypes: the single replacement may launch exactly types (in
// any order).
func replacementTypes(types ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || len(r.Decision.Replacements) != 1 || !sameSet(r.Decision.Replacements[0].InstanceTypes, types) {
			got := []string(nil)
			if r.Decision != nil && len(r.Decision.Replacements) == 1 {
				got = r.Decision.Replacements[0].InstanceTypes
			}
			t.Errorf("got %s launching %v, want one replacement launching %v", describeResult(r), got, types)
		}
	}
}

// replacementExcludes: no replacement may launch any of types.
func replacementExcludes(types ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil {
			t.Errorf("no decision")
			return
		}
		for _, rep := range r.Decision.Replacements {
			for _, it := range types {
				if slices.Contains(rep.InstanceTypes, it) {
					t.Errorf("replacement may launch %s (%v)", it, rep.InstanceTypes)
				}
			}
		}
	}
}

// replacementCapacityType: every replacement is of capacity type ct.
func replacementCapacityType(ct string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || len(r.Decision.Replacements) == 0 {
			t.Errorf("got %s, want a %s replacement", describeResult(r), ct)
			return
		}
		for _, rep := range r.Decision.Replacements {
			if rep.CapacityType != ct {
				t.Errorf("replacement %s is %s, want %s", rep.InstanceType, rep.CapacityType, ct)
			}
		}
	}
}

// decidesNothing: no node is disrupted.
func decidesNothing() karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		if r := kDecide(t, in); r.Decision != nil {
			t.Errorf("got %s, want no decision", describeResult(r))
		}
	}
}

// noMethod: whatever is decided, it is not method m.
func noMethod(m Method) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		if r := kDecide(t, in); r.Decision != nil && r.Decision.Method == m {
			t.Errorf("got %s, want no %s", describeResult(r), m)
		}
	}
}

// skipsWith: node was left alone with a reason containing substr.
func skipsWith(node, substr string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		for _, s := range skipsOf(r, node) {
			if strings.Contains(s, substr) {
				return
			}
		}
		t.Errorf("node %s: no skip containing %q; got %q", node, substr, skipsOf(r, node))
	}
}

// overPasses runs Decide n times, marking each decision's candidates for
// deletion (as the leader does when it commits a decision), and hands the
// decisions over.
func overPasses(n int, check func(t *testing.T, ds []*Decision)) karpCheck {
	return passes(n, nil, check)
}

// passes is overPasses with a hook: after each decision's candidates are
// marked, commit (when not nil) applies the rest of the leader's work on
// the input.
func passes(n int, commit func(in *Input, d *Decision), check func(t *testing.T, ds []*Decision)) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		var ds []*Decision
		for range n {
			r := kDecide(t, in)
			if r.Decision == nil {
				continue
			}
			ds = append(ds, r.Decision)
			for _, c := range r.Decision.Candidates {
				c.MarkedForDeletion = true
			}
			if commit != nil {
				commit(in, r.Decision)
			}
		}
		check(t, ds)
	}
}

// disruptedInPasses: over n passes, count nodes are disrupted in total and
// perPool (when not nil) of each pool.
func disruptedInPasses(n, count int, perPool map[string]int) karpCheck {
	return overPasses(n, func(t *testing.T, ds []*Decision) {
		t.Helper()
		got := 0
		byPool := map[string]int{}
		for _, d := range ds {
			got += len(d.Candidates)
			for _, c := range d.Candidates {
				byPool[c.Pool()]++
			}
		}
		if got != count {
			t.Errorf("%d node(s) disrupted in %d decision(s) over %d passes, want %d", got, len(ds), n, count)
		}
		for p, want := range perPool {
			if byPool[p] != want {
				t.Errorf("nodepool %s: %d node(s) disrupted, want %d", p, byPool[p], want)
			}
		}
	})
}

// statusOf runs Status and checks node's entry.
func statusOf(node string, check func(t *testing.T, s NodeStatus)) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		for _, s := range Status(in) {
			if s.Node.Name() == node {
				check(t, s)
				return
			}
		}
		t.Errorf("no status for node %s", node)
	}
}

// notInStatus: Status does not report node (not managed or going away).
func notInStatus(node string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		for _, s := range Status(in) {
			if s.Node.Name() == node {
				t.Errorf("status reported for node %s: %+v", node, s)
			}
		}
	}
}

// blockers checks the graceful (emptiness, consolidation) and eventual
// (drift) blockers Status reports for node: "" wants none, "*" any, else a
// substring.
func blockers(node, graceful, eventual string) karpCheck {
	match := func(got, want string) bool {
		switch want {
		case "":
			return got == ""
		case "*":
			return got != ""
		}
		return strings.Contains(got, want)
	}
	return statusOf(node, func(t *testing.T, s NodeStatus) {
		t.Helper()
		if !match(s.Blocker, graceful) {
			t.Errorf("graceful blocker %q, want %q", s.Blocker, graceful)
		}
		if !match(s.DriftBlocker, eventual) {
			t.Errorf("eventual (drift) blocker %q, want %q", s.DriftBlocker, eventual)
		}
	})
}

// eligibleFor: Status says node is (or is not) eligible for method m.
func eligibleFor(node string, m Method, want bool) karpCheck {
	return statusOf(node, func(t *testing.T, s NodeStatus) {
		t.Helper()
		if s.Eligible(m) != want {
			t.Errorf("eligible for %s = %v, want %v (%+v)", m, !want, want, s)
		}
	})
}

// consolidatableNow: Status's Consolidatable for node.
func consolidatableNow(node string, want bool) karpCheck {
	return statusOf(node, func(t *testing.T, s NodeStatus) {
		t.Helper()
		if s.Consolidatable != want {
			t.Errorf("consolidatable = %v, want %v (consolidatable at %s)", s.Consolidatable, want, s.ConsolidatableAt)
		}
	})
}

// allows: AllowedByPool for reason gives pool want.
func allows(reason karpv1.DisruptionReason, pool string, want int) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		got, err := AllowedByPool(in, reason)
		if err != nil {
			t.Fatalf("AllowedByPool(%s): %v", reason, err)
		}
		if got[pool] != want {
			t.Errorf("allowed %s disruptions of nodepool %s = %d, want %d", reason, pool, got[pool], want)
		}
	}
}

// allReasons are the budget reasons Karpenter knows.
var allReasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted}

// allowedForAllReasons: allows for every reason.
func allowedForAllReasons(pool string, want int) karpCheck {
	var cs []karpCheck
	for _, r := range allReasons {
		cs = append(cs, allows(r, pool, want))
	}
	return allOf(cs...)
}
