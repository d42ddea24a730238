package static

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/fixture"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pool is a static pool of the EC2NodeClass "default".
func pool(name string, replicas int64) *karpv1.NodePool {
	p := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Replicas = &replicas
	p.Spec.Template.Spec.NodeClassRef = fixture.NodeClassRef()
	return p
}

// unmanaged points p at another Karpenter provider's node class.
func unmanaged(p *karpv1.NodePool) *karpv1.NodePool {
	p.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test.group", Kind: "UnmanagedNodeClass", Name: "default"}
	return p
}

func withLimit(p *karpv1.NodePool, nodes int) *karpv1.NodePool {
	p.Spec.Limits = karpv1.Limits{karpv1.ResourceNodes: *resource.NewQuantity(int64(nodes), resource.DecimalSI)}
	return p
}

// claims are n claims of pool in state st, resolved (launched, with a node
// and no pods), named pool-<prefix><i>.
func claims(pool, prefix string, n int, st ClaimState) []Claim {
	out := make([]Claim, n)
	for i := range out {
		name := fmt.Sprintf("%s-%s%d", pool, prefix, i)
		out[i] = Claim{Name: name, Pool: pool, State: st, Object: true, Resolved: true, Node: name, Created: t0}
	}
	return out
}

func cat(cs ...[]Claim) []Claim { return slices.Concat(cs...) }

// The cases of Karpenter v1.14.1's static provisioning suite_test.go
// (static.provisioning's Reconcile), as pure decisions.
func TestDecideScaleUp(t *testing.T) {
	deleting := pool("s", 3)
	now := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &now
	cases := []struct {
		name   string
		pool   *karpv1.NodePool
		ready  bool
		claims []Claim
		want   int    // NodeClaims to launch
		note   string // why not, when want is 0
	}{
		// Karpenter: "should create nodeclaims when current node count is less than desired replicas".
		{name: "no nodeclaims yet", pool: pool("s", 3), ready: true, want: 3},
		// "should create additional nodeclaims to reach desired replicas".
		{name: "more to reach the replicas", pool: pool("s", 5), ready: true, claims: claims("s", "a", 2, Active), want: 3},
		{name: "as many as replicas", pool: pool("s", 3), ready: true, claims: claims("s", "a", 3, Active)},
		// "should return early if current node count exceeds desired replicas".
		{name: "more than replicas", pool: pool("s", 2), ready: true, claims: claims("s", "a", 3, Active)},
		// "should handle zero replicas".
		{name: "zero replicas", pool: pool("s", 0), ready: true},
		// "should handle large replica counts".
		{name: "large replica count", pool: pool("s", 1000), ready: true, claims: claims("s", "a", 10, Active), want: 990},
		// "should return early if nodepool root condition is not true".
		{name: "pool not ready (invalid, or its class not ready)", pool: pool("s", 3)},
		// "should return early if nodepool is being deleted".
		{name: "pool being deleted", pool: deleting, ready: true},
		// "should return early if nodepool replicas is nil".
		{name: "no replicas field", pool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, ready: true},
		// "should return early if nodepool is not managed by cloud provider".
		{name: "another provider's node class", pool: unmanaged(pool("s", 3)), ready: true},
		{name: "not launched yet counts", pool: pool("s", 3), ready: true, claims: cat(claims("s", "a", 1, Active),
			[]Claim{{Name: "s-new", Pool: "s", State: Active}}), want: 1},
		{name: "deleting ones do not count", pool: pool("s", 3), ready: true, claims: cat(claims("s", "a", 2, Active), claims("s", "d", 1, Deleting)), want: 1},
		// Replaced by a drift replacement that is on the way.
		{name: "pending disruption counts as present", pool: pool("s", 3), ready: true, claims: cat(claims("s", "a", 2, Active), claims("s", "p", 1, PendingDisruption))},
		// Karpenter launches replicas - active, the pending one aside.
		{name: "pending disruption and short", pool: pool("s", 3), ready: true, claims: cat(claims("s", "a", 1, Active), claims("s", "p", 1, PendingDisruption)), want: 2},
		{name: "other pools' claims do not count", pool: pool("s", 2), ready: true, claims: claims("other", "a", 5, Active), want: 2},
		{name: "limits.nodes reached", pool: withLimit(pool("s", 5), 3), ready: true, claims: claims("s", "a", 3, Active),
			note: "nodepool node limit reached: 3 of 5 replicas, limits.nodes 3 counts 3 nodeclaim(s) (0 deleting)"},
		// "should not create additional nodeclaims when node limits are reached".
		{name: "limits.nodes below the replicas, reached", pool: withLimit(pool("s", 3), 1), ready: true, claims: claims("s", "a", 1, Active),
			note: "nodepool node limit reached: 1 of 3 replicas, limits.nodes 1 counts 1 nodeclaim(s) (0 deleting)"},
		// "should reserve nodepool nodecount during provisioning and release after" (the second pass: replicas 15, limit 10).
		{name: "limits.nodes below the replicas: up to the limit", pool: withLimit(pool("s", 15), 10), ready: true,
			claims: claims("s", "a", 3, Active), want: 7},
		{name: "limits.nodes counts deleting nodeclaims", pool: withLimit(pool("s", 5), 4), ready: true,
			claims: cat(claims("s", "a", 2, Active), claims("s", "d", 1, Deleting)), want: 1},
		{name: "limits.nodes counts pending disruption", pool: withLimit(pool("s", 5), 4), ready: true,
			claims: cat(claims("s", "a", 2, Active), claims("s", "p", 2, PendingDisruption)), note: "limits.nodes 4 counts 4"},
		{name: "limits.nodes above the replicas", pool: withLimit(pool("s", 3), 10), ready: true, want: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Decide(&Input{Now: t0, NodePools: []*karpv1.NodePool{c.pool}, Ready: map[string]bool{"s": c.ready}, Claims: c.claims})
			got := 0
			for _, l := range res.Launches {
				if l.Pool != "s" {
					t.Fatalf("launch for pool %s", l.Pool)
				}
				got += l.Count
			}
			if got != c.want {
				t.Fatalf("launch %d, want %d (%+v)", got, c.want, res)
			}
			if len(res.Deletions) > 0 && c.want > 0 {
				t.Fatalf("deletions %+v while scaling up", res.Deletions)
			}
			note := ""
			for _, n := range res.Notes {
				note += n.Message
			}
			if !strings.Contains(note, c.note) || (c.note == "" && note != "") {
				t.Fatalf("notes %q, want %q", note, c.note)
			}
		})
	}
}

