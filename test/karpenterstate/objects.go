// Package karpenterstate makes, for tests, a cluster as Karpenter v1.14
// leaves it: EC2NodeClasses and NodePools with Karpenter's hash annotations
// and status, and NodeClaims and Nodes exactly as Karpenter's provisioner,
// lifecycle, tagging and disruption controllers write them, with their
// instances launched through EC2 (the simulated region's) the way
// Karpenter's AWS provider launches them (a launch template per launch,
// CreateFleet, Karpenter's tags and user data). Joiner is then started on
// that cluster to show that it adopts it without churn.
//
// The shapes follow Karpenter's sources (kubernetes-sigs/karpenter
// v1.14.1 pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go,
// pkg/controllers/nodeclaim/lifecycle, aws/karpenter-provider-aws v1.14.1
// pkg/cloudprovider/cloudprovider.go instanceToNodeClaim,
// pkg/providers/instance, pkg/providers/launchtemplate,
// pkg/controllers/nodeclaim/tagging); the drift hashes are computed by
// Joiner's api packages, whose numbers equal Karpenter's (their tests check
// them against Karpenter's own). Test code only.
//
// The builders in this file are pure (objects.go): tests that need no
// instances (joiner migrate check) use them directly; Seed (seed.go) drives
// them against a real API server and the simulated EC2 API.
package karpenterstate

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Annotations and tags of Karpenter's AWS provider that Joiner's api
// package does not spell (Joiner does not write them).
const (
	// AnnotationInstanceTagged and AnnotationClusterNameTagged mark a
	// NodeClaim whose instance the tagging controller tagged.
	AnnotationInstanceTagged    = "karpenter.k8s.aws/tagged"
	AnnotationClusterNameTagged = "karpenter.k8s.aws/cluster-name-tagged"
	// LaunchTemplateNamePrefix starts the name of Karpenter's launch
	// templates.
	LaunchTemplateNamePrefix = "karpenter.k8s.aws/"
	// ConditionConsistentStateFound is set by Karpenter's consistency
	// controller on every NodeClaim it checked.
	ConditionConsistentStateFound = "ConsistentStateFound"
	// ConditionNodeRegistrationHealthy is a NodePool condition Karpenter
	// sets once one of its nodes registered.
	ConditionNodeRegistrationHealthy = "NodeRegistrationHealthy"
	// ConditionNodeClassReady is a NodePool condition.
	ConditionNodeClassReady = "NodeClassReady"
)

