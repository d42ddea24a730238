// Package view is the coordinator's one cluster view: the scheduler's and
// the disruption core's input, built from the informer cache, the raft
// state and the classes the nodeclass loop published. Building it does no
// I/O and reads no clock, so a pass can build it as often as it likes and a
// test can build it from fixtures.
package view

import (
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// DaemonSetPods: one pod per DaemonSet, named after it: its newest
	// pod (admission may have changed its requests) with the template's
	// required node affinity, else the pod its template makes.
	DaemonSetPods []*corev1.Pod
	// Nodes are the schedulable existing nodes and the in-flight NodeClaims
	// (InFlight: live launch intents without a Node, and launched NodeClaims
	// raft did not launch, Karpenter's, without a Node yet), each with the
	// pods bound or nominated there. Nodes and NodeClaims being disrupted
	// (NodeClaim deleting, karpenter.sh/disrupted taint, cordoned,
	// deleting) give no capacity and are left out. A managed node that is
	// not initialized yet is planned with its NodeClaim's capacity for the
	// resources it does not report yet (Karpenter's StateNode).
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
	// being disrupted made since it began to go away (holdingNominations),
	// to intents that still give capacity (not withdrawn: their NodeClaim
	// deleting, their node disrupted, their termination decided).
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
		}
		if t.State != fsm.TerminationCancelled {
			terminatingSince[t.InstanceID] = t.CreatedAt // pending or done
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
	newestDaemon := map[daemonKey]*corev1.Pod{}
	for _, pod := range pods {
		podByKey[Key(pod)] = pod
		if k, ok := daemonOwner(pod); ok && newer(pod, newestDaemon[k]) {
			newestDaemon[k] = pod
		}
		if !podutil.Terminal(pod) && hasVolumeNeeds(pod) {
			v.Volumes[Key(pod)] = podVolumes(pod, b.Cache)
		}
		if pod.Spec.NodeName != "" && !podutil.Terminal(pod) {
			v.PodsByNode[pod.Spec.NodeName] = append(v.PodsByNode[pod.Spec.NodeName], pod)
		}
	}

	v.DaemonSetPods = daemonSetPods(b.Cache.DaemonSets(), newestDaemon)

	// Existing nodes.
	registered := map[string]string{}     // intent ID -> node name
	disruptedAt := map[string]time.Time{} // disrupting node -> when it began to go away
	// Nodes whose termination is committed and nothing else shows it yet:
	// the first step of a disruption, whose replacements come next (see
	// the last loop).
	deciding := map[string]bool{}
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
		// A pending termination counts for the nodes raft launched and
		// for the adopted ones it records terminations of alike.
		if marked := disrupting(node, nc); marked || terminating[id] {
			v.Disrupting[node.Name] = true
			disruptedAt[node.Name] = disruptedSince(node, nc, terminatingSince[id])
			if !marked {
				deciding[node.Name] = true
			}
		}
	}
	nominated := holdingNominations(b.State.NominatedPods(), intents, podByKey, disruptedAt)
	withdrawn := b.withdrawnIntents(intents, registered, v.Disrupting, terminating)
	v.Nominations = make(map[string]string, len(nominated))
	for key, id := range nominated {
		if _, gone := withdrawn[id]; !gone {
			v.Nominations[key] = id
		}
	}
	// A plan holds in any bind order across all of its nodes, not on each
	// one: kube-scheduler may bind a pod planned for a node still booting
	// onto the first node that registers, and the pod planned there then
	// fits in the room left on the one still booting. So a pod whose node
	// filled up keeps its nomination while another intent of the same plan
	// (the same PlanCommit) is still in flight; it is planned again only
	// once all of them registered (or its nomination expires).
	inFlightPlans := map[time.Time]bool{}
	for id, in := range intents {
		_, ok := registered[id]
		if _, gone := withdrawn[id]; !ok && !gone {
			inFlightPlans[in.CreatedAt] = true
		}
	}
	stale := map[string]bool{} // pods whose nomination no longer holds
	for _, node := range v.AllNodes {
		if v.Disrupting[node.Name] || node.Spec.Unschedulable {
			continue
		}
		capacity, allocatable := nodeResources(node, v.NodeClaims[node.Name])
		sn := &scheduler.Node{Name: node.Name, Labels: node.Labels, Taints: schedulingTaints(node, v.NodeClaims[node.Name], v.managed(node.Name)),
			Capacity: capacity, Allocatable: attachAllocatable(allocatable, b.Cache.CSINode(node.Name)),
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
					// A disrupted node's pod keeps its room however long
					// its drain takes (its nomination is one made since).
					if pod := podByKey[key]; pod != nil && !podutil.Terminal(pod) && nominated[key] == in.ID &&
						(pod.Spec.NodeName == "" && holds || pod.Spec.NodeName != "" && v.Disrupting[pod.Spec.NodeName]) {
						waiting = append(waiting, unbound(pod))
					}
				}
				fit, gone := scheduler.FitNominated(allocatable, sn.Pods, waiting)
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
		if _, gone := withdrawn[id]; gone {
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
	v.Nodes = append(v.Nodes, b.adoptedInFlight(v, intents, instByID)...)

	// Pending pods: unschedulable ones not held by fresh nominations, then
	// the reschedulable pods of disrupted nodes.
	for _, pod := range pods {
		key := Key(pod)
		if !podutil.Provisionable(pod) {
			continue
		}
		if id, ok := nominated[key]; ok {
			why, gone := withdrawn[id]
			if !stale[key] && !gone && nominationHolds(intents[id], instByID, now, grace) {
				v.Nominated[key] = id
				continue
			}
			if _, said := v.Released[key]; !said {
				if !gone {
					why = "its nomination to launch " + id + " expired"
				}
				v.Released[key] = why
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
				_, live := intents[id]
				if why, gone := withdrawn[id]; live && !gone {
					v.Nominated[key] = id
					continue
				} else if gone && !deciding[node.Name] {
					v.Released[key] = why // (logged as planned again)
				}
			}
			if deciding[node.Name] {
				// Karpenter marks a candidate for deletion only once its
				// replacements are launched, so that the provisioner does
				// not launch for its pods too: Joiner's disruption
				// controller commits the termination, launches the
				// replacements, then taints. Until the taint (or a
				// deletion) the pods wait for those replacements; the node
				// gives no room meanwhile.
				continue
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

// daemonKey names a DaemonSet: namespace, name and UID (a pod's controller
// reference names all three).
type daemonKey struct {
	namespace, name string
	uid             types.UID
}

// daemonOwner is the DaemonSet controlling a pod, if one does.
func daemonOwner(p *corev1.Pod) (daemonKey, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "DaemonSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return daemonKey{}, false
	}
	return daemonKey{p.Namespace, ref.Name, ref.UID}, true
}

// newer reports whether pod a was created after b (nil b: yes); the same
// second goes to the later name, so the choice does not depend on the
// cache's order.
func newer(a, b *corev1.Pod) bool {
	if b == nil {
		return true
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// daemonSetPods is one pod per DaemonSet, named after it, for the overhead
// of a new node: the DaemonSet's newest pod (newest: by its controller,
// namespace/name/UID) when it has one, so requests a LimitRange or a
// mutating webhook set at admission count, else the pod its template
// makes (Karpenter's cluster state DaemonSet cache and getDaemonSetPods).
// A live pod is unbound and gets the template's required node affinity
// back: the DaemonSet controller replaced it by a match on its node's
// name.
func daemonSetPods(sets []*appsv1.DaemonSet, newest map[daemonKey]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range sets {
		var p *corev1.Pod
		if live := newest[daemonKey{d.Namespace, d.Name, d.UID}]; live != nil {
			p = live.DeepCopy()
			p.Spec.NodeName = ""
			var required *corev1.NodeSelector
			if a := d.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.DeepCopy()
			}
			switch {
			case p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil:
				p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = required
			case required != nil:
				if p.Spec.Affinity == nil {
					p.Spec.Affinity = &corev1.Affinity{}
				}
				p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}
			}
		} else {
			p = &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		}
		p.Name, p.Namespace = d.Name, d.Namespace
		out = append(out, p)
	}
	return out
}

// nodeResources are a node's capacity and allocatable as the scheduler
// plans with them. A node with a NodeClaim that is not initialized yet
// takes its NodeClaim's quantity of each resource it reports none of (an
// extended resource whose device plugin has not started, say), as
// Karpenter's StateNode.Capacity and Allocatable: otherwise the pods
// planned for it look as if they no longer fit and get a node of their
// own. The cached lists are not modified.
func nodeResources(node *corev1.Node, nc *karpv1.NodeClaim) (capacity, allocatable corev1.ResourceList) {
	capacity, allocatable = node.Status.Capacity, node.Status.Allocatable
	if nc == nil || node.Labels[karpv1.LabelInitialized] == "true" {
		return capacity, allocatable
	}
	return fillZero(capacity, nc.Status.Capacity), fillZero(allocatable, nc.Status.Allocatable)
}

// fillZero is have with want's quantity for each resource have has none
// of (a copy when anything is added).
func fillZero(have, want corev1.ResourceList) corev1.ResourceList {
	out, copied := have, false
	for name, q := range want {
		if cur, ok := have[name]; q.IsZero() || ok && !cur.IsZero() {
			continue
		}
		if !copied {
			out, copied = make(corev1.ResourceList, len(have)+1), true
			maps.Copy(out, have)
		}
		out[name] = q
	}
	return out
}

// withdrawnIntents are the live intents that no longer give capacity nor
// hold the pods nominated to them, with why: their NodeClaim is being
// deleted, their registered node is being disrupted, or their instance's
// termination is decided. Karpenter marks such a NodeClaim for deletion
// and schedules its pods elsewhere at once.
func (b *Builder) withdrawnIntents(intents map[string]fsm.LaunchIntent, registered map[string]string, disrupting map[string]bool,
	terminating map[string]bool) map[string]string {
	out := map[string]string{}
	for id, in := range intents {
		switch node, ok := registered[id]; {
		case ok && disrupting[node]:
			out[id] = "node " + node + " is being disrupted"
		case in.InstanceID != "" && terminating[in.InstanceID]:
			out[id] = "the termination of instance " + in.InstanceID + " is decided"
		default:
			if nc := b.Cache.NodeClaim(in.Spec.NodeClaim); nc != nil && nc.DeletionTimestamp != nil {
				out[id] = "nodeclaim " + nc.Name + " is being deleted"
			}
		}
	}
	return out
}

// adoptedInFlight are the launched NodeClaims raft did not launch
// (Karpenter's, adopted) whose Node has not registered yet: in-flight
// capacity from their status, labels and taints, as Karpenter's cluster
// state counts every NodeClaim. A NodeClaim a live intent names, whose
// instance raft knows, that is being deleted or not launched yet gives
// none here.
func (b *Builder) adoptedInFlight(v *View, intents map[string]fsm.LaunchIntent, insts map[string]fsm.Instance) []*scheduler.Node {
	skip := map[string]bool{}
	for _, in := range intents {
		skip[in.Spec.NodeClaim] = true
	}
	for _, nc := range v.NodeClaims {
		skip[nc.Name] = true
	}
	claims := slices.Clone(b.Cache.NodeClaims())
	slices.SortFunc(claims, func(a, b *karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	var out []*scheduler.Node
	for _, nc := range claims {
		if skip[nc.Name] || nc.DeletionTimestamp != nil || nc.Status.ProviderID == "" || !awsv1.ManagesNodeClaim(nc) {
			continue
		}
		if _, known := insts[cloud.InstanceID(nc.Status.ProviderID)]; known {
			continue
		}
		labels := maps.Clone(nc.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		if _, ok := labels[karpv1.LabelHostname]; !ok {
			labels[karpv1.LabelHostname] = nc.Name
		}
		out = append(out, &scheduler.Node{Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Capacity: nc.Status.Capacity,
			Allocatable: nc.Status.Allocatable, InFlight: true})
	}
	return out
}

// schedulingTaints are the taints the scheduler plans with (Karpenter's
// StateNode.Taints): a node with a NodeClaim that is not registered yet (no
// karpenter.sh/registered label) has its NodeClaim's taints, which
// registration puts on it; a node Joiner manages that is not initialized
// yet (no karpenter.sh/initialized label) loses its ephemeral taints and
// its NodeClaim's startup taints, which are about to go. Otherwise a node
// that has just registered looks unusable, and the pods kube-scheduler is
// about to bind there get a node of their own.
func schedulingTaints(node *corev1.Node, nc *karpv1.NodeClaim, managed bool) []corev1.Taint {
	taints := node.Spec.Taints
	if nc != nil && node.Labels[karpv1.LabelRegistered] != "true" {
		taints = nc.Spec.Taints
	}
	if !managed || node.Labels[karpv1.LabelInitialized] == "true" || len(taints) == 0 {
		return taints
	}
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
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
// pods on a node being disrupted made since it began to go away (at) while
// they still need room elsewhere (an evicted pod that terminates is
// replaced by a new pod, which is pending itself: holding room for both
// would launch a node for the new one). A
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
		case pod == nil || !podutil.Active(pod): // gone, done or going: nothing to hold
			continue
		case pod.Spec.NodeName == "":
			out[key] = id
			continue
		}
		since, disrupted := at[pod.Spec.NodeName]
		if disrupted && since.IsZero() {
			// Nothing says when the node began to go away (a
			// karpenter.sh/disrupted taint alone): a nomination made
			// before the pod was bound is used up all the same.
			// (PodScheduled has second precision: a second's slack.)
			if bound := scheduledAt(pod); !bound.IsZero() {
				since = bound.Add(time.Second)
			}
		}
		if in, ok := intents[id]; disrupted && ok && !since.IsZero() && !in.CreatedAt.Before(since) && podutil.Reschedulable(pod) {
			out[key] = id
		}
	}
	return out
}

// disruptedSince is when a disrupted node began to go away: the earliest
// of when its termination was decided (pending or done; the coordinator's
// clock, as intents') and when it or its NodeClaim was deleted (a user's
// deletion comes before the termination the coordinator then commits);
// zero when nothing says (a karpenter.sh/disrupted taint alone).
func disruptedSince(node *corev1.Node, nc *karpv1.NodeClaim, terminating time.Time) time.Time {
	since := terminating
	earlier := func(t *metav1.Time) {
		if t != nil && (since.IsZero() || t.Time.Before(since)) {
			since = t.Time
		}
	}
	if nc != nil {
		earlier(nc.DeletionTimestamp)
	}
	earlier(node.DeletionTimestamp)
	return since
}

// scheduledAt is when the pod was bound (its PodScheduled condition's
// transition; zero when it has none).
func scheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
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