func pods(names ...string) []*corev1.Pod {
	out := make([]*corev1.Pod, len(names))
	for i, n := range names {
		out[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "default"}}
	}
	return out
}

func dsPod(name string) *corev1.Pod {
	p := pods(name)[0]
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}
	return p
}

// dndPod is a pod started at t0 with a do-not-disrupt annotation (a
// duration counts from the pod's start; a pod that has not started is
// protected, as in Karpenter).
func dndPod(name, value string) *corev1.Pod {
	p := pods(name)[0]
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: value}
	p.CreationTimestamp = metav1.NewTime(t0)
	p.Status.StartTime = &metav1.Time{Time: t0}
	return p
}

func deleted(res *Result) []string {
	var out []string
	for _, d := range res.Deletions {
		out = append(out, d.NodeClaim)
	}
	return out
}

// The cases of Karpenter v1.14.1's static deprovisioning suite_test.go.
func TestDecideScaleDown(t *testing.T) {
	deletingPool := pool("s", 1)
	now := metav1.NewTime(t0)
	deletingPool.DeletionTimestamp = &now
	unresolved := func(name string) Claim { return Claim{Name: name, Pool: "s", State: Active, Object: true, Created: t0} }
	cases := []struct {
		name   string
		pool   *karpv1.NodePool
		claims []Claim
		want   []string // deleted, in order
	}{
		// Karpenter: "should return early if current node count is less than or equal to desired replicas".
		{name: "as many as replicas", pool: pool("s", 3), claims: claims("s", "a", 3, Active)},
		{name: "fewer than replicas", pool: pool("s", 5), claims: claims("s", "a", 3, Active)},
		// "should return early if nodepool replicas is nil".
		{name: "no replicas field", pool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, claims: claims("s", "a", 3, Active)},
		// "should return early if nodepool is being deleted".
		{name: "pool being deleted", pool: deletingPool, claims: claims("s", "a", 3, Active)},
		// "should return early if nodepool is not managed by cloud provider" (over its replicas here, so
		// that leaving it alone is the pool's kind and not its count).
		{name: "another provider's node class", pool: unmanaged(pool("s", 1)), claims: claims("s", "a", 2, Active)},
		// "should only consider running nodeclaims and not deleting nodeclaims".
		{name: "only active ones count, not deleting ones", pool: pool("s", 2), claims: cat(claims("s", "a", 2, Active), claims("s", "d", 2, Deleting))},
		{name: "marked for deletion by disruption: not counted", pool: pool("s", 1), claims: cat(claims("s", "a", 1, Active), claims("s", "d", 3, Deleting))},
		{name: "pending disruption does not count", pool: pool("s", 2), claims: cat(claims("s", "a", 2, Active), claims("s", "p", 1, PendingDisruption))},
		// "should terminate excess nodeclaims when current count exceeds desired replicas".
		{name: "excess deleted", pool: pool("s", 3), claims: claims("s", "a", 5, Active), want: []string{"s-a0", "s-a1"}},
		{name: "four to two", pool: pool("s", 2), claims: claims("s", "a", 4, Active), want: []string{"s-a0", "s-a1"}},
		// "should handle zero replicas by terminating all nodeclaims".
		{name: "zero replicas: all of them", pool: pool("s", 0), claims: cat(claims("s", "a", 3, Active), claims("s", "d", 1, Deleting)),
			want: []string{"s-a0", "s-a1", "s-a2"}},
		// "should handle no active nodeclaims gracefully".
		{name: "no nodeclaims", pool: pool("s", 0)},
		// "should prioritize nodeclaims that have unresolved providerID".
		{name: "not launched first", pool: pool("s", 2), claims: cat(claims("s", "a", 2, Active), []Claim{unresolved("s-u0"), unresolved("s-u1")}),
			want: []string{"s-u0", "s-u1"}},
		{name: "not launched, then the rest", pool: pool("s", 1), claims: cat(claims("s", "a", 2, Active), []Claim{unresolved("s-u0")}),
			want: []string{"s-u0", "s-a0"}},
		{name: "a launch without its object yet is not deletable", pool: pool("s", 1),
			claims: cat(claims("s", "a", 1, Active), []Claim{{Name: "s-x", Pool: "s", State: Active}}), want: []string{"s-a0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Decide(&Input{Now: t0, NodePools: []*karpv1.NodePool{c.pool}, Ready: map[string]bool{"s": true}, Claims: c.claims})
			if got := deleted(res); !slices.Equal(got, c.want) {
				t.Fatalf("deleted %v, want %v", got, c.want)
			}
			if len(res.Launches) > 0 && len(c.want) > 0 {
				t.Fatalf("launches %+v while scaling down", res.Launches)
			}
		})
	}
}