// CABundle is the cluster CA bundle Karpenter hashes into the
// EC2NodeClass hash and gives nodes (operator.GetCABundle): the rest
// config's CA data, else its CA file, base64 encoded. The coordinators
// derive theirs from their kubeconfig the same way.
func CABundle(rc *rest.Config) (string, error) {
	b := rc.CAData
	if len(b) == 0 && rc.CAFile != "" {
		var err error
		if b, err = os.ReadFile(rc.CAFile); err != nil {
			return "", fmt.Errorf("reading the cluster CA: %w", err)
		}
	}
	if len(b) == 0 {
		return "", fmt.Errorf("the rest config has no CA")
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// InstanceProfileName is the name Karpenter gives the instance profile it
// creates for an EC2NodeClass with spec.role: <cluster>_<number>.
func InstanceProfileName(cluster, region, class string) string {
	h := fnv.New64a()
	h.Write([]byte(region + class))
	return fmt.Sprintf("%s_%d", cluster, h.Sum64())
}

// ImageRequirements are the requirements Karpenter records for an AMI
// (status.amis[].requirements): its architecture and, for an image an
// alias found through the "standard" SSM parameter, no GPU and no
// accelerator. Sorted by key.
func ImageRequirements(arch string, standard bool) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
	if standard {
		out = append(out,
			corev1.NodeSelectorRequirement{Key: karpv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			corev1.NodeSelectorRequirement{Key: karpv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ClassStatus is an EC2NodeClass's status as Karpenter's nodeclass
// controller writes it once everything resolved: subnets, security groups,
// AMIs, instance profile, and the conditions AMIsReady, SubnetsReady,
// SecurityGroupsReady, InstanceProfileReady, PlacementGroupReady,
// ValidationSucceeded and Ready, all True at the class's generation.
func ClassStatus(nc *awsv1.EC2NodeClass, subnets []awsv1.Subnet, groups []awsv1.SecurityGroup, amis []awsv1.AMI,
	instanceProfile string, now time.Time) awsv1.EC2NodeClassStatus {
	st := awsv1.EC2NodeClassStatus{Subnets: subnets, SecurityGroups: groups, AMIs: amis, InstanceProfile: instanceProfile}
	t := metav1.NewTime(now)
	for _, typ := range []string{awsv1.ConditionAMIsReady, awsv1.ConditionInstanceProfileReady, "PlacementGroupReady", awsv1.ConditionReady,
		awsv1.ConditionSecurityGroupsReady, awsv1.ConditionSubnetsReady, awsv1.ConditionValidationSucceeded} {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ,
			ObservedGeneration: nc.Generation, LastTransitionTime: t})
	}
	return st
}

// ClassAnnotations are the hash annotations Karpenter's nodeclass hash
// controller writes on an EC2NodeClass (the hash of the object as stored).
func ClassAnnotations(nc *awsv1.EC2NodeClass, caBundle string) map[string]string {
	return map[string]string{karpv1.AnnotationEC2NodeClassHash: nc.Hash(caBundle),
		karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
}

// PoolAnnotations are the hash annotations Karpenter's nodepool hash
// controller writes on a NodePool.
func PoolAnnotations(np *karpv1.NodePool) map[string]string {
	return map[string]string{karpv1.AnnotationNodePoolHash: np.Hash(), karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}
}

// Claim is one NodeClaim to seed: its pool and the offering Karpenter
// launched it on.
type Claim struct {
	NodePool     string
	InstanceType string
	Zone         string
	// CapacityType is on-demand or spot.
	CapacityType string
	// Requests are the resource requests of the pods it was made for
	// (spec.resources.requests); nil: none recorded.
	Requests corev1.ResourceList
}

// NewNodeClaim is the NodeClaim Karpenter's provisioner creates for c
// (NodeClaimTemplate.ToNodeClaim): generateName <pool>-, the template's
// labels plus karpenter.sh/nodepool, karpenter.k8s.aws/ec2nodeclass and the
// single-valued custom requirement labels, the template's annotations plus
// the nodepool hash, an owner reference to the pool, the template's spec
// with the requirements narrowed to the launched instance type and
// capacity type, and the termination finalizer (the lifecycle controller
// adds it before launching).
func NewNodeClaim(np *karpv1.NodePool, c Claim) *karpv1.NodeClaim {
	t := np.Spec.Template
	ref := t.Spec.NodeClassRef
	labels := maps.Clone(t.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[karpv1.LabelNodePool] = np.Name
	labels[karpv1.LabelNodeClass] = ref.Name
	var reqs []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range t.Spec.Requirements {
		if !karpv1.WellKnownLabels[r.Key] && r.Operator == karpv1.OpIn && len(r.Values) > 0 {
			labels[r.Key] = r.Values[0]
		}
		if r.Key == karpv1.LabelInstanceType || r.Key == karpv1.LabelCapacityType {
			continue // narrowed below
		}
		reqs = append(reqs, *r.DeepCopy())
	}
	// The template's labels are requirements too (scheduling.NewLabelRequirements).
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if slices.ContainsFunc(reqs, func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.Key == k }) {
			continue
		}
		reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: k, Operator: karpv1.OpIn, Values: []string{labels[k]}})
	}
	reqs = append(reqs,
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{c.InstanceType}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{c.CapacityType}})
	annotations := maps.Clone(t.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, PoolAnnotations(np))
	yes := true
	nc := &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: np.Name + "-", Labels: labels, Annotations: annotations,
			Finalizers: []string{karpv1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool",
				Name: np.Name, UID: np.UID, BlockOwnerDeletion: &yes}}},
		Spec: karpv1.NodeClaimSpec{
			Taints: slices.Clone(t.Spec.Taints), StartupTaints: slices.Clone(t.Spec.StartupTaints),
			Requirements: reqs, NodeClassRef: ref.DeepCopy(),
			ExpireAfter: t.Spec.ExpireAfter, TerminationGracePeriod: t.Spec.TerminationGracePeriod,
		},
	}
	if c.Requests != nil {
		nc.Spec.Resources.Requests = c.Requests.DeepCopy()
	}
	return nc
}

