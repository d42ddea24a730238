// Package view is the coordinator's one cluster view: the scheduler's and
// the disruption core's input, built from the informer cache, the raft
// state and the classes the nodeclass loop published. Building it does no
// I/O and reads no clock, so a pass can build it as often as it likes and a
// test can build it from fixtures.
package view

import (
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Cache is the informer cache the view reads (kube.Cache).
type Cache interface {
	Pods() []*corev1.Pod
	Nodes() []*corev1.Node
	NodePools() []*karpv1.NodePool
	NodePool(name string) *karpv1.NodePool
	NodeClaims() []*karpv1.NodeClaim
	NodeClaim(name string) *karpv1.NodeClaim
	DaemonSets() []*appsv1.DaemonSet
	PDBs() []*policyv1.PodDisruptionBudget
	Storage
}

// State is the raft state the view reads (fsm.FSM).
type State interface {
	Intents() []fsm.LaunchIntent
	Instances() []fsm.Instance
	Terminations() []fsm.TerminationIntent
	NominatedPods() map[string]string
}

// Classes are the resolved EC2NodeClasses (*Catalog).
type Classes interface {
	Classes() map[string]*Class
}

// Builder builds views from its sources.
type Builder struct {
	Cache   Cache
	State   State
	Classes Classes
	// Fleet is the cloud's last instance listing (optional).
	Fleet *Fleet
	// MinValuesPolicy is the scheduler's minValues policy (Strict when
	// empty).
	MinValuesPolicy scheduler.MinValuesPolicy
	// NominationGrace is how long a pod nominated to a ready instance waits
	// for kube-scheduler before it is planned again (default 1 min).
	NominationGrace time.Duration
}

// View is the cluster as the scheduler and the disruption core see it at
// one instant: valid pools and classes, instance types, DaemonSet overhead,
// existing nodes and in-flight NodeClaims with their pods, and the pods
// that need capacity. Objects are shared with the informer cache and the
// catalog: read-only.
type View struct {
	Now time.Time
	// NodePools are the valid, defaulted pools whose class is ready.
	NodePools []*karpv1.NodePool
	// NodeClasses by name (valid and resolved).
	NodeClasses map[string]*awsv1.EC2NodeClass
	// Resolved selector terms by class name.
	Resolved map[string]cloud.Resolved
	// InstanceTypes by class name.
	InstanceTypes map[string][]*catalog.InstanceType
	// DaemonSetPods: one pod per DaemonSet (its template).
	DaemonSetPods []*corev1.Pod
	// Nodes are the schedulable existing nodes and the in-flight NodeClaims
	// (InFlight), each with the pods bound or nominated there. Nodes being
	// disrupted (NodeClaim deleting, karpenter.sh/disrupted taint,
	// cordoned, deleting) give no capacity and are left out.
	Nodes []*scheduler.Node
	// AllNodes are every Node object, disrupted ones included
	// (disruption's view).
	AllNodes []*corev1.Node
	// PodsByNode are the bound pods of every node.
	PodsByNode map[string][]*corev1.Pod
	// NodeClaims by node name (registered claims only).
	NodeClaims map[string]*karpv1.NodeClaim
	// Instances by node name (from raft).
	Instances map[string]fsm.Instance
	// Listed are the nodes' instances as the cloud last listed them, by
	// node name (absent: not listed yet).
	Listed map[string]cloud.Instance
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
	// Nominations are raft's nominations (pod key -> live intent ID) that
	// still say where a pod goes: of unbound pods, and of pods on a node
	// being disrupted made since it began to go away (holdingNominations).
	// Nominated is the part of them that holds capacity for a pod now.
	Nominations map[string]string
	// PendingByKey indexes Pending by pod key.
	PendingByKey map[string]*corev1.Pod
	// Released are the pending pods whose nomination no longer holds, by
	// pod key, with the reason (they are in Pending).
	Released map[string]string
	// Volumes are the volume needs of the pods that have any (pending and
	// bound), by pod key.
	Volumes map[string]scheduler.PodVolumes
	// Namespaces are namespace labels by name.
	Namespaces map[string]map[string]string
	// MinValuesPolicy is the Builder's.
	MinValuesPolicy scheduler.MinValuesPolicy
}

// SchedulerInput is the scheduler's input for placing pods on nodes (the
// view's own Nodes, or the caller's what-if set) with the view's pools,
// classes, instance types, DaemonSets, volumes, namespaces and policy.
func (v *View) SchedulerInput(pods []*corev1.Pod, nodes []*scheduler.Node) *scheduler.Input {
	return &scheduler.Input{Pods: pods, NodePools: v.NodePools, NodeClasses: v.NodeClasses,
		InstanceTypes: v.InstanceTypes, Nodes: nodes, DaemonSetPods: v.DaemonSetPods,
		Volumes: v.Volumes, Namespaces: v.Namespaces, MinValuesPolicy: v.MinValuesPolicy}
}

// NodePool returns the valid pool of that name, nil when none.
func (v *View) NodePool(name string) *karpv1.NodePool {
	for _, np := range v.NodePools {
		if np.Name == name {
			return np
		}
	}
	return nil
}

// Build builds the view at now.
func (b *Builder) Build(now time.Time) *View {
	grace := b.NominationGrace
	defaults.Positive(&grace, time.Minute)
	v := &View{
		Now: now, NodeClasses: map[string]*awsv1.EC2NodeClass{}, Resolved: map[string]cloud.Resolved{},
		InstanceTypes: map[string][]*catalog.InstanceType{}, PodsByNode: map[string][]*corev1.Pod{},
		NodeClaims: map[string]*karpv1.NodeClaim{}, Instances: map[string]fsm.Instance{}, Listed: map[string]cloud.Instance{}, Disrupting: map[string]bool{},
		NodePoolHashes: map[string]string{}, NodeClassHashes: map[string]string{}, Nominated: map[string]string{},
		Released: map[string]string{}, PDBs: b.Cache.PDBs(), Volumes: map[string]scheduler.PodVolumes{},
		Namespaces: map[string]map[string]string{}, MinValuesPolicy: b.MinValuesPolicy,
	}
	for _, ns := range b.Cache.Namespaces() {
		v.Namespaces[ns.Name] = ns.Labels
	}
	for name, c := range b.Classes.Classes() {
		v.NodeClasses[name] = c.NodeClass
		v.Resolved[name] = c.Resolved
		v.InstanceTypes[name] = c.InstanceTypes
		v.NodeClassHashes[name] = c.Hash
	}
	b.loadPools(v)
	v.DaemonSetPods = daemonSetPods(b.Cache.DaemonSets())

	// Raft state: intents, instances by ID, terminations.
	intents := map[string]fsm.LaunchIntent{}
	for _, in := range b.State.Intents() {
		if in.State.Live() {
			intents[in.ID] = in
		}
	}
	instByID := map[string]fsm.Instance{}
	for _, inst := range b.State.Instances() {
		instByID[inst.ID] = inst
	}
	terminating := map[string]bool{}
	terminatingSince := map[string]time.Time{} // by instance ID
	for _, t := range b.State.Terminations() {
		if t.State == fsm.TerminationPending {
			terminating[t.InstanceID] = true
			terminatingSince[t.InstanceID] = t.CreatedAt
		}
	}

	// Claims by provider ID.
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range b.Cache.NodeClaims() {
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}

	pods := b.Cache.Pods()
	podByKey := make(map[string]*corev1.Pod, len(pods))
	for _, pod := range pods {
		podByKey[Key(pod)] = pod
		if !podutil.Terminal(pod) && hasVolumeNeeds(pod) {
			v.Volumes[Key(pod)] = podVolumes(pod, b.Cache)
		}
		if pod.Spec.NodeName != "" && !podutil.Terminal(pod) {
			v.PodsByNode[pod.Spec.NodeName] = append(v.PodsByNode[pod.Spec.NodeName], pod)
		}
	}

	// Existing nodes.
	registered := map[string]string{}     // intent ID -> node name
	disruptedAt := map[string]time.Time{} // disrupting node -> when it began to go away
	for _, node := range b.Cache.Nodes() {
		v.AllNodes = append(v.AllNodes, node)
		nc := claimByProvider[node.Spec.ProviderID]
		if nc != nil {
			v.NodeClaims[node.Name] = nc
		}
		id := cloud.InstanceID(node.Spec.ProviderID)
		if listed, ok := b.Fleet.Instance(id); ok {
			v.Listed[node.Name] = listed
		}
		inst, haveInst := instByID[id]
		if haveInst {
			v.Instances[node.Name] = inst
			if _, ok := intents[inst.IntentID]; ok {
				registered[inst.IntentID] = node.Name
			}
		}
		if disrupting(node, nc) || (haveInst && terminating[id]) {
			v.Disrupting[node.Name] = true
			disruptedAt[node.Name] = disruptedSince(node, nc, terminatingSince[id])
		}
	}
	nominated := holdingNominations(b.State.NominatedPods(), intents, podByKey, disruptedAt)
	v.Nominations = nominated
	// A plan holds in any bind order across all of its nodes, not on each
	// one: kube-scheduler may bind a pod planned for a node still booting
	// onto the first node that registers, and the pod planned there then
	// fits in the room left on the one still booting. So a pod whose node
	// filled up keeps its nomination while another intent of the same plan
	// (the same PlanCommit) is still in flight; it is planned again only
	// once all of them registered (or its nomination expires).
	inFlightPlans := map[time.Time]bool{}
	for id, in := range intents {
		if _, ok := registered[id]; !ok && !(in.InstanceID != "" && terminating[in.InstanceID]) {
			inFlightPlans[in.CreatedAt] = true
		}
	}
	stale := map[string]bool{} // pods whose nomination no longer holds
	for _, node := range v.AllNodes {
		if v.Disrupting[node.Name] || node.Spec.Unschedulable {
			continue
		}
		sn := &scheduler.Node{Name: node.Name, Labels: node.Labels, Taints: schedulingTaints(node, v.NodeClaims[node.Name], v.managed(node.Name)),
			Capacity: node.Status.Capacity, Allocatable: attachAllocatable(node.Status.Allocatable, b.Cache.CSINode(node.Name)),
			Pods: v.PodsByNode[node.Name]}
		if inst, ok := v.Instances[node.Name]; ok {
			if in, ok := intents[inst.IntentID]; ok {
				// Pods nominated there but not bound yet keep their room
				// while they fit beside what kube-scheduler bound there
				// and their nomination holds; the others are planned
				// again, and only as pending pods: a pod planned again must
				// not also stand on this node, where it would satisfy its
				// own pod affinity (kube-scheduler counts bound pods only).
				var waiting []*corev1.Pod
				holds := nominationHolds(in, instByID, now, grace)
				for _, key := range in.Pods {
					if pod := podByKey[key]; holds && pod != nil && !podutil.Terminal(pod) && nominated[key] == in.ID &&
						(pod.Spec.NodeName == "" || v.Disrupting[pod.Spec.NodeName]) {
						waiting = append(waiting, unbound(pod))
					}
				}
				fit, gone := scheduler.FitNominated(node.Status.Allocatable, sn.Pods, waiting)
				sn.Pods = append(slices.Clip(sn.Pods), fit...)
				for _, pod := range gone {
					if inFlightPlans[in.CreatedAt] {
						continue
					}
					stale[Key(pod)] = true
					v.Released[Key(pod)] = "node " + node.Name + " has no room left"
				}
			}
		}
		v.Nodes = append(v.Nodes, sn)
	}

	// In-flight capacity: live intents without a registered node.
	for _, id := range slices.Sorted(maps.Keys(intents)) {
		in := intents[id]
		if _, ok := registered[id]; ok {
			continue
		}
		if in.InstanceID != "" && terminating[in.InstanceID] {
			continue
		}
		sn := b.inFlightNode(v, in, instByID)
		if sn == nil {
			continue
		}
		for _, key := range in.Pods {
			if pod := podByKey[key]; pod != nil && !podutil.Terminal(pod) && nominated[key] == in.ID && (pod.Spec.NodeName == "" || v.Disrupting[pod.Spec.NodeName]) {
				sn.Pods = append(sn.Pods, unbound(pod))
			}
		}
		v.Nodes = append(v.Nodes, sn)
	}

	// Pending pods: unschedulable ones not held by fresh nominations, then
	// the reschedulable pods of disrupted nodes.
	for _, pod := range pods {
		key := Key(pod)
		if !podutil.Provisionable(pod) {
			continue
		}
		if id, ok := nominated[key]; ok {
			if !stale[key] && nominationHolds(intents[id], instByID, now, grace) {
				v.Nominated[key] = id
				continue
			}
			if _, said := v.Released[key]; !said {
				v.Released[key] = "its nomination to launch " + id + " expired"
			}
		}
		v.Pending = append(v.Pending, pod)
	}
	// A budget whose selector does not parse is left out here (the
	// disruption controller reports it); the others count.
	pdbs, _ := podutil.NewPDBs(v.PDBs)
	for _, node := range v.AllNodes {
		if !v.Disrupting[node.Name] {
			continue
		}
		for _, pod := range v.PodsByNode[node.Name] {
			key := Key(pod)
			if !Reschedulable(pod, now, pdbs) {
				continue
			}
			if id, ok := nominated[key]; ok && !stale[key] {
				if _, live := intents[id]; live {
					v.Nominated[key] = id
					continue
				}
			}
			v.Pending = append(v.Pending, unbound(pod))
		}
	}
	v.PendingByKey = make(map[string]*corev1.Pod, len(v.Pending))
	for _, pod := range v.Pending {
		v.PendingByKey[Key(pod)] = pod
	}
	return v
}

// loadPools keeps the valid pools whose class is ready, defaulted. The
// nodeclass loop reports invalid ones.
func (b *Builder) loadPools(v *View) {
	for _, cached := range b.Cache.NodePools() {
		if cached.DeletionTimestamp != nil {
			continue
		}
		np := cached.DeepCopy()
		np.SetDefaults()
		if np.Validate() != nil {
			continue
		}
		v.NodePoolHashes[np.Name] = np.Hash()
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil || v.NodeClasses[ref.Name] == nil {
			continue
		}
		v.NodePools = append(v.NodePools, np)
	}
}

// nominationHolds reports whether a pending pod nominated to intent in
// should wait for it rather than be planned again: while the launch is in
// flight, and for grace after its instance became ready (kube-scheduler
// binds it then).
func nominationHolds(in fsm.LaunchIntent, insts map[string]fsm.Instance, now time.Time, grace time.Duration) bool {
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
			return now.Sub(inst.UpdatedAt) < grace
		}
	}
	return false
}