// Karpenter's "scales down in disruption cost order" table (Describe
// "disruption cost ordering"): two nodes each
// of low (one pod), high (two pods), dnd (a do-not-disrupt pod) and ds (a
// DaemonSet pod only); DaemonSet-only nodes go first, then by rescheduling
// cost, do-not-disrupt last.
func TestScaleDownOrder(t *testing.T) {
	var cs []Claim
	var order []string
	for i := range 2 {
		for _, kind := range []string{"low", "high", "dnd", "ds"} {
			c := Claim{Name: fmt.Sprintf("%s-%d", kind, i), Pool: "s", State: Active, Object: true, Resolved: true, Created: t0}
			switch kind {
			case "low":
				c.Pods = pods("system-low")
			case "high":
				c.Pods = pods("system-high", "app-high")
			case "dnd":
				c.Pods = []*corev1.Pod{dndPod("app-dnd", "true")}
			case "ds":
				c.Pods = []*corev1.Pod{dsPod("dmn")}
			}
			c.Name = fmt.Sprintf("n%d-%s", len(cs), kind)
			cs = append(cs, c)
			order = append(order, c.Name)
		}
	}
	name := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, order[i])
		}
		return out
	}
	cases := []struct {
		replicas int64
		keep     []int
	}{
		{6, []int{0, 1, 2, 4, 5, 6}}, // DaemonSet-only first
		{4, []int{1, 2, 5, 6}},       // low next
		{2, []int{2, 6}},             // high next
		{0, nil},                     // do-not-disrupt last
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("to %d", c.replicas), func(t *testing.T) {
			res := Decide(&Input{Now: t0.Add(time.Hour), NodePools: []*karpv1.NodePool{pool("s", c.replicas)}, Claims: cs})
			gone := deleted(res)
			var left []string
			for _, n := range order {
				if !slices.Contains(gone, n) {
					left = append(left, n)
				}
			}
			if !slices.Equal(left, name(c.keep...)) {
				t.Fatalf("left %v, want %v (deleted %v)", left, name(c.keep...), gone)
			}
		})
	}
}

