package nodeclass

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
)

// NodePool condition types and reasons, Karpenter's.
const (
	ConditionNodeClassReady = "NodeClassReady"
	reasonUnhealthy         = "UnhealthyDependents"
)

// PoolStatus is a NodePool's status as Karpenter v1.14 writes it, from its
// validation result, its EC2NodeClass (nil when not found) and the
// NodeClaims: conditions ValidationSucceeded, NodeClassReady and Ready
// (true when both are), status.resources (the capacity of the pool's
// nodes, with "nodes" their count; a NodeClaim whose Node joined counts
// the Node's capacity, a resource the Node does not report yet its
// NodeClaim's until the Node is initialized, as Karpenter's cluster
// state; the others their NodeClaim's; NodeClaims being deleted or
// terminated do not count) and status.nodes. Transition
// times move only when a condition's status does.
func PoolStatus(np *karpv1.NodePool, invalid error, class *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim,
	nodeOf func(providerID string) *corev1.Node, now metav1.Time) karpv1.NodePoolStatus {
	st := *np.Status.DeepCopy()
	set := func(typ string, ok bool, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, ObservedGeneration: np.Generation, LastTransitionTime: now}
		if !ok {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, msg
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if invalid != nil {
		set(awsv1.ConditionValidationSucceeded, false, "NodePoolValidationFailed", invalid.Error())
	} else {
		set(awsv1.ConditionValidationSucceeded, true, "", "")
	}
	switch ready := classReady(class); {
	case class == nil:
		set(ConditionNodeClassReady, false, "NodeClassNotFound", "NodeClass not found on cluster")
	case class.DeletionTimestamp != nil:
		set(ConditionNodeClassReady, false, "NodeClassTerminating", "NodeClass is Terminating")
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		set(ConditionNodeClassReady, false, "NodeClassReadinessUnknown", "Node Class Readiness Unknown")
	case ready.Status == metav1.ConditionFalse:
		set(ConditionNodeClassReady, false, ready.Reason, ready.Message)
	default:
		set(ConditionNodeClassReady, true, "", "")
	}
	var unhealthy []string
	for _, typ := range []string{awsv1.ConditionValidationSucceeded, ConditionNodeClassReady} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c.Status != metav1.ConditionTrue {
			unhealthy = append(unhealthy, typ+"="+string(c.Status))
		}
	}
	set(awsv1.ConditionReady, len(unhealthy) == 0, reasonUnhealthy, joinComma(unhealthy))

	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"),
		corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceEphemeralStorage: resource.MustParse("0")}
	var nodes int64
	for _, nc := range claims {
		if nc.Labels[karpv1.LabelNodePool] != np.Name || goingAway(nc) {
			continue
		}
		capacity := nc.Status.Capacity
		if n := nodeOf(nc.Status.ProviderID); nc.Status.ProviderID != "" && n != nil {
			capacity = nodeCapacity(nc, n)
		}
		for name, q := range capacity {
			sum := res[name]
			sum.Add(q)
			res[name] = sum
		}
		nodes++
	}
	res[karpv1.ResourceNodes] = *resource.NewQuantity(nodes, resource.DecimalSI)
	st.Resources = res
	st.Nodes = &nodes
	return st
}

// nodeCapacity is what a NodeClaim whose Node joined counts in its pool:
// the Node's capacity once initialized; before, the Node's with each
// resource it reports as zero or not at all taken from the NodeClaim (a
// kubelet that has not posted its capacity yet), as Karpenter's
// StateNode.Capacity.
func nodeCapacity(nc *karpv1.NodeClaim, n *corev1.Node) corev1.ResourceList {
	if n.Labels[karpv1.LabelInitialized] == "true" {
		return n.Status.Capacity
	}
	out := make(corev1.ResourceList, len(n.Status.Capacity))
	for name, q := range n.Status.Capacity {
		out[name] = q
	}
	for name, q := range nc.Status.Capacity {
		if have := out[name]; have.IsZero() {
			out[name] = q
		}
	}
	return out
}

