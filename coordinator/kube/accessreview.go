package kube

import (
	"context"
	"errors"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/internal/httpauth"
)

// MetricsPath is the non-resource URL a metrics scraper must be allowed to
// get (the chart's <fullname>-metrics-reader ClusterRole).
const MetricsPath = "/metrics"

// AccessReviewer authorizes callers of a non-resource URL as
// controller-runtime's secure metrics serving and kube-rbac-proxy do: the
// bearer token must authenticate for the API server's own audience
// (TokenReview; a Prometheus pod's ServiceAccount token), and its user
// must be allowed Verb on Path (SubjectAccessReview with
// nonResourceAttributes; RBAC: nonResourceURLs). A token that is not a
// JWT is refused unreviewed. Answers are cached by token hash (TTL;
// rejections and denials a tenth of it) and reviews rate limited, in the
// reviewer's own cache and limiter, as for the other reviewers. It needs
// RBAC to create tokenreviews and subjectaccessreviews.
type AccessReviewer struct {
	Client kubernetes.Interface
	// Path and Verb default to MetricsPath and get.
	Path, Verb string
	// ReviewLimits default to TTL 1 min, MaxCached 1024, 5 reviews a second.
	ReviewLimits

	reviews reviewCache
}

func (r *AccessReviewer) limits() reviewLimits {
	if r.Path == "" {
		r.Path = MetricsPath
	}
	if r.Verb == "" {
		r.Verb = "get"
	}
	return r.ReviewLimits.withDefaults(1024, 5)
}

// Review returns the token's user, or an error wrapping ErrTokenRejected
// (not authenticated), ErrAccessDenied (the user may not) or
// ErrReviewBusy; anything else: a review itself failed, e.g. we may not
// create reviews.
func (r *AccessReviewer) Review(ctx context.Context, token string) (TokenIdentity, error) {
	// Scrapers present ServiceAccount (or OIDC) tokens, JWTs: anything
	// else is refused before it spends the review rate.
	if err := requireJWT(token); err != nil {
		return TokenIdentity{}, err
	}
	return r.reviews.do(ctx, token, r.limits, r.review, ErrTokenRejected, ErrAccessDenied)
}

func (r *AccessReviewer) review(ctx context.Context, token string) (TokenIdentity, error) {
	st, err := reviewToken(ctx, r.Client, token)
	if err != nil {
		return TokenIdentity{}, err
	}
	if !st.Authenticated {
		msg := st.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return TokenIdentity{}, fmt.Errorf("%w: %s", ErrTokenRejected, msg)
	}
	u := st.User
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: r.Path, Verb: r.Verb},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	out, err := r.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return TokenIdentity{}, fmt.Errorf("subject access review: %w", rbacHint(err, "subjectaccessreviews.authorization.k8s.io"))
	}
	id := TokenIdentity{User: u.Username}
	if !out.Status.Allowed || out.Status.Denied {
		why := out.Status.Reason
		if why == "" {
			why = "no RBAC rule allows it"
		}
		return id, fmt.Errorf("%w: user %q may not %s %s: %s", ErrAccessDenied, u.Username, r.Verb, r.Path, why)
	}
	return id, nil
}

// Authorize is Review as an httpauth.Authorizer (a guard on an HTTP
// endpoint).
func (r *AccessReviewer) Authorize(ctx context.Context, token string) (string, error) {
	id, err := r.Review(ctx, token)
	return id.User, HTTPAuthError(err)
}

// HTTPAuthError maps a review's error to httpauth's: a rejected token is
// unauthenticated, a denied user forbidden, a busy reviewer busy; any
// other error (no review could be made) is returned as it is.
func HTTPAuthError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTokenRejected):
		return fmt.Errorf("%w: %v", httpauth.ErrUnauthenticated, err)
	case errors.Is(err, ErrAccessDenied):
		return fmt.Errorf("%w: %v", httpauth.ErrForbidden, err)
	case errors.Is(err, ErrReviewBusy):
		return httpauth.ErrBusy
	}
	return err
}
