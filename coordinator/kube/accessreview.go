package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// ErrAccessDenied: the token authenticates, but its user may not do what
// the review asks.
var ErrAccessDenied = errors.New("access denied")

// StatusAccess is what a user must be allowed to read a coordinator's
// /v1/status with a bearer token: list NodeClaims, which show the same
// launches, instances and prices.
var StatusAccess = authzv1.ResourceAttributes{Verb: "list", Group: "karpenter.sh", Resource: "nodeclaims"}

// AccessReviewer authenticates a Kubernetes user's or ServiceAccount's
// bearer token, the one its kubeconfig sends the API server, with
// TokenReview (the API server's own audiences), and authorizes that user
// with a SubjectAccessReview of Access: the API server's authentication
// and RBAC decide, as they do for kubectl. Answers are cached by token
// hash (TTL; denials and rejections a tenth of it) and reviews are rate
// limited. It needs RBAC to create tokenreviews and subjectaccessreviews.
type AccessReviewer struct {
	Client kubernetes.Interface
	Access authzv1.ResourceAttributes
	// TTL of a cached answer (default 1 min), MaxCached entries (default
	// 1024), ReviewsPerSecond (default 5, burst twice).
	TTL              time.Duration
	MaxCached        int
	ReviewsPerSecond float64
	Now              func() time.Time

	reviews reviewCache
}

func (r *AccessReviewer) limits() reviewLimits {
	defaults.Positive(&r.TTL, time.Minute)
	defaults.Positive(&r.MaxCached, 1024)
	defaults.Positive(&r.ReviewsPerSecond, 5)
	defaults.Clock(&r.Now)
	return reviewLimits{ttl: r.TTL, maxCached: r.MaxCached, perSecond: r.ReviewsPerSecond, now: r.Now}
}

// Review returns the token's user, or an error wrapping ErrTokenRejected,
// ErrAccessDenied or ErrReviewBusy (anything else: the review itself
// failed, e.g. the coordinator may not create reviews).
func (r *AccessReviewer) Review(ctx context.Context, token string) (TokenIdentity, error) {
	return r.reviews.do(ctx, token, r.limits, r.review, ErrTokenRejected, ErrAccessDenied)
}

func (r *AccessReviewer) review(ctx context.Context, token string) (TokenIdentity, error) {
	tr, err := r.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return TokenIdentity{}, fmt.Errorf("token review: %w", rbacHint(err, "tokenreviews.authentication.k8s.io"))
	}
	if !tr.Status.Authenticated {
		msg := tr.Status.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return TokenIdentity{}, fmt.Errorf("%w: %s", ErrTokenRejected, msg)
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	access := r.Access
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra, ResourceAttributes: &access,
	}}
	out, err := r.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return TokenIdentity{}, fmt.Errorf("subject access review: %w", rbacHint(err, "subjectaccessreviews.authorization.k8s.io"))
	}
	id := TokenIdentity{User: u.Username}
	if !out.Status.Allowed {
		why := out.Status.Reason
		if out.Status.EvaluationError != "" {
			why += " (" + out.Status.EvaluationError + ")"
		}
		if why == "" {
			why = "no RBAC rule allows it"
		}
		return id, fmt.Errorf("%w: user %q may not %s: %s", ErrAccessDenied, u.Username, describeAccess(access), why)
	}
	return id, nil
}

// describeAccess says what the attributes ask, as kubectl auth can-i reads.
func describeAccess(a authzv1.ResourceAttributes) string {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	s := a.Verb + " " + res
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

// rbacHint names the permission the coordinator lacks when the API server
// forbids a review.
func rbacHint(err error, resource string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("the coordinator's ServiceAccount may not create %s (grant it in its ClusterRole): %w", resource, err)
	}
	return err
}
