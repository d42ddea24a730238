// Package annotate writes the disruption reason on a NodeClaim before the
// disruption loops delete it (Karpenter's karpenter.sh/disruption-reason).
package annotate

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Claims reads and writes NodeClaims on the API server (*kube.Clients).
type Claims interface {
	GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// Reason annotates the NodeClaim name with reason, retrying on conflicts,
// unless it carries reason already or keep says to leave it as it is. It
// returns the NodeClaim as stored, or nil when it is gone.
func Reason(ctx context.Context, c Claims, name, reason string, keep func(*karpv1.NodeClaim) bool) (*karpv1.NodeClaim, error) {
	var nc *karpv1.NodeClaim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.GetNodeClaim(ctx, name)
		if err != nil {
			return err
		}
		if cur.Annotations[karpv1.AnnotationDisruptionReason] == reason || keep != nil && keep(cur) {
			nc = cur
			return nil
		}
		cur = cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[karpv1.AnnotationDisruptionReason] = reason
		nc, err = c.UpdateNodeClaim(ctx, cur)
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("annotating nodeclaim %s: %w", name, err)
	}
	return nc, nil
}
