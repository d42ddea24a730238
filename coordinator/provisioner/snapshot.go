package provisioner

import (
	"context"
	"maps"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Snapshot is the cluster as the scheduler and the disruption core see it
// at one instant: valid pools and classes, instance types, DaemonSet
// overhead, existing nodes and in-flight NodeClaims with their pods, and the
// pods that need capacity. Objects are shared with the informer cache:
// read-only.
type Snapshot struct {
	Now time.Time
	// NodePools are the valid, defaulted pools whose class is ready.
	NodePools []*karpv1.NodePool
	// NodeClasses by name (valid and resolved).
	NodeClasses map[string]*awsv1.EC2NodeClass
	// Resolved selector terms by class name.
	Resolved map[string]joineraws.Resolved
	// InstanceTypes by class name.
	InstanceTypes map[string][]*catalog.InstanceType
	// DaemonSetPods: one pod per DaemonSet (its template).
	DaemonSetPods []*corev1.Pod
	// Nodes are the schedulable existing nodes and the in-flight NodeClaims
	// (InFlight), each with the pods bound or nominated there. Nodes being
	// disrupted (NodeClaim deleting, karpenter.sh/disrupted taint,
	// cordoned, deleting) give no capacity and are left out.
	Nodes []*scheduler.Node
	// AllNodes are every Node object with its pods, disrupted ones included
	// (disruption's view).
	AllNodes []*corev1.Node
	// PodsByNode are the bound pods of every node.
	PodsByNode map[string][]*corev1.Pod
	// NodeClaims by node name (registered claims only).
	NodeClaims map[string]*karpv1.NodeClaim
	// Instances by node name (from raft).
	Instances map[string]fsm.Instance
	// Disrupting names the nodes being disrupted (see Nodes).
	Disrupting map[string]bool
	// PDBs as the cache has them.
	PDBs []*policyv1.PodDisruptionBudget
	// NodePoolHashes and NodeClassHashes are the current drift hashes.
	NodePoolHashes  map[string]string
	NodeClassHashes map[string]string
	// Pending are the pods that need capacity: unschedulable pods not
	// nominated to in-flight capacity, and the reschedulable pods of nodes
	// being disrupted (so their replacement comes first). Pods bound to a
	// disrupted node are shallow copies with spec.nodeName cleared.
	Pending []*corev1.Pod
	// Nominated maps a pod key (namespace/name) to the intent whose
	// in-flight capacity holds it.
	Nominated map[string]string

	// pending indexes Pending by pod key.
	pending map[string]*corev1.Pod
}

// Snapshot builds the cluster snapshot from the cache, raft and the cloud.
func (p *Provisioner) Snapshot(ctx context.Context) (*Snapshot, error) {
	now := p.cfg.Now()
	s := &Snapshot{
		Now: now, NodeClasses: map[string]*awsv1.EC2NodeClass{}, Resolved: map[string]joineraws.Resolved{},
		InstanceTypes: map[string][]*catalog.InstanceType{}, PodsByNode: map[string][]*corev1.Pod{},
		NodeClaims: map[string]*karpv1.NodeClaim{}, Instances: map[string]fsm.Instance{}, Disrupting: map[string]bool{},
		NodePoolHashes: map[string]string{}, NodeClassHashes: map[string]string{}, Nominated: map[string]string{},
		PDBs: p.cache.PDBs(),
	}
	if err := p.loadClasses(ctx, s); err != nil {
		return nil, err
	}
	p.loadPools(ctx, s)
	s.DaemonSetPods = daemonSetPods(p.cache)

	// Raft state: intents, instances by ID, terminations.
	intents := map[string]fsm.LaunchIntent{}
	for _, in := range p.state.Intents() {
		if in.State.Live() {
			intents[in.ID] = in
		}
	}
	instByID := map[string]fsm.Instance{}
	for _, inst := range p.state.Instances() {
		instByID[inst.ID] = inst
	}
	terminating := map[string]bool{}
	for _, t := range p.state.Terminations() {
		if t.State == fsm.TerminationPending {
			terminating[t.InstanceID] = true
		}
	}
	nominated := p.state.NominatedPods()

	// Claims by provider ID, and which ones are being deleted.
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range p.cache.NodeClaims() {
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}

	pods := p.cache.Pods()
	podByKey := make(map[string]*corev1.Pod, len(pods))
	for _, pod := range pods {
		podByKey[pod.Namespace+"/"+pod.Name] = pod
		if pod.Spec.NodeName != "" && !terminal(pod) {
			s.PodsByNode[pod.Spec.NodeName] = append(s.PodsByNode[pod.Spec.NodeName], pod)
		}
	}

	// Existing nodes.
	registered := map[string]string{} // intent ID -> node name
	for _, node := range p.cache.Nodes() {
		s.AllNodes = append(s.AllNodes, node)
		nc := claimByProvider[node.Spec.ProviderID]
		if nc != nil {
			s.NodeClaims[node.Name] = nc
		}
		id := instanceID(node.Spec.ProviderID)
		inst, haveInst := instByID[id]
		if haveInst {
			s.Instances[node.Name] = inst
			if _, ok := intents[inst.IntentID]; ok {
				registered[inst.IntentID] = node.Name
			}
		}
		if disrupting(node, nc) || (haveInst && terminating[id]) {
			s.Disrupting[node.Name] = true
		}
	}
	for _, node := range s.AllNodes {
		if s.Disrupting[node.Name] || node.Spec.Unschedulable {
			continue
		}
		sn := &scheduler.Node{Name: node.Name, Labels: node.Labels, Taints: node.Spec.Taints,
			Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable, Pods: s.PodsByNode[node.Name]}
		if inst, ok := s.Instances[node.Name]; ok {
			if in, ok := intents[inst.IntentID]; ok {
				// Pods nominated there but not bound yet keep their room.
				for _, key := range in.Pods {
					if pod := podByKey[key]; pod != nil && pod.Spec.NodeName == "" && !terminal(pod) {
						sn.Pods = append(sn.Pods, pod)
					}
				}
			}
		}
		s.Nodes = append(s.Nodes, sn)
	}

	// In-flight capacity: live intents without a registered node.
	ids := make([]string, 0, len(intents))
	for id := range intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		in := intents[id]
		if _, ok := registered[id]; ok {
			continue
		}
		if in.InstanceID != "" && terminating[in.InstanceID] {
			continue
		}
		sn := p.inFlightNode(s, in, instByID)
		if sn == nil {
			continue
		}
		for _, key := range in.Pods {
			if pod := podByKey[key]; pod != nil && !terminal(pod) && (pod.Spec.NodeName == "" || s.Disrupting[pod.Spec.NodeName]) {
				sn.Pods = append(sn.Pods, unbound(pod))
			}
		}
		s.Nodes = append(s.Nodes, sn)
	}

	// Pending pods: unschedulable ones not held by fresh nominations, then
	// the reschedulable pods of disrupted nodes.
	for _, pod := range pods {
		key := pod.Namespace + "/" + pod.Name
		if !provisionable(pod) {
			continue
		}
		if id, ok := nominated[key]; ok && p.nominationHolds(intents[id], instByID, now) {
			s.Nominated[key] = id
			continue
		}
		s.Pending = append(s.Pending, pod)
	}
	for _, node := range s.AllNodes {
		if !s.Disrupting[node.Name] {
			continue
		}
		for _, pod := range s.PodsByNode[node.Name] {
			key := pod.Namespace + "/" + pod.Name
			if !reschedulable(pod) {
				continue
			}
			if id, ok := nominated[key]; ok {
				if _, live := intents[id]; live {
					s.Nominated[key] = id
					continue
				}
			}
			s.Pending = append(s.Pending, unbound(pod))
		}
	}
	s.pending = make(map[string]*corev1.Pod, len(s.Pending))
	for _, pod := range s.Pending {
		s.pending[pod.Namespace+"/"+pod.Name] = pod
	}
	return s, nil
}

