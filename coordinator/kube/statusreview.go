package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// ErrAccessDenied: the token authenticates for the audience, but its user
// is not the one allowed.
var ErrAccessDenied = errors.New("access denied")

// StatusReviewer authenticates the tokens `joiner status` presents to read
// a coordinator's /v1/status: a token the API server issued (TokenRequest)
// for one ServiceAccount, User, with Audience, which no other API accepts.
// Whoever may create that ServiceAccount's tokens (RBAC: create
// serviceaccounts/token on it, the chart's statusReaders) may read status;
// nobody's own cluster credential is ever needed here. It checks the token
// with a TokenReview scoped to Audience (a token that is not a JWT is
// refused unreviewed); answers are cached by token hash
// (TTL; rejections a tenth of it) and reviews rate limited. It needs RBAC
// to create tokenreviews.
type StatusReviewer struct {
	Client kubernetes.Interface
	// Audience the token must be issued for.
	Audience string
	// User is the ServiceAccount's user name,
	// system:serviceaccount:<namespace>:<name>.
	User string
	// ReviewLimits default to TTL 1 min, MaxCached 1024, 5 reviews a second.
	ReviewLimits

	reviews reviewCache
}

func (r *StatusReviewer) limits() reviewLimits {
	return r.ReviewLimits.withDefaults(1024, 5)
}

// Review returns the token's user, or an error wrapping ErrTokenRejected
// (not authenticated for Audience), ErrAccessDenied (another user) or
// ErrReviewBusy; anything else: the review itself failed, e.g. the
// coordinator may not create reviews.
func (r *StatusReviewer) Review(ctx context.Context, token string) (TokenIdentity, error) {
	if r.Audience == "" || r.User == "" {
		return TokenIdentity{}, fmt.Errorf("status reviewer: audience %q, user %q: both are needed", r.Audience, r.User)
	}
	// TokenRequest tokens are JWTs: anything else is refused before it
	// spends the review rate.
	if err := requireJWT(token); err != nil {
		return TokenIdentity{}, err
	}
	return r.reviews.do(ctx, token, r.limits, r.review, ErrTokenRejected, ErrAccessDenied)
}

func (r *StatusReviewer) review(ctx context.Context, token string) (TokenIdentity, error) {
	user, err := reviewForAudience(ctx, r.Client, token, r.Audience)
	if err != nil {
		return TokenIdentity{}, err
	}
	if user.Username != r.User {
		return TokenIdentity{User: user.Username}, fmt.Errorf("%w: user %q is not the status ServiceAccount %s", ErrAccessDenied, user.Username, r.User)
	}
	return TokenIdentity{User: user.Username}, nil
}

// ServiceAccountUser is the user name of ServiceAccount name in namespace.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ParseServiceAccountUser splits system:serviceaccount:<namespace>:<name>.
func ParseServiceAccountUser(user string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	namespace, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", fmt.Errorf("ServiceAccount user %q: want system:serviceaccount:<namespace>:<name>", user)
	}
	return namespace, name, nil
}

// rbacHint names the permission we (a coordinator or an agent) lack when
// the API server forbids a review.
func rbacHint(err error, resource string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("our ServiceAccount may not create %s (grant it in its ClusterRole): %w", resource, err)
	}
	return err
}
