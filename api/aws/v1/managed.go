package v1

import karpv1 "github.com/joiner-dev/joiner/api/core/v1"

// Kind is the kind of the one node class Joiner serves.
const Kind = "EC2NodeClass"

// Manages reports whether a nodeClassRef names an EC2NodeClass, the one
// node class Joiner serves. A NodePool or NodeClaim whose reference names
// another group or kind belongs to another Karpenter provider and is left
// alone, as Karpenter's IsManaged leaves it. An empty group reads as
// karpenter.k8s.aws (objects written before the group was required); a nil
// reference names nothing.
func Manages(ref *karpv1.NodeClassReference) bool {
	return ref != nil && ref.Kind == Kind && (ref.Group == "" || ref.Group == Group)
}

// ManagesNodeClaim reports whether a NodeClaim is Joiner's to drive:
// one it launched (its joiner.io/launch-id annotation), or
// one whose nodeClassRef names an EC2NodeClass (Karpenter's, adopted) or
// nothing.
func ManagesNodeClaim(nc *karpv1.NodeClaim) bool {
	ref := nc.Spec.NodeClassRef
	return nc.Annotations[karpv1.AnnotationLaunchID] != "" || ref == nil || Manages(ref)
}