// ConditionNodeRegistrationHealthy is Karpenter's NodePool condition for
// whether its nodes launch and register.
const ConditionNodeRegistrationHealthy = "NodeRegistrationHealthy"

// RegistrationHealth writes a pool's NodeRegistrationHealthy condition and
// status.nodeClassObservedGeneration, as Karpenter's registration health
// controller: Unknown (its record forgotten) when the pool or its class
// changed since the condition was written; else True or False from the
// pool's recent registrations (False with the failure's reason, kept while
// it stays False), the condition as written seeding the record of a new
// leader.
func RegistrationHealth(st *karpv1.NodePoolStatus, np *karpv1.NodePool, class *awsv1.EC2NodeClass, h *poolhealth.State, now metav1.Time) {
	cond := meta.FindStatusCondition(st.Conditions, ConditionNodeRegistrationHealthy)
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionNodeRegistrationHealthy, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: np.Generation, LastTransitionTime: now})
	}
	switch {
	case cond == nil || st.NodeClassObservedGeneration != class.Generation || cond.ObservedGeneration != np.Generation:
		h.Reset(np.UID)
		set(metav1.ConditionUnknown, "AwaitingReconciliation", "object is awaiting reconciliation")
	default:
		switch cond.Status {
		case metav1.ConditionTrue:
			h.Hydrate(np.UID, poolhealth.Healthy, poolhealth.Failure{})
		case metav1.ConditionFalse:
			h.Hydrate(np.UID, poolhealth.Unhealthy, poolhealth.Failure{Reason: cond.Reason, Message: cond.Message})
		}
		switch health, why := h.Status(np.UID); {
		case health == poolhealth.Healthy:
			set(metav1.ConditionTrue, ConditionNodeRegistrationHealthy, "")
		case health == poolhealth.Unhealthy && cond.Status != metav1.ConditionFalse:
			set(metav1.ConditionFalse, why.Reason, why.Message)
		}
	}
	st.NodeClassObservedGeneration = class.Generation
}

// foreign: the pool's nodeClassRef names a node class of another group or
// kind, another Karpenter provider's: its status and annotations are
// left alone, as Karpenter's nodepool controllers leave a pool they do not
// manage. A pool without a reference is Joiner's to report invalid.
func foreign(np *karpv1.NodePool) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	return ref != nil && !awsv1.Manages(ref)
}

// goingAway: the NodeClaim is being deleted or its instance terminated, so
// it no longer counts in its pool's nodes and resources (Karpenter's
// StateNode.Deleted, which its NodePool counter leaves out).
func goingAway(nc *karpv1.NodeClaim) bool {
	if nc.DeletionTimestamp != nil {
		return true
	}
	c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionInstanceTerminating)
	return c != nil && c.Status == metav1.ConditionTrue
}

func classReady(class *awsv1.EC2NodeClass) *metav1.Condition {
	if class == nil {
		return nil
	}
	return meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionReady)
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// reportPool writes the pool's status when it changed and, when the pool
// is invalid, says so in an Event and the log.
func (l *Loop) reportPool(ctx context.Context, cached *karpv1.NodePool, claims []*karpv1.NodeClaim, now time.Time) {
	if foreign(cached) {
		return
	}
	np := cached.DeepCopy()
	np.SetDefaults()
	err := np.Validate()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if l.changed("nodepool/"+cached.Name, msg) && err != nil {
		l.log.Warn("ignoring invalid nodepool", zap.String("nodepool", cached.Name), zap.Error(err))
		l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "InvalidNodePool", "NodePool %s is invalid and is not used: %v", cached.Name, err)
	}
	var class *awsv1.EC2NodeClass
	if ref := cached.Spec.Template.Spec.NodeClassRef; ref != nil {
		class = l.d.Cache.NodeClass(ref.Name)
	}
	st := PoolStatus(cached, err, class, claims, l.d.Cache.NodeByProviderID, metav1.NewTime(now))
	if class != nil && l.d.Health != nil {
		RegistrationHealth(&st, cached, class, l.d.Health, metav1.NewTime(now))
	}
	if equality.Semantic.DeepEqual(st, cached.Status) {
		return
	}
	out := cached.DeepCopy()
	out.Status = st
	if _, uerr := l.d.Kube.UpdateNodePoolStatus(ctx, out); uerr != nil && ctx.Err() == nil {
		l.log.Warn("updating nodepool status", zap.String("nodepool", out.Name), zap.Error(uerr))
	}
}

