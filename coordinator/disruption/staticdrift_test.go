package disruption

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func staticTestPool(name string, replicas int64) *karpv1.NodePool {
	p := testPool(name, od)
	p.Spec.Replicas = &replicas
	return p
}

// staticNodes are n nodes of a static pool, drifted (their nodepool hash
// is "old" while the pool's is "new"), oldest first.
func staticNodes(pool string, n int) []*Node {
	out := make([]*Node, n)
	for i := range out {
		nd := testNode(pool+"-"+strconv.Itoa(i), pool, od, 2, testPod(pool+"-p"+strconv.Itoa(i), "100m"))
		nd.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "old"
		nd.NodeClaim.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))
		out[i] = nd
	}
	return out
}

func staticInput(pools []*karpv1.NodePool, nodes ...*Node) *Input {
	in := testInput(t0.Add(time.Hour), pools, nodes...)
	in.NodePoolHashes = map[string]string{}
	for _, p := range pools {
		in.NodePoolHashes[p.Name] = "new"
	}
	return in
}

// The cases of Karpenter v1.14.1's staticdrift_test.go: drifted nodes of a
// static pool are replaced one for one, as many at once as the Drifted
// budget and limits.nodes allow, not while the pool is over its replicas.
func TestStaticDrift(t *testing.T) {
	limit := func(p *karpv1.NodePool, n int) *karpv1.NodePool {
		p.Spec.Limits = karpv1.Limits{karpv1.ResourceNodes: resource.MustParse(strconv.Itoa(n))}
		return p
	}
	budget := func(p *karpv1.NodePool, nodes string) *karpv1.NodePool {
		p.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
		return p
	}
	cases := []struct {
		name   string
		pools  []*karpv1.NodePool
		nodes  []*Node
		counts map[string]StaticCount
		want   []string // candidates, one replacement each
		skip   string   // a skip reason every drifted node not taken gives
	}{
		{name: "budget of 3 nodes", pools: []*karpv1.NodePool{budget(staticTestPool("s", 10), "3")}, nodes: staticNodes("s", 10),
			want: []string{"s-0", "s-1", "s-2"}, skip: "replaces only 3 node(s) at a time"},
		{name: "budget of 50%", pools: []*karpv1.NodePool{budget(staticTestPool("s", 4), "50%")}, nodes: staticNodes("s", 4),
			want: []string{"s-0", "s-1"}},
		{name: "budgets of several static pools", pools: []*karpv1.NodePool{budget(staticTestPool("a", 3), "1"), budget(staticTestPool("b", 3), "2")},
			nodes: append(staticNodes("a", 3), staticNodes("b", 3)...), want: []string{"a-0", "b-0", "b-1"}},
		{name: "budget of 0", pools: []*karpv1.NodePool{budget(staticTestPool("s", 2), "0")}, nodes: staticNodes("s", 2),
			skip: "budget of nodepool s for reason Drifted allows no more"},
		{name: "limits.nodes reached: no drift", pools: []*karpv1.NodePool{limit(staticTestPool("s", 5), 5)}, nodes: staticNodes("s", 5),
			skip: "at its limits.nodes (5)"},
		{name: "limits.nodes with room for all", pools: []*karpv1.NodePool{limit(staticTestPool("s", 5), 5)}, nodes: staticNodes("s", 2),
			want: []string{"s-0", "s-1"}},
		{name: "limits.nodes with room for some", pools: []*karpv1.NodePool{limit(staticTestPool("s", 5), 7)}, nodes: staticNodes("s", 5),
			want: []string{"s-0", "s-1"}},
		{name: "deleting nodeclaims count against limits.nodes", pools: []*karpv1.NodePool{limit(staticTestPool("s", 5), 7)}, nodes: staticNodes("s", 5),
			counts: map[string]StaticCount{"s": {Active: 5, Deleting: 1}}, want: []string{"s-0"}},
		{name: "no limits.nodes: the budget decides", pools: []*karpv1.NodePool{staticTestPool("s", 3)}, nodes: staticNodes("s", 3),
			want: []string{"s-0", "s-1", "s-2"}},
		{name: "over its replicas: scale down first", pools: []*karpv1.NodePool{staticTestPool("s", 2)}, nodes: staticNodes("s", 3),
			skip: "has 3 nodeclaims for 2 replicas: a scale-down or a replacement is under way"},
		{name: "zero replicas", pools: []*karpv1.NodePool{staticTestPool("s", 0)}, nodes: staticNodes("s", 1), skip: "a scale-down or a replacement is under way"},
		{name: "pending disruption counts toward the replicas", pools: []*karpv1.NodePool{staticTestPool("s", 3)}, nodes: staticNodes("s", 3),
			counts: map[string]StaticCount{"s": {Active: 3, PendingDisruption: 1}}, skip: "has 4 nodeclaims for 3 replicas"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := staticInput(c.pools, c.nodes...)
			in.StaticCounts = c.counts
			r := decide(t, in)
			if len(c.want) == 0 {
				if r.Decision != nil {
					t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
				}
			} else {
				d := wantDecision(t, r, MethodStaticDrift, c.want...)
				if d.Reason != karpv1.DisruptionReasonDrifted || len(d.Replacements) != len(c.want) {
					t.Fatalf("reason %s, %d replacements", d.Reason, len(d.Replacements))
				}
				for i, rep := range d.Replacements {
					if want := d.Candidates[i].Pool(); rep.NodePool != want || len(rep.Pods) != 0 || rep.InstanceType != "t-1" {
						t.Fatalf("replacement %d: %+v, want an empty claim of pool %s", i, rep, want)
					}
				}
			}
			if c.skip != "" {
				taken := map[string]bool{}
				for _, n := range c.want {
					taken[n] = true
				}
				for _, n := range c.nodes {
					if !taken[n.Name()] {
						wantSkip(t, r, n.Name(), c.skip)
					}
				}
			}
		})
	}
}