// inFlightNode models a live intent that has no Node yet: its labels, the
// taints of its pool and the allocatable of its launched (or cheapest
// candidate) instance type.
func (b *Builder) inFlightNode(v *View, in fsm.LaunchIntent, insts map[string]fsm.Instance) *scheduler.Node {
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
	it := FindType(v.InstanceTypes[spec.NodeClass], typ)
	if it == nil { // its class is gone or not ready: no capacity to count
		return nil
	}
	labels[karpv1.LabelInstanceType] = typ
	for k, val := range it.Labels {
		if _, ok := labels[k]; !ok {
			labels[k] = val
		}
	}
	labels[karpv1.LabelHostname] = spec.NodeClaim
	var taints []corev1.Taint
	if nc := b.Cache.NodeClaim(spec.NodeClaim); nc != nil {
		taints = nc.Spec.Taints
	} else if np := b.Cache.NodePool(spec.NodePool); np != nil {
		taints = np.Spec.Template.Spec.Taints
	}
	return &scheduler.Node{Name: spec.NodeClaim, Labels: labels, Taints: taints, Capacity: it.Capacity,
		Allocatable: it.Allocatable(), InFlight: true}
}

// FindType returns the instance type of that name, nil when absent.
func FindType(types []*catalog.InstanceType, name string) *catalog.InstanceType {
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// OfferingPrice is the hourly price of the offering a node's labels name
// (instance type, zone and capacity type) among types; false when types
// have no such offering.
func OfferingPrice(types []*catalog.InstanceType, labels map[string]string) (float64, bool) {
	it := FindType(types, labels[karpv1.LabelInstanceType])
	if it == nil {
		return 0, false
	}
	for _, o := range it.Offerings {
		if o.Zone == labels[karpv1.LabelZone] && o.CapacityType == labels[karpv1.LabelCapacityType] {
			return o.Price, true
		}
	}
	return 0, false
}

// daemonSetPods turns each DaemonSet into the pod its template makes.
func daemonSetPods(sets []*appsv1.DaemonSet) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range sets {
		p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = d.Name, d.Namespace
		out = append(out, p)
	}
	return out
}

