package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/fixture"
)

// TestRandomizedExecutionNeverViolatesBudgetOrPDB drives the controller
// (decide + execute) through 1000 steps of a randomly changing cluster:
// budgets (counts, percents, reasons, schedules), PDBs allowing 0 or 1,
// do-not-disrupt pods, drift, expiry, NotReady nodes, replacements that
// initialize, fail or hang, the termination controller finishing deletions,
// and leader changes. After every pass it checks, independently of the
// disruption core:
//   - new graceful commits of a pool stay within its budget for their
//     reason, counted from the cluster before the pass (less the
//     disruptions the pass rolled back);
//   - no graceful candidate has a do-not-disrupt pod or a pod whose PDB
//     allows no eviction;
//   - a NodeClaim is deleted only once every live launch intent holding its
//     pods made for this disruption (its replacements) is Initialized;
//   - every pending disruption intent's node is tainted (or its NodeClaim
//     deleting), and no node carries the disrupted taint without one.
func TestRandomizedExecutionNeverViolatesBudgetOrPDB(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 20))
	c := newCluster(t)
	budgetChoices := fixture.Budgets()
	c.pools = []*karpv1.NodePool{testPool("a"), testPool("b")}
	c.pools[1].Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	c.hashes["a"], c.hashes["b"] = "1", "1"
	apps := []string{"web", "api", "db", "batch"}
	seq := 0
	newNode := func() {
		seq++
		pool := c.pools[rng.IntN(len(c.pools))].Name
		var pods []*corev1.Pod
		milli := 0
		for range rng.IntN(5) {
			seq++
			cpu := []int{100, 500, 1000, 1500}[rng.IntN(4)]
			milli += cpu
			p := testPod(fmt.Sprintf("p-%d", seq), fmt.Sprintf("%dm", cpu))
			p.Labels["app"] = apps[rng.IntN(len(apps))]
			if rng.IntN(15) == 0 {
				p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
			}
			pods = append(pods, p)
		}
		// Packed nodes: their pods rarely fit elsewhere, so drift and
		// consolidation need replacements.
		c.addNode(fmt.Sprintf("n-%d", seq), pool, int64(max(1, (milli+999)/1000)), pods...)
	}
	for range 10 {
		newNode()
	}
	// The default 15 s validation delay: consolidation acts when the same
	// decision is made again a step later.
	ctl := c.controllerWith(Config{}, nil)
	stats := map[string]int{}
	for step := range 1000 {
		// The world moves.
		c.now = c.now.Add(time.Duration(rng.IntN(20)) * time.Minute)
		for _, p := range c.pools {
			if rng.IntN(4) == 0 {
				p.Spec.Disruption.Budgets = budgetChoices[rng.IntN(len(budgetChoices))]
			}
			p.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
			if rng.IntN(15) == 0 {
				p.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(3 * time.Hour)
			}
			if rng.IntN(25) == 0 {
				c.hashes[p.Name] = fmt.Sprint(step)
			}
		}
		c.pdbs = nil
		for _, a := range apps {
			if rng.IntN(2) == 0 {
				c.pdbs = append(c.pdbs, pdb(a, int32(rng.IntN(2))))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.claims)) {
			nc := c.claims[name]
			switch {
			case nc.DeletionTimestamp != nil && c.nodes[nc.Status.NodeName] != nil:
				if rng.IntN(2) == 0 {
					c.terminate(name, "")
					stats["terminated"]++
				}
			case nc.DeletionTimestamp != nil:
				delete(c.claims, name) // a failed replacement goes away
			case nc.Status.ProviderID == "":
				switch rng.IntN(6) {
				case 0, 1, 2:
					c.initialize(name)
					stats["replacement initialized"]++
				case 3:
					failed := nc.DeepCopy()
					now := metav1.NewTime(c.now)
					failed.DeletionTimestamp = &now
					c.claims[name] = failed
					c.mustPropose(fsm.IntentCancelType, fsm.IntentCancel{IntentID: "intent-" + name, Reason: "launch failed"})
					stats["replacement failed"]++
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
			n := c.nodes[name]
			if rng.IntN(40) == 0 {
				st := corev1.ConditionTrue
				if rng.IntN(2) == 0 {
					st = corev1.ConditionFalse
				}
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
			}
		}
		kept := c.pods[:0]
		for _, p := range c.pods {
			if rng.IntN(60) != 0 {
				kept = append(kept, p)
			}
		}
		c.pods = kept
		for len(c.nodes) < 6 || (len(c.nodes) < 20 && rng.IntN(3) == 0) {
			newNode()
		}
		if rng.IntN(60) == 0 {
			ctl = c.controllerWith(Config{}, nil) // leader change
			stats["leader change"]++
		}

		before := c.census()
		c.reconcile(ctl)
		ops := c.takeOps()
		c.checkPass(t, step, before, ops, stats)
	}
	stats["launch calls"] = c.launchCalls
	t.Logf("%v", stats)
	for _, k := range []string{"commit Emptiness", "commit Drift", "commit SingleNodeConsolidation", "commit Expiration", "delete", "rollback", "replacement initialized"} {
		if stats[k] == 0 {
			t.Errorf("the random walk never did %q; it does not exercise it", k)
		}
	}
}

func strp(s string) *string { return &s }

// census is the cluster before a pass, as budgets count it.
type census struct {
	now                time.Time
	total, disrupting  map[string]int
	pools              map[string]*karpv1.NodePool
	podsOn             map[string][]*corev1.Pod
	pdbs               []*policyv1.PodDisruptionBudget
	poolOfInstance     map[string]string
	nodeOfInstance     map[string]string
	pendingBefore      map[string]bool
	nodeClaimOfNode    map[string]string
	instanceOfNodeName map[string]string
}

func (c *cluster) census() *census {
	s := &census{now: c.now, total: map[string]int{}, disrupting: map[string]int{}, pools: map[string]*karpv1.NodePool{},
		podsOn: map[string][]*corev1.Pod{}, pdbs: c.pdbs, poolOfInstance: map[string]string{}, nodeOfInstance: map[string]string{},
		pendingBefore: map[string]bool{}, nodeClaimOfNode: map[string]string{}, instanceOfNodeName: map[string]string{}}
	for _, p := range c.pools {
		s.pools[p.Name] = p.DeepCopy()
	}
	pending := map[string]bool{}
	for _, t := range c.fsm.Terminations() {
		if t.State == fsm.TerminationPending {
			pending[t.InstanceID] = true
			s.pendingBefore[t.ID] = true
		}
	}
	for _, p := range c.pods {
		if p.Spec.NodeName != "" {
			s.podsOn[p.Spec.NodeName] = append(s.podsOn[p.Spec.NodeName], p)
		}
	}
	for _, nc := range c.claims {
		node := c.nodes[nc.Status.NodeName]
		if node == nil {
			continue
		}
		id := cloud.InstanceID(nc.Status.ProviderID)
		pool := nc.Labels[karpv1.LabelNodePool]
		s.poolOfInstance[id], s.nodeOfInstance[id], s.nodeClaimOfNode[node.Name], s.instanceOfNodeName[node.Name] = pool, node.Name, nc.Name, id
		if init, _ := initialized(nc); !init {
			continue
		}
		s.total[pool]++
		if pending[id] || nc.DeletionTimestamp != nil || hasTaint(node) || !nodeReady(node) {
			s.disrupting[pool]++
		}
	}
	return s
}

var budgetReason = map[string]karpv1.DisruptionReason{
	"Emptiness": karpv1.DisruptionReasonEmpty, "Drift": karpv1.DisruptionReasonDrifted,
	"SingleNodeConsolidation": karpv1.DisruptionReasonUnderutilized, "MultiNodeConsolidation": karpv1.DisruptionReasonUnderutilized,
}

func (c *cluster) checkPass(t *testing.T, step int, before *census, ops []string, stats map[string]int) {
	t.Helper()
	terms := map[string]fsm.TerminationIntent{}
	for _, ti := range c.fsm.Terminations() {
		terms[ti.ID] = ti
	}
	commits := map[string]map[string]int{} // pool -> method -> count
	cancelled := map[string]int{}
	for _, op := range ops {
		verb, arg, _ := strings.Cut(op, " ")
		switch verb {
		case "commit":
			ti := terms[arg]
			pool := before.poolOfInstance[ti.InstanceID]
			stats["commit "+ti.Reason]++
			if commits[pool] == nil {
				commits[pool] = map[string]int{}
			}
			commits[pool][ti.Reason]++
			if ti.Reason == string(disruption.MethodExpiration) {
				continue
			}
			// PDBs and do-not-disrupt, on the pods the node had.
			for _, p := range before.podsOn[before.nodeOfInstance[ti.InstanceID]] {
				if p.Annotations[karpv1.AnnotationDoNotDisrupt] == "true" {
					t.Fatalf("step %d: %s took %s with do-not-disrupt pod %s", step, ti.Reason, ti.InstanceID, p.Name)
				}
				for _, b := range before.pdbs {
					sel, _ := metav1.LabelSelectorAsSelector(b.Spec.Selector)
					if sel.Matches(labels.Set(p.Labels)) && b.Status.DisruptionsAllowed == 0 {
						t.Fatalf("step %d: %s took %s whose pod %s is protected by pdb %s", step, ti.Reason, ti.InstanceID, p.Name, b.Name)
					}
				}
			}
		case "cancel":
			stats["rollback"]++
			if before.pendingBefore[arg] {
				cancelled[before.poolOfInstance[terms[arg].InstanceID]]++
			}
		case "delete":
			stats["delete"]++
			if terms["term-"+before.instanceOfNodeName[arg]].Reason == string(disruption.MethodExpiration) {
				continue // forceful: nothing to wait for
			}
			// Replacement first: every live intent holding this node's
			// pods is initialized.
			nominated := c.fsm.NominatedPods()
			for _, p := range before.podsOn[arg] {
				id, ok := nominated[key(p)]
				if !ok {
					continue
				}
				in, _ := c.fsm.Intent(id)
				if in.CreatedAt.Before(terms["term-"+before.instanceOfNodeName[arg]].CreatedAt) {
					// A replacement of an earlier, rolled-back attempt: the
					// pods' nominations there are stale (that capacity is
					// consolidated later); this decision did not need it.
					continue
				}
				nc := c.claims[in.Spec.NodeClaim]
				if nc == nil {
					t.Fatalf("step %d: deleted %s while its pod %s is nominated to %s, which has no nodeclaim", step, arg, p.Name, in.Spec.NodeClaim)
				}
				if init, _ := initialized(nc); !init {
					t.Fatalf("step %d: deleted %s (%+v) before its replacement %s initialized (intent %+v); ops %q", step, arg, terms["term-"+before.instanceOfNodeName[arg]], nc.Name, in, ops)
				}
			}
		}
	}
	for pool, byMethod := range commits {
		for m, n := range byMethod {
			r, graceful := budgetReason[m]
			if !graceful {
				continue
			}
			allowed, err := disruption.AllowedDisruptions(before.pools[pool], r, before.total[pool], before.disrupting[pool]-cancelled[pool], before.now)
			if err != nil {
				t.Fatal(err)
			}
			if n > allowed {
				t.Fatalf("step %d: %s took %d nodes of pool %s; budget for %s allows %d (nodes %d, disrupting %d, budgets %+v)",
					step, m, n, pool, r, allowed, before.total[pool], before.disrupting[pool], before.pools[pool].Spec.Disruption.Budgets)
			}
		}
	}
	// Taints match pending intents.
	pendingNode := map[string]bool{}
	for _, ti := range terms {
		if ti.State != fsm.TerminationPending {
			continue
		}
		for name, nc := range c.claims {
			if cloud.InstanceID(nc.Status.ProviderID) != ti.InstanceID || nc.DeletionTimestamp != nil {
				continue
			}
			pendingNode[nc.Status.NodeName] = true
			if n := c.nodes[nc.Status.NodeName]; n != nil && !hasTaint(n) {
				t.Fatalf("step %d: nodeclaim %s has a pending %s intent but its node is not tainted", step, name, ti.Reason)
			}
		}
	}
	for name, n := range c.nodes {
		nc := c.claims[name]
		if hasTaint(n) && !pendingNode[name] && (nc == nil || nc.DeletionTimestamp == nil) {
			t.Fatalf("step %d: node %s is tainted without a pending disruption", step, name)
		}
	}
}