// Empty nodes, eviction costs and the lifetime left order the rest.
func TestScaleDownCandidates(t *testing.T) {
	now := t0.Add(time.Hour)
	week := karpv1.NewDuration(7 * 24 * time.Hour)
	c := func(name string, ps ...*corev1.Pod) Claim {
		return Claim{Name: name, Pool: "s", State: Active, Object: true, Resolved: true, Created: t0, Pods: ps}
	}
	prio := int32(1 << 26) // eviction cost 1 + 2
	important := pods("important")[0]
	important.Spec.Priority = &prio
	old := c("old", pods("o1", "o2")...)
	old.Created, old.ExpireAfter = now.Add(-6*24*time.Hour), week // 1/7 of its lifetime left
	expiredDND := c("dnd-expired", dndPod("d", "30m"))            // do-not-disrupt for 30m after t0: over
	cases := []struct {
		name   string
		claims []Claim
		n      int
		want   []string
	}{
		{"empty and DaemonSet-only nodes first", []Claim{c("busy", pods("a")...), c("bare"), c("ds", dsPod("x"))}, 2, []string{"bare", "ds"}},
		// Karpenter: "should prioritize empty nodes (with only daemonset pods) for termination".
		{"DaemonSet-only nodes before nodes with a pod", []Claim{c("n0", dsPod("d0")), c("n1", pods("p1")...), c("n2", dsPod("d2")), c("n3", pods("p3")...)},
			2, []string{"n0", "n2"}},
		// "should terminate non-empty nodes when empty nodes are insufficient".
		{"busy nodes once the empty ones are not enough", []Claim{c("n0", pods("p0")...), c("n1"), c("n2", pods("p2")...), c("n3")},
			3, []string{"n1", "n3", "n0"}},
		{"a DaemonSet pod under do-not-disrupt is not empty", []Claim{c("ds-dnd", dsPod("x"), dndPod("y", "true")), c("busy", pods("a")...)}, 1, []string{"busy"}},
		{"eviction cost: priority weighs", []Claim{c("prio", important), c("two", pods("a", "b")...), c("one", pods("c")...)}, 2, []string{"one", "two"}},
		{"lifetime left scales the cost", []Claim{c("young", pods("y1", "y2")...), old}, 1, []string{"old"}},
		{"an elapsed do-not-disrupt duration does not protect", []Claim{c("two", pods("a", "b")...), expiredDND}, 1, []string{"dnd-expired"}},
		{"deleting and pending ones are not candidates", cat([]Claim{c("a", pods("p")...)}, claims("s", "d", 1, Deleting), claims("s", "p", 1, PendingDisruption)), 1, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			active := 0
			for _, cl := range tc.claims {
				if cl.State == Active {
					active++
				}
			}
			res := Decide(&Input{Now: now, NodePools: []*karpv1.NodePool{pool("s", int64(active-tc.n))}, Claims: tc.claims})
			if got := deleted(res); !slices.Equal(got, tc.want) {
				t.Fatalf("deleted %v, want %v", got, tc.want)
			}
		})
	}
}

// Several pools are decided independently, in name order.
func TestDecidePools(t *testing.T) {
	res := Decide(&Input{Now: t0, NodePools: []*karpv1.NodePool{pool("b", 1), pool("a", 2), {ObjectMeta: metav1.ObjectMeta{Name: "dynamic"}}},
		Ready:  map[string]bool{"a": true, "b": true, "dynamic": true},
		Claims: cat(claims("b", "x", 3, Active), claims("dynamic", "x", 2, Active))})
	if len(res.Launches) != 1 || res.Launches[0] != (Launch{Pool: "a", Count: 2, Message: "0 of 2 replicas, launching 2"}) {
		t.Fatalf("launches %+v", res.Launches)
	}
	if got := deleted(res); !slices.Equal(got, []string{"b-x0", "b-x1"}) {
		t.Fatalf("deleted %v", got)
	}
}