// Instance is what EC2 says about a launched instance.
type Instance struct {
	ID, Zone, ImageID, CapacityType string
	LaunchTime                      time.Time
}

// ProviderID is the instance's providerID, aws:///<zone>/<id>.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

// FindType returns the instance type of the catalogue for class (its
// capacity and allocatable depend on the class's AMI family and kubelet
// block), nil when unknown.
func FindType(class *awsv1.EC2NodeClass, region, name string) *catalog.InstanceType {
	for _, it := range catalog.InstanceTypes(catalog.Options{Region: region, NodeClass: class}) {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// ApplyLaunch writes a launch onto the NodeClaim as Karpenter's launch
// controller does (PopulateNodeClaimDetails over cloudprovider.Create):
// the instance type's single-valued labels, the zone, zone ID (from the
// class's subnets), capacity type and tenancy labels under the claim's own
// labels; the ec2nodeclass hash and instance profile annotations;
// providerID, imageID, capacity and allocatable; Launched=True, Registered,
// Initialized and Ready Unknown.
func ApplyLaunch(nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass, it *catalog.InstanceType, in Instance, caBundle string, now time.Time) {
	labels := map[string]string{}
	maps.Copy(labels, it.Labels)
	labels[karpv1.LabelZone] = in.Zone
	for _, s := range class.Status.Subnets {
		if s.Zone == in.Zone && s.ZoneID != "" {
			labels[karpv1.LabelTopologyZoneID] = s.ZoneID
		}
	}
	labels[karpv1.LabelCapacityType] = in.CapacityType
	labels[karpv1.LabelInstanceTenancy] = karpv1.TenancyDefault
	maps.Copy(labels, nc.Labels) // the claim's own labels win
	nc.Labels = labels
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	maps.Copy(nc.Annotations, ClassAnnotations(class, caBundle))
	nc.Annotations[karpv1.AnnotationInstanceProfile] = class.Status.InstanceProfile
	nc.Status.ProviderID = in.ProviderID()
	nc.Status.ImageID = in.ImageID
	nc.Status.Capacity = nonZero(it.Capacity)
	nc.Status.Allocatable = nonZero(it.Allocatable())
	setCondition(nc, karpv1.ConditionLaunched, metav1.ConditionTrue, karpv1.ConditionLaunched, "", now)
	for _, typ := range []string{karpv1.ConditionRegistered, karpv1.ConditionInitialized} {
		if meta.FindStatusCondition(nc.Status.Conditions, typ) == nil {
			setCondition(nc, typ, metav1.ConditionUnknown, "AwaitingReconciliation", "object is awaiting reconciliation", nc.CreationTimestamp.Time)
		}
	}
	setReady(nc, now)
}

// nonZero drops zero quantities, as Karpenter's resource filter does.
func nonZero(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range l {
		if !v.IsZero() {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// RegisterNode is what Karpenter's registration does to the Node on a
// copy: the termination finalizer, an owner reference to the claim, the
// claim's taints unless the Node is labelled do-not-sync-taints=true (as
// Karpenter's user data labels it), the claim's annotations and labels,
// no karpenter.sh/unregistered taint, karpenter.sh/registered=true.
func RegisterNode(nc *karpv1.NodeClaim, node *corev1.Node) {
	if !slices.Contains(node.Finalizers, karpv1.TerminationFinalizer) {
		node.Finalizers = append(node.Finalizers, karpv1.TerminationFinalizer)
	}
	yes := true
	if !slices.ContainsFunc(node.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nc.UID }) {
		node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{APIVersion: karpv1.SchemeGroupVersion.String(),
			Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: &yes})
	}
	if node.Labels[karpv1.LabelDoNotSync] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
				node.Spec.Taints = append(node.Spec.Taints, t)
			}
		}
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	maps.Copy(node.Annotations, nc.Annotations)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	maps.Copy(node.Labels, nc.Labels)
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == karpv1.TaintUnregisteredKey && t.Effect == corev1.TaintEffectNoExecute
	})
	node.Labels[karpv1.LabelRegistered] = "true"
}

// ApplyRegistered is the claim's side of registration: Registered=True
// and status.nodeName.
func ApplyRegistered(nc *karpv1.NodeClaim, node string, now time.Time) {
	nc.Status.NodeName = node
	setCondition(nc, karpv1.ConditionRegistered, metav1.ConditionTrue, karpv1.ConditionRegistered, "", now)
	setReady(nc, now)
}