// Static pools: never emptied or consolidated, drifted only by static
// drift, expired like any other; a drifted node under do-not-disrupt waits
// unless its terminationGracePeriod lets drift past pod-level blocks.
func TestStaticPoolMethods(t *testing.T) {
	now := t0.Add(time.Hour)
	t.Run("not emptied or consolidated", func(t *testing.T) {
		pool := staticTestPool("s", 3)
		empty := testNode("empty", "s", od, 2)
		under := testNode("under", "s", od, 32, testPod("x", "100m"))
		r := decide(t, testInput(now, []*karpv1.NodePool{pool}, empty, under))
		if r.Decision != nil {
			t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
		}
		if len(r.Skipped) != 0 {
			t.Fatalf("skips %+v: static nodes are not emptiness or consolidation candidates at all", r.Skipped)
		}
		st := Status(testInput(now, []*karpv1.NodePool{pool}, empty, under))
		for _, s := range st {
			if !s.Static || s.Consolidatable || s.Eligible(MethodEmptiness) || s.Eligible(MethodConsolidation) {
				t.Fatalf("status %+v", s)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		pool := staticTestPool("s", 1)
		pool.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(30 * time.Minute)
		wantDecision(t, decide(t, testInput(now, []*karpv1.NodePool{pool}, testNode("old", "s", od, 2))), MethodExpiration, "old")
	})
	t.Run("do-not-disrupt", func(t *testing.T) {
		pool := staticTestPool("s", 2)
		nodes := staticNodes("s", 2)
		nodes[0].Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
		nodes[1].Node.Pods[0].Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
		r := decide(t, staticInput([]*karpv1.NodePool{pool}, nodes...))
		if r.Decision != nil {
			t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
		}
		wantSkip(t, r, "s-0", `Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`)
		wantSkip(t, r, "s-1", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/s-p1)`)
		tgp := karpv1.NewDuration(time.Hour)
		nodes[1].NodeClaim.Spec.TerminationGracePeriod = &tgp
		wantDecision(t, decide(t, staticInput([]*karpv1.NodePool{pool}, nodes...)), MethodStaticDrift, "s-1")
	})
	t.Run("not drifted", func(t *testing.T) {
		nodes := staticNodes("s", 2)
		for _, n := range nodes {
			delete(n.NodeClaim.Annotations, karpv1.AnnotationNodePoolHash)
		}
		if r := decide(t, staticInput([]*karpv1.NodePool{staticTestPool("s", 2)}, nodes...)); r.Decision != nil {
			t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
		}
	})
	t.Run("dynamic drift leaves static pools alone", func(t *testing.T) {
		// Static drift goes first and takes the static node; the dynamic
		// pool's drifted node is drift's next pass.
		dyn := testNode("dyn", "d", od, 2, testPod("d", "100m"))
		dyn.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "old"
		in := staticInput([]*karpv1.NodePool{staticTestPool("s", 1), testPool("d", od)}, append(staticNodes("s", 1), dyn)...)
		wantDecision(t, decide(t, in), MethodStaticDrift, "s-0")
		in.Nodes[0].MarkedForDeletion = true
		wantDecision(t, decide(t, in), MethodDrift, "dyn")
	})
}