// nominationHolds reports whether a pending pod nominated to intent in
// should wait for it rather than be planned again: while the launch is in
// flight, and for a minute after its instance became ready (kube-scheduler
// binds it then).
func (p *Provisioner) nominationHolds(in fsm.LaunchIntent, insts map[string]fsm.Instance, now time.Time) bool {
	switch in.State {
	case fsm.IntentPending, fsm.IntentLaunching:
		return true
	case fsm.IntentLaunched:
		inst, ok := insts[in.InstanceID]
		if !ok || inst.State.Terminal() {
			return false
		}
		switch inst.State {
		case fsm.InstanceLaunched, fsm.InstanceRegistered:
			return true
		case fsm.InstanceReady:
			return now.Sub(inst.UpdatedAt) < p.cfg.NominationGrace
		}
	}
	return false
}

// inFlightNode models a live intent that has no Node yet: its labels, the
// taints of its pool and the allocatable of its launched (or cheapest
// candidate) instance type.
func (p *Provisioner) inFlightNode(s *Snapshot, in fsm.LaunchIntent, insts map[string]fsm.Instance) *scheduler.Node {
	spec := in.Spec
	typ := ""
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if inst, ok := insts[in.InstanceID]; ok && in.InstanceID != "" {
		if inst.State.Terminal() {
			return nil
		}
		typ = inst.InstanceType
		labels[karpv1.LabelZone] = inst.Zone
		labels[karpv1.LabelCapacityType] = inst.CapacityType
	} else if len(spec.Candidates) > 0 {
		typ = spec.Candidates[0].InstanceType
	}
	if typ == "" {
		return nil
	}
	it := findType(s.InstanceTypes[spec.NodeClass], typ)
	if it == nil { // its class is gone or not ready: no capacity to count
		return nil
	}
	labels[karpv1.LabelInstanceType] = typ
	for k, v := range it.Labels {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	labels[karpv1.LabelHostname] = spec.NodeClaim
	var taints []corev1.Taint
	if nc := p.cache.NodeClaim(spec.NodeClaim); nc != nil {
		taints = nc.Spec.Taints
	} else if np := p.cache.NodePool(spec.NodePool); np != nil {
		taints = np.Spec.Template.Spec.Taints
	}
	return &scheduler.Node{Name: spec.NodeClaim, Labels: labels, Taints: taints, Capacity: it.Capacity,
		Allocatable: it.Allocatable(), InFlight: true}
}

func findType(types []*catalog.InstanceType, name string) *catalog.InstanceType {
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// loadClasses validates and resolves every EC2NodeClass, reporting invalid
// ones and keeping their status current, and lists their instance types.
func (p *Provisioner) loadClasses(ctx context.Context, s *Snapshot) error {
	for _, cached := range p.cache.NodeClasses() {
		if cached.DeletionTimestamp != nil {
			continue
		}
		nc := cached.DeepCopy()
		nc.SetDefaults()
		if err := nc.Validate(); err != nil {
			p.reportInvalidClass(ctx, cached, err)
			continue
		}
		r, err := p.cloud.Resolve(ctx, nc)
		p.updateClassStatus(ctx, cached, r, err)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.log.Warn("ec2nodeclass not ready", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
			continue
		}
		types, err := p.cloud.InstanceTypes(ctx, nc)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.log.Warn("listing instance types", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
			continue
		}
		s.NodeClasses[nc.Name] = nc
		s.Resolved[nc.Name] = r
		s.InstanceTypes[nc.Name] = types
		s.NodeClassHashes[nc.Name] = p.cloud.DriftHash(nc)
	}
	return nil
}

// loadPools validates every NodePool; invalid ones are reported and left
// out, valid ones are defaulted.
func (p *Provisioner) loadPools(ctx context.Context, s *Snapshot) {
	for _, cached := range p.cache.NodePools() {
		if cached.DeletionTimestamp != nil {
			continue
		}
		np := cached.DeepCopy()
		np.SetDefaults()
		err := np.Validate()
		p.reportPoolValidation(ctx, cached, err)
		if err != nil {
			continue
		}
		s.NodePoolHashes[np.Name] = NodePoolHash(np)
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil || s.NodeClasses[ref.Name] == nil {
			continue
		}
		s.NodePools = append(s.NodePools, np)
	}
}

// daemonSetPods turns each DaemonSet into the pod its template makes.
func daemonSetPods(c Cache) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range c.DaemonSets() {
		p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = d.Name, d.Namespace
		out = append(out, p)
	}
	return out
}

// instanceID is the instance ID at the end of an aws:///<zone>/<id>
// provider ID.
func instanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// disrupting reports whether a node is being taken away: deleting, its
// NodeClaim deleting, or tainted karpenter.sh/disrupted.
func disrupting(node *corev1.Node, nc *karpv1.NodeClaim) bool {
	if node.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil) {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == karpv1.TaintDisruptedKey {
			return true
		}
	}
	return false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// provisionable: a pending pod kube-scheduler could not place (Karpenter
// waits for PodScheduled=False/Unschedulable so it never races the
// scheduler onto existing capacity).
func provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) || len(p.Spec.SchedulingGates) > 0 || ownedByDaemonSet(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// reschedulable: a pod on a disrupted node that its controller will
// recreate elsewhere (not a DaemonSet or mirror pod, not finished).
func reschedulable(p *corev1.Pod) bool {
	if terminal(p) || p.DeletionTimestamp != nil || ownedByDaemonSet(p) {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// unbound is a shallow copy of a bound pod without its node, for planning.
func unbound(p *corev1.Pod) *corev1.Pod {
	if p.Spec.NodeName == "" {
		return p
	}
	c := *p
	c.Spec.NodeName = ""
	return &c
}
