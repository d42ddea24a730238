// Package static is Karpenter's static capacity (alpha, feature gate
// StaticCapacity) for Joiner: a NodePool with spec.replicas keeps exactly
// that many NodeClaims whatever the pods need.
//
//   - Provisioning (Karpenter's static.provisioning controller): while the
//     pool's active NodeClaims plus those pending disruption are fewer than
//     replicas, NodeClaims of the pool's template are launched, no more than
//     limits.nodes admits (every NodeClaim of the pool, deleting ones
//     included, counts against it).
//   - Deprovisioning (static.deprovisioning): while the active NodeClaims
//     are more than replicas, the excess is deleted: NodeClaims not launched
//     yet first, then nodes without pods (or with DaemonSet pods only, none
//     under do-not-disrupt), then the cheapest to disrupt (eviction costs
//     scaled by the lifetime left), nodes with a do-not-disrupt pod last.
//     Budgets do not apply; the termination controller drains.
//
// Elsewhere: the scheduler never provisions for pods on a static pool (its
// nodes still take pods), emptiness and consolidation leave static pools
// alone, drifted static nodes are replaced one for one by disruption's
// static drift, expired ones are replaced here once deleted. Decide is the
// pure core; Counter and Controller read the cluster and act.
package static

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// ClaimState is a NodeClaim's state as Karpenter's NodePoolState counts
// it.
type ClaimState int

// NodeClaim states.
const (
	// Active: launched or launching, not going away.
	Active ClaimState = iota
	// PendingDisruption: being disrupted (a disruption termination intent
	// is pending), not deleted yet: its replacements are on the way.
	PendingDisruption
	// Deleting: the NodeClaim or its Node is being deleted.
	Deleting
)

// Claim is one NodeClaim of a pool (or a committed launch whose object is
// not created yet).
type Claim struct {
	Name, Pool string
	State      ClaimState
	// Object: the NodeClaim object exists (it can be deleted).
	Object bool
	// Resolved: launched (the NodeClaim has a provider ID).
	Resolved bool
	// Node is its Node's name ("" before it registers); Pods are the pods
	// bound there.
	Node string
	Pods []*corev1.Pod
	// Created and ExpireAfter (the NodeClaim's) scale its disruption cost.
	Created     time.Time
	ExpireAfter karpv1.Duration
}

// Sources are what Collect reads: the cached NodeClaims and Nodes, the
// raft state and the pods by node.
type Sources struct {
	Now          time.Time
	NodeClaims   []*karpv1.NodeClaim
	Nodes        []*corev1.Node
	Intents      []fsm.LaunchIntent
	Instances    []fsm.Instance
	Terminations []fsm.TerminationIntent
	PodsByNode   map[string][]*corev1.Pod
	// Deleted are NodeClaims Joiner deleted whose deletion the cache may
	// not show yet (counted Deleting).
	Deleted map[string]bool
	// Grace is how long a launched intent whose NodeClaim object is gone is
	// still counted (the provisioner recreates the object within it;
	// default 1 min, its NominationGrace).
	Grace time.Duration
}

// Collect lists every pool's NodeClaims with their states: the cached
// objects, and the live launch intents whose object the provisioner has not
// created yet (or recreates after a failover). Pure.
func Collect(s *Sources) []Claim {
	grace := s.Grace
	if grace <= 0 {
		grace = time.Minute
	}
	pendingTerm := map[string]bool{} // instance ID
	for _, t := range s.Terminations {
		if t.State == fsm.TerminationPending {
			pendingTerm[t.InstanceID] = true
		}
	}
	gone := map[string]bool{}
	for _, inst := range s.Instances {
		if inst.State.Terminal() {
			gone[inst.ID] = true
		}
	}
	nodeByProvider := map[string]*corev1.Node{}
	for _, n := range s.Nodes {
		if n.Spec.ProviderID != "" {
			nodeByProvider[n.Spec.ProviderID] = n
		}
	}
	var out []Claim
	seen := map[string]bool{}
	for _, nc := range s.NodeClaims {
		seen[nc.Name] = true
		pool := nc.Labels[karpv1.LabelNodePool]
		if pool == "" {
			continue
		}
		c := Claim{Name: nc.Name, Pool: pool, Object: true, Resolved: nc.Status.ProviderID != "",
			Created: nc.CreationTimestamp.Time, ExpireAfter: nc.Spec.ExpireAfter}
		node := nodeByProvider[nc.Status.ProviderID]
		if c.Resolved && node != nil {
			c.Node = node.Name
			c.Pods = s.PodsByNode[node.Name]
		}
		switch {
		case nc.DeletionTimestamp != nil || s.Deleted[nc.Name] || node != nil && node.DeletionTimestamp != nil:
			c.State = Deleting
		case c.Resolved && pendingTerm[cloud.InstanceID(nc.Status.ProviderID)]:
			c.State = PendingDisruption
		}
		out = append(out, c)
	}
	for _, in := range s.Intents {
		name := in.Spec.NodeClaim
		if !in.State.Live() || seen[name] || in.Spec.NodePool == "" {
			continue
		}
		// Counted while the provisioner would (re)create its object.
		if in.InstanceID != "" && (pendingTerm[in.InstanceID] || gone[in.InstanceID]) {
			continue
		}
		if in.State == fsm.IntentLaunched && s.Now.Sub(in.UpdatedAt) > grace {
			continue
		}
		seen[name] = true
		st := Active
		if s.Deleted[name] {
			st = Deleting
		}
		out = append(out, Claim{Name: name, Pool: in.Spec.NodePool, State: st, Resolved: in.InstanceID != "", Created: in.CreatedAt})
	}
	slices.SortFunc(out, func(a, b Claim) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Counts are the claims of each pool by state.
func Counts(claims []Claim) map[string]disruption.StaticCount {
	out := map[string]disruption.StaticCount{}
	for _, c := range claims {
		n := out[c.Pool]
		switch c.State {
		case Active:
			n.Active++
		case PendingDisruption:
			n.PendingDisruption++
		case Deleting:
			n.Deleting++
		}
		out[c.Pool] = n
	}
	return out
}
