package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/api/internal/khash"
)

// NodePoolHashVersion is the version of Hash's input, written beside the
// hash (karpenter.sh/nodepool-hash-version): Karpenter v1's.
const NodePoolHashVersion = "v3"

// Hash is Karpenter v1's hash of the NodePool's template: labels,
// annotations, taints, startup taints, node class, expireAfter and
// terminationGracePeriod (not the requirements, which drift by their own
// check). A NodeClaim launched under another hash of the same version has
// drifted. The number equals Karpenter's, so NodeClaims Karpenter launched
// keep their verdict.
func (np *NodePool) Hash() string {
	t := np.Spec.Template
	spec := khash.NodeClaimTemplateSpec{
		Taints:        t.Spec.Taints,
		StartupTaints: t.Spec.StartupTaints,
		ExpireAfter:   khash.NillableDuration{Duration: t.Spec.ExpireAfter.Duration},
	}
	if r := t.Spec.NodeClassRef; r != nil {
		spec.NodeClassRef = &khash.NodeClassReference{Kind: r.Kind, Name: r.Name, Group: r.Group}
	}
	if g := t.Spec.TerminationGracePeriod; g != nil && g.Duration != nil {
		spec.TerminationGracePeriod = &metav1.Duration{Duration: *g.Duration}
	}
	return khash.NodePool(khash.NodeClaimTemplate{
		ObjectMeta: khash.ObjectMeta{Labels: t.ObjectMeta.Labels, Annotations: t.ObjectMeta.Annotations},
		Spec:       spec,
	})
}