// stampPool keeps the pool's karpenter.sh/nodepool-hash annotations
// current, as Karpenter's hash controller does. When the pool's recorded
// hash version is not the current one (a hash written by another Karpenter
// version), its NodeClaims get the current version and, unless already
// drifted, the current hash: a change of hashing alone drifts nothing.
func (l *Loop) stampPool(ctx context.Context, np *karpv1.NodePool, claims []*karpv1.NodeClaim) {
	if foreign(np) {
		return
	}
	want := np.Hash()
	version := np.Annotations[karpv1.AnnotationNodePoolHashVersion]
	if version != karpv1.NodePoolHashVersion {
		l.restamp(ctx, claims, func(nc *karpv1.NodeClaim) bool { return nc.Labels[karpv1.LabelNodePool] == np.Name },
			karpv1.AnnotationNodePoolHash, karpv1.AnnotationNodePoolHashVersion, want, karpv1.NodePoolHashVersion)
	}
	if np.Annotations[karpv1.AnnotationNodePoolHash] == want && version == karpv1.NodePoolHashVersion {
		return
	}
	if err := l.d.Kube.Annotate(ctx, kube.NodePoolsGVR, np.Name, map[string]string{
		karpv1.AnnotationNodePoolHash: want, karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}); err != nil && ctx.Err() == nil {
		l.log.Warn("writing nodepool hash", zap.String("nodepool", np.Name), zap.Error(err))
	}
}

// stampClass is stampPool for an EC2NodeClass
// (karpenter.k8s.aws/ec2nodeclass-hash).
func (l *Loop) stampClass(ctx context.Context, nc *awsv1.EC2NodeClass, want string, claims []*karpv1.NodeClaim) {
	version := nc.Annotations[karpv1.AnnotationEC2NodeClassHashVersion]
	if version != awsv1.EC2NodeClassHashVersion {
		l.restamp(ctx, claims, func(c *karpv1.NodeClaim) bool {
			return c.Spec.NodeClassRef != nil && c.Spec.NodeClassRef.Name == nc.Name
		}, karpv1.AnnotationEC2NodeClassHash, karpv1.AnnotationEC2NodeClassHashVersion, want, awsv1.EC2NodeClassHashVersion)
	}
	if nc.Annotations[karpv1.AnnotationEC2NodeClassHash] == want && version == awsv1.EC2NodeClassHashVersion {
		return
	}
	if err := l.d.Kube.Annotate(ctx, kube.EC2NodeClassesGVR, nc.Name, map[string]string{
		karpv1.AnnotationEC2NodeClassHash: want, karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}); err != nil && ctx.Err() == nil {
		l.log.Warn("writing ec2nodeclass hash", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
	}
}

// restamp gives the matching NodeClaims whose hash version is not current
// the current version and, when they are not drifted, the current hash.
func (l *Loop) restamp(ctx context.Context, claims []*karpv1.NodeClaim, match func(*karpv1.NodeClaim) bool,
	hashKey, versionKey, hash, version string) {
	for _, nc := range claims {
		if !match(nc) || nc.DeletionTimestamp != nil || nc.Annotations[versionKey] == version {
			continue
		}
		set := map[string]string{versionKey: version}
		if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDrifted) == nil {
			set[hashKey] = hash
		}
		if err := l.d.Kube.Annotate(ctx, kube.NodeClaimsGVR, nc.Name, set); err != nil && ctx.Err() == nil {
			l.log.Warn("updating nodeclaim hash version", zap.String("nodeclaim", nc.Name), zap.Error(err))
		}
	}
}