// schedulingTaints are the taints the scheduler plans with: a node Joiner
// manages that is not initialized yet (no karpenter.sh/initialized label)
// loses its ephemeral taints and its NodeClaim's startup taints, which are
// about to go (Karpenter's StateNode.Taints). Otherwise a node that has just
// registered looks unusable, and the pods kube-scheduler is about to bind
// there get a node of their own.
func schedulingTaints(node *corev1.Node, nc *karpv1.NodeClaim, managed bool) []corev1.Taint {
	if !managed || node.Labels[karpv1.LabelInitialized] == "true" || len(node.Spec.Taints) == 0 {
		return node.Spec.Taints
	}
	return slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		if karpv1.IsKnownEphemeralTaint(t) {
			return true
		}
		return nc != nil && slices.ContainsFunc(nc.Spec.StartupTaints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })
	})
}

// managed reports whether a node has a NodeClaim or a launch of Joiner's.
func (v *View) managed(node string) bool {
	_, claim := v.NodeClaims[node]
	_, inst := v.Instances[node]
	return claim || inst
}

// holdingNominations keeps the nominations (pod key -> live intent ID)
// that still say where a pod goes: those of unbound pods, and those of
// pods on a node being disrupted made since it began to go away (at). A
// pod bound anywhere else has used its nomination up: kube-scheduler may
// bind a pod planned for one new node onto another, and the old
// nomination must then neither reserve room on the node it named nor hold
// the pod when its own node is disrupted later.
func holdingNominations(raw map[string]string, intents map[string]fsm.LaunchIntent, pods map[string]*corev1.Pod,
	at map[string]time.Time) map[string]string {
	out := make(map[string]string, len(raw))
	for key, id := range raw {
		pod := pods[key]
		switch {
		case pod == nil: // gone: nothing to hold
			continue
		case pod.Spec.NodeName == "":
			out[key] = id
			continue
		}
		since, disrupted := at[pod.Spec.NodeName]
		if in, ok := intents[id]; disrupted && ok && !in.CreatedAt.Before(since) {
			out[key] = id
		}
	}
	return out
}

// disruptedSince is when a disrupted node began to go away: when its
// termination was decided (the coordinator's clock, as intents'), else
// when it or its NodeClaim was deleted; zero when nothing says (a
// karpenter.sh/disrupted taint alone).
func disruptedSince(node *corev1.Node, nc *karpv1.NodeClaim, terminating time.Time) time.Time {
	switch {
	case !terminating.IsZero():
		return terminating
	case nc != nil && nc.DeletionTimestamp != nil:
		return nc.DeletionTimestamp.Time
	case node.DeletionTimestamp != nil:
		return node.DeletionTimestamp.Time
	}
	return time.Time{}
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

// unbound is a shallow copy of a bound pod without its node, for planning.
func unbound(p *corev1.Pod) *corev1.Pod {
	if p.Spec.NodeName == "" {
		return p
	}
	c := *p
	c.Spec.NodeName = ""
	return &c
}
