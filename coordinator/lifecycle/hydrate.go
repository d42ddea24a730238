package lifecycle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/logging"
)

// HydrateLabels gives labels the karpenter.k8s.aws/ec2nodeclass label
// naming the NodeClaim's class, as Karpenter's NodeClaim and Node
// hydration controllers write it onto objects made before the label was
// (Joiner's own carry it from their creation). It reports whether the
// labels changed; labels may be nil only when nothing is to be written.
func HydrateLabels(nc *karpv1.NodeClaim, labels *map[string]string) bool {
	ref := nc.Spec.NodeClassRef
	if ref == nil || (*labels)[karpv1.LabelNodeClass] == ref.Name {
		return false
	}
	if *labels == nil {
		*labels = map[string]string{}
	}
	(*labels)[karpv1.LabelNodeClass] = ref.Name
	return true
}

// hydrate writes the node class label onto the NodeClaim and its Node
// where it is missing, and returns them as written (the pass goes on from
// them).
func (l *Lifecycle) hydrate(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (*karpv1.NodeClaim, *corev1.Node, error) {
	if c := nc.DeepCopy(); HydrateLabels(c, &c.Labels) {
		out, err := l.d.Claims.UpdateNodeClaim(ctx, c)
		if err != nil {
			return nil, nil, fmt.Errorf("labelling nodeclaim %s with its node class: %w", nc.Name, err)
		}
		l.log.Debug("hydrated nodeclaim labels", logging.NodeClaim(nc.Name))
		nc = out
	}
	if node == nil {
		return nc, nil, nil
	}
	if n := node.DeepCopy(); HydrateLabels(nc, &n.Labels) {
		out, err := l.d.Nodes.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("labelling node %s with its node class: %w", node.Name, err)
		}
		l.log.Debug("hydrated node labels", logging.Node(node.Name))
		node = out
	}
	return nc, node, nil
}
