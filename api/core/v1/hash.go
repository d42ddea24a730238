package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// NodePoolHashVersion is the version of Hash's input, written beside the
// hash (karpenter.sh/nodepool-hash-version).
const NodePoolHashVersion = "v3"

// Hash hashes what a NodePool's template stamps on a node beyond its
// requirements (labels, annotations, taints, startup taints, node class,
// expiry, termination grace period); a NodeClaim launched under another
// hash has drifted.
func (np *NodePool) Hash() string {
	t := np.Spec.Template
	grace := ""
	if d := t.Spec.TerminationGracePeriod; d != nil {
		grace = d.String()
	}
	b, err := json.Marshal(struct {
		Labels, Annotations    map[string]string
		Taints, StartupTaints  []corev1.Taint
		NodeClassRef           *NodeClassReference
		ExpireAfter            string
		TerminationGracePeriod string
	}{t.ObjectMeta.Labels, t.ObjectMeta.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef,
		t.Spec.ExpireAfter.String(), grace})
	if err != nil { // plain data always marshals
		panic(fmt.Sprintf("hashing nodepool %s: %v", np.Name, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
