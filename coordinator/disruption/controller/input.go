package controller

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// pass is one pass's picture: the cluster view plus the raft state the
// controller needs, indexed.
type pass struct {
	snap *view.View
	now  time.Time
	// pending termination intents by instance ID and by ID.
	terminating map[string]fsm.TerminationIntent
	pending     map[string]fsm.TerminationIntent
	// live launch intents by ID and by NodeClaim name.
	intents       map[string]fsm.LaunchIntent
	intentByClaim map[string]fsm.LaunchIntent
	// nodeOfInstance: instance ID -> node name (raft's instances, and the
	// provider IDs of adopted NodeClaims).
	nodeOfInstance map[string]string
}

func (c *Controller) pass(s *view.View, now time.Time) *pass {
	v := &pass{snap: s, now: now, terminating: map[string]fsm.TerminationIntent{}, pending: map[string]fsm.TerminationIntent{},
		intents: map[string]fsm.LaunchIntent{}, intentByClaim: map[string]fsm.LaunchIntent{},
		nodeOfInstance: map[string]string{}}
	for _, t := range c.d.State.Terminations() {
		if t.State == fsm.TerminationPending {
			v.terminating[t.InstanceID] = t
			v.pending[t.ID] = t
		}
	}
	for _, in := range c.d.State.Intents() {
		if in.State.Live() {
			v.intents[in.ID] = in
			v.intentByClaim[in.Spec.NodeClaim] = in
		}
	}
	for node, inst := range s.Instances {
		v.nodeOfInstance[inst.ID] = node
	}
	// Nodes Karpenter launched (adopted) have no instance in raft: their
	// NodeClaim's provider ID names it.
	for node, nc := range s.NodeClaims {
		if id := cloud.InstanceID(nc.Status.ProviderID); id != "" && v.nodeOfInstance[id] == "" {
			v.nodeOfInstance[id] = node
		}
	}
	return v
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// instanceOf is the instance ID of a node: raft's, else the provider ID's.
func (v *pass) instanceOf(node string) string {
	if inst, ok := v.snap.Instances[node]; ok {
		return inst.ID
	}
	if nc := v.snap.NodeClaims[node]; nc != nil {
		return cloud.InstanceID(nc.Status.ProviderID)
	}
	return ""
}

// input builds the disruption core's input from the view.
func (c *Controller) input(v *pass) *disruption.Input {
	s := v.snap
	in := &disruption.Input{
		Now: v.now, NodePools: s.NodePools, NodeClasses: s.NodeClasses, InstanceTypes: s.InstanceTypes,
		DaemonSetPods: s.DaemonSetPods, Volumes: s.Volumes, Namespaces: s.Namespaces, MinValuesPolicy: s.MinValuesPolicy,
		PDBs: s.PDBs, NodePoolHashes: s.NodePoolHashes, NodeClassHashes: s.NodeClassHashes,
		MaxSimulations: c.cfg.MaxSimulations, SingleNodeOffset: c.singleNodeOffset, FeatureGates: c.cfg.FeatureGates,
	}
	// The pods that need capacity: the view's pending pods less the copies
	// of disrupted nodes' pods it adds for the provisioner (the core moves
	// those itself).
	for _, p := range s.Pending {
		if podutil.Provisionable(p) {
			in.PendingPods = append(in.PendingPods, p)
		}
	}
	if c.d.Static != nil {
		in.StaticCounts = c.d.Static.Counts(v.now)
	}
	schedNodes := map[string]*scheduler.Node{}
	for _, sn := range s.Nodes {
		if sn.InFlight {
			// In-flight NodeClaims: capacity for the simulation (never
			// a home for displaced pods until initialized), no candidate.
			in.Nodes = append(in.Nodes, &disruption.Node{Node: sn})
			continue
		}
		schedNodes[sn.Name] = sn
	}
	for _, node := range s.AllNodes {
		sn := schedNodes[node.Name]
		if sn == nil {
			sn = &scheduler.Node{Name: node.Name, Labels: node.Labels, Taints: node.Spec.Taints,
				Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable, Pods: s.PodsByNode[node.Name]}
		}
		nc := s.NodeClaims[node.Name]
		if nc != nil && !awsv1.ManagesNodeClaim(nc) {
			nc = nil // another provider's: capacity, never a candidate (Karpenter's IsManaged)
		}
		n := &disruption.Node{Node: sn, NodeClaim: nc, Annotations: node.Annotations, Ready: nodeReady(node)}
		if listed, ok := s.Listed[node.Name]; ok {
			n.Listed = &listed
		}
		if n.NodeClaim != nil {
			n.Initialized, n.InitializedAt = initialized(n.NodeClaim)
			id := v.instanceOf(node.Name)
			_, term := v.terminating[id]
			n.MarkedForDeletion = term || s.Disrupting[node.Name] || n.NodeClaim.DeletionTimestamp != nil
			n.Price = c.price(v, node)
			n.Nominated = v.nominatedHere(node.Name)
			if until, ok := c.coolDown[node.Name]; ok {
				n.Blocked = "a disruption of this node was rolled back; cooling down until " + until.UTC().Format(time.RFC3339)
			}
		}
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

// nominatedHere says whether pods still on their way are nominated to the
// node's launch intent and the nomination holds (the view's Nominations):
// pending pods, or pods bound to a node that is being disrupted (a
// replacement waits for the pods it was made for). A pod bound elsewhere
// has used its nomination up.
func (v *pass) nominatedHere(node string) bool {
	inst, ok := v.snap.Instances[node]
	if !ok {
		return false
	}
	in, ok := v.intents[inst.IntentID]
	if !ok {
		return false
	}
	return slices.ContainsFunc(in.Pods, func(k string) bool { return v.snap.Nominations[k] == in.ID })
}

// price is the node's hourly price: raft's record of the launch, else the
// catalogue's offering for its type, zone and capacity type.
func (c *Controller) price(v *pass, node *corev1.Node) float64 {
	if inst, ok := v.snap.Instances[node.Name]; ok && inst.Price > 0 {
		return inst.Price
	}
	for _, its := range v.snap.InstanceTypes {
		if p, ok := view.OfferingPrice(its, node.Labels); ok {
			return p
		}
	}
	return 0
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// initialized reads the NodeClaim's Initialized condition.
func initialized(nc *karpv1.NodeClaim) (bool, time.Time) {
	for _, c := range nc.Status.Conditions {
		if c.Type == karpv1.ConditionInitialized {
			return c.Status == "True", c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}