// InitializeNode labels the Node karpenter.sh/initialized=true (on a
// copy), as Karpenter's initialization does once the Node is Ready without
// startup or ephemeral taints.
func InitializeNode(node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[karpv1.LabelInitialized] = "true"
}

// ApplyInitialized is the claim's side of initialization: Initialized=True
// (so Ready=True), and ConsistentStateFound=True from the consistency
// controller.
func ApplyInitialized(nc *karpv1.NodeClaim, now time.Time) {
	setCondition(nc, karpv1.ConditionInitialized, metav1.ConditionTrue, karpv1.ConditionInitialized, "", now)
	setCondition(nc, ConditionConsistentStateFound, metav1.ConditionTrue, ConditionConsistentStateFound, "", now)
	setReady(nc, now)
}

// ApplyTagged is what the tagging controller writes once it tagged the
// instance: karpenter.k8s.aws/tagged and cluster-name-tagged.
func ApplyTagged(nc *karpv1.NodeClaim) {
	nc.Annotations[AnnotationInstanceTagged] = "true"
	nc.Annotations[AnnotationClusterNameTagged] = "true"
}

// setCondition sets a condition the way operatorpkg's ConditionSet does:
// the transition time moves only with the status; conditions sorted by
// type.
func setCondition(nc *karpv1.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now)})
	sort.Slice(nc.Status.Conditions, func(i, j int) bool { return nc.Status.Conditions[i].Type < nc.Status.Conditions[j].Type })
}

// setReady computes the root Ready condition from Launched, Registered and
// Initialized (operatorpkg's recomputeRootCondition).
func setReady(nc *karpv1.NodeClaim, now time.Time) {
	var unhealthy []string
	anyFalse := false
	for _, typ := range []string{karpv1.ConditionLaunched, karpv1.ConditionRegistered, karpv1.ConditionInitialized} {
		c := meta.FindStatusCondition(nc.Status.Conditions, typ)
		switch {
		case c == nil:
			unhealthy = append(unhealthy, typ+"=Unknown")
		case c.Status != metav1.ConditionTrue:
			unhealthy = append(unhealthy, typ+"="+string(c.Status))
			anyFalse = anyFalse || c.Status == metav1.ConditionFalse
		}
	}
	switch {
	case len(unhealthy) == 0:
		setCondition(nc, karpv1.ConditionReady, metav1.ConditionTrue, karpv1.ConditionReady, "", now)
	case anyFalse:
		setCondition(nc, karpv1.ConditionReady, metav1.ConditionFalse, "UnhealthyDependents", strings.Join(unhealthy, ", "), now)
	default:
		setCondition(nc, karpv1.ConditionReady, metav1.ConditionUnknown, "ReconcilingDependents", strings.Join(unhealthy, ", "), now)
	}
}

// PoolStatus is a NodePool's status as Karpenter's counter and readiness
// controllers write it: resources (cpu, memory, pods, ephemeral-storage
// and nodes at least; the sum of its Nodes' capacity), nodes, the class's
// observed generation and the conditions ValidationSucceeded,
// NodeClassReady, NodeRegistrationHealthy and Ready.
func PoolStatus(np *karpv1.NodePool, class *awsv1.EC2NodeClass, nodes []*corev1.Node, now time.Time) karpv1.NodePoolStatus {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"),
		corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceEphemeralStorage: resource.MustParse("0")}
	for _, n := range nodes {
		for k, v := range n.Status.Capacity {
			sum := res[k]
			sum.Add(v)
			res[k] = sum
		}
	}
	count := int64(len(nodes))
	res[karpv1.ResourceNodes] = *resource.NewQuantity(count, resource.DecimalSI)
	st := karpv1.NodePoolStatus{Resources: res, Nodes: &count, NodeClassObservedGeneration: class.Generation}
	t := metav1.NewTime(now)
	for _, typ := range []string{ConditionNodeClassReady, ConditionNodeRegistrationHealthy, awsv1.ConditionReady, awsv1.ConditionValidationSucceeded} {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ,
			ObservedGeneration: np.Generation, LastTransitionTime: t})
	}
	return st
}
