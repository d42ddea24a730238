package disruption

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/fixture"
)

// TestRandomizedNeverViolatesBudgetOrPDB runs 1000 steps of a randomly
// changing cluster (pools with count, percent, reason-scoped and scheduled
// budgets; PDBs that allow 0 or 1; do-not-disrupt pods and nodes; nodes
// finishing deletion and new ones arriving; the clock moving) and checks
// every decision against budgets and PDBs computed independently here.
func TestRandomizedNeverViolatesBudgetOrPDB(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	clk := &fakeClock{t: t0}
	budgetChoices := append(fixture.Budgets(), []karpv1.Budget{{Nodes: "1", Schedule: strp("@daily"), Duration: dur("12h")}})
	pools := []*karpv1.NodePool{testPool("od", od), testPool("spot", spot), testPool("empty-only", od)}
	pools[2].Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	var nodes []*Node
	seq := 0
	apps := []string{"web", "api", "db", "batch", "cache"}
	newNode := func() *Node {
		seq++
		pool := pools[rng.IntN(len(pools))]
		ct := od
		if pool.Name == "spot" {
			ct = spot
		}
		var pods []*corev1.Pod
		for range rng.IntN(4) {
			seq++
			p := testPod(fmt.Sprintf("p-%d", seq), []string{"100m", "500m", "1"}[rng.IntN(3)])
			p.Labels["app"] = apps[rng.IntN(len(apps))]
			if rng.IntN(15) == 0 {
				p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
			}
			pods = append(pods, p)
		}
		n := testNode(fmt.Sprintf("n-%d", seq), pool.Name, ct, int64(1+rng.IntN(8)), pods...)
		n.NodeClaim.CreationTimestamp = metav1.NewTime(clk.Now())
		n.InitializedAt = clk.Now()
		n.Initialized = rng.IntN(10) != 0
		n.Ready = rng.IntN(20) != 0
		if rng.IntN(20) == 0 {
			n.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
		}
		n.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = fmt.Sprint(rng.IntN(2))
		if rng.IntN(5) == 0 {
			n.NodeClaim.Spec.TerminationGracePeriod = dur("1h")
		}
		return n
	}
	for range 12 {
		nodes = append(nodes, newNode())
	}
	decisions := map[Method]int{}
	for step := range 1000 {
		clk.Step(time.Duration(rng.IntN(40)) * time.Minute)
		for _, p := range pools {
			p.Spec.Disruption.Budgets = budgetChoices[rng.IntN(len(budgetChoices))]
			p.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
			if rng.IntN(10) == 0 {
				p.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(24 * time.Hour)
			}
		}
		// Deletions finish, nodes arrive, nodes initialize.
		kept := nodes[:0]
		for _, n := range nodes {
			if !(n.MarkedForDeletion && rng.IntN(3) == 0) {
				kept = append(kept, n)
			}
			if !n.Initialized && rng.IntN(3) == 0 {
				n.Initialized = true
			}
		}
		nodes = kept
		for len(nodes) < 8 || (len(nodes) < 30 && rng.IntN(2) == 0) {
			nodes = append(nodes, newNode())
		}
		var pdbs []*policyv1.PodDisruptionBudget
		for _, a := range apps {
			if rng.IntN(2) == 0 {
				pdbs = append(pdbs, testPDB(a, int32(rng.IntN(2)), a))
			}
		}
		in := testInput(clk.Now(), pools, nodes...)
		in.PDBs = pdbs
		in.NodePoolHashes = map[string]string{"od": "1", "spot": "1", "empty-only": "0"}
		res, err := Decide(in)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.Decision == nil {
			continue
		}
		d := res.Decision
		decisions[d.Method]++
		checkDecision(t, step, in, d)
		for _, n := range d.Candidates {
			n.MarkedForDeletion = true
		}
	}
	t.Logf("decisions by method: %v", decisions)
	for _, m := range []Method{MethodEmptiness, MethodDrift, MethodSingleNode, MethodMultiNode, MethodExpiration} {
		if decisions[m] == 0 {
			t.Errorf("the random walk never produced a %s decision; it does not exercise it", m)
		}
	}
}

func checkDecision(t *testing.T, step int, in *Input, d *Decision) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range d.Candidates {
		if seen[n.Name()] || n.MarkedForDeletion {
			t.Fatalf("step %d: %s picks %s twice or while already being disrupted", step, d.Method, n.Name())
		}
		seen[n.Name()] = true
	}
	if d.Method == MethodExpiration {
		return
	}
	// Budgets, counted independently of the decider.
	total, disrupting, chosen := map[string]int{}, map[string]int{}, map[string]int{}
	for _, n := range in.Nodes {
		if n.NodeClaim != nil && n.Initialized {
			pn := n.NodeClaim.Labels[karpv1.LabelNodePool]
			total[pn]++
			if n.MarkedForDeletion || !n.Ready {
				disrupting[pn]++
			}
		}
	}
	for _, n := range d.Candidates {
		chosen[n.NodeClaim.Labels[karpv1.LabelNodePool]]++
	}
	for _, p := range in.NodePools {
		allowed, err := AllowedDisruptions(p, d.Reason, total[p.Name], disrupting[p.Name], in.Now)
		if err != nil {
			t.Fatal(err)
		}
		if chosen[p.Name] > allowed {
			t.Fatalf("step %d: %s takes %d nodes of pool %s, budget for %s allows %d (pool %d, disrupting %d, budgets %+v)",
				step, d.Method, chosen[p.Name], p.Name, d.Reason, allowed, total[p.Name], disrupting[p.Name], p.Spec.Disruption.Budgets)
		}
	}
	// PDBs and do-not-disrupt.
	for _, n := range d.Candidates {
		if !n.Initialized || n.Annotations[karpv1.AnnotationDoNotDisrupt] == "true" {
			t.Fatalf("step %d: %s takes %s (initialized %v, annotations %v)", step, d.Method, n.Name(), n.Initialized, n.Annotations)
		}
		if d.Method == MethodDrift && n.NodeClaim.Spec.TerminationGracePeriod != nil {
			continue
		}
		for _, p := range n.Node.Pods {
			if p.Annotations[karpv1.AnnotationDoNotDisrupt] == "true" {
				t.Fatalf("step %d: %s takes %s with do-not-disrupt pod %s", step, d.Method, n.Name(), p.Name)
			}
			matching := 0
			for _, pdb := range in.PDBs {
				sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if pdb.Namespace == p.Namespace && sel.Matches(labels.Set(p.Labels)) {
					matching++
					if pdb.Status.DisruptionsAllowed == 0 {
						t.Fatalf("step %d: %s takes %s whose pod %s is protected by pdb %s with 0 disruptions allowed", step, d.Method, n.Name(), p.Name, pdb.Name)
					}
				}
			}
			if matching > 1 {
				t.Fatalf("step %d: %s takes %s whose pod %s has %d pdbs", step, d.Method, n.Name(), p.Name, matching)
			}
		}
	}
	if (d.Method == MethodSingleNode || d.Method == MethodMultiNode) && d.Savings <= 0 {
		t.Fatalf("step %d: consolidation without savings: %+v", step, d)
	}
}
