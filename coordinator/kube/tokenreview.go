package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Errors of TokenReviewer.Review callers branch on.
var (
	// ErrTokenRejected: the API server does not authenticate the token
	// for our audience, or it belongs to another user, or it is not bound
	// to a pod on a node.
	ErrTokenRejected = errors.New("token rejected")
	// ErrReviewBusy: more reviews than the review rate allows; retry.
	ErrReviewBusy = errors.New("too many token reviews")
)

// TokenIdentity is who a reviewed token belongs to.
type TokenIdentity struct {
	User string
	// Node is the node of the pod the token is bound to.
	Node string
}

// TokenReviewer authenticates agents' bearer tokens with the API server's
// TokenReview: a projected ServiceAccount token with our audience, of one
// of Users, bound to a pod; the API server names that pod's node in the
// user's extra info, and that node is the only one the caller may report
// about. Answers are cached by token hash (accepted ones for TTL, rejected
// ones for a tenth of it, bounded in number), and reviews are rate
// limited, so a flood of forged tokens costs the API server little.
type TokenReviewer struct {
	Client   kubernetes.Interface
	Audience string
	Users    []string
	// NodeUsers also accepts a node's own credential (user system:node:X
	// in group system:nodes, e.g. the token EKS's authenticator issues to
	// the kubelet): agents run as systemd units send it. Such tokens carry
	// no audience of ours, so they are reviewed for the API server's.
	NodeUsers bool
	// ReviewLimits default to TTL 1 min, MaxCached 4096, 20 reviews a second.
	ReviewLimits

	reviews reviewCache
}

func (r *TokenReviewer) limits() reviewLimits {
	return r.ReviewLimits.withDefaults(4096, 20)
}

// Review returns the identity of token or an error wrapping
// ErrTokenRejected or ErrReviewBusy (anything else: the review failed).
func (r *TokenReviewer) Review(ctx context.Context, token string) (TokenIdentity, error) {
	return r.reviews.do(ctx, token, r.limits, r.review, ErrTokenRejected)
}

func (r *TokenReviewer) review(ctx context.Context, token string) (TokenIdentity, error) {
	id, err := r.reviewAgent(ctx, token)
	if err == nil || !r.NodeUsers || !errors.Is(err, ErrTokenRejected) {
		return id, err
	}
	if nid, nerr := r.reviewNode(ctx, token); nerr == nil {
		return nid, nil
	}
	return id, err
}

// reviewNode accepts a node's own credential: user system:node:<name> in
// group system:nodes.
func (r *TokenReviewer) reviewNode(ctx context.Context, token string) (TokenIdentity, error) {
	st, err := reviewToken(ctx, r.Client, token)
	if err != nil {
		return TokenIdentity{}, err
	}
	node, isNode := strings.CutPrefix(st.User.Username, nodeUserPrefix)
	if !st.Authenticated || !isNode || node == "" || !slices.Contains(st.User.Groups, nodesGroup) {
		return TokenIdentity{}, fmt.Errorf("%w: not a node's credential", ErrTokenRejected)
	}
	return TokenIdentity{User: st.User.Username, Node: node}, nil
}

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

func (r *TokenReviewer) reviewAgent(ctx context.Context, token string) (TokenIdentity, error) {
	user, err := reviewForAudience(ctx, r.Client, token, r.Audience)
	if err != nil {
		return TokenIdentity{}, err
	}
	if !slices.Contains(r.Users, user.Username) {
		return TokenIdentity{}, fmt.Errorf("%w: user %s is not an agent (want one of %v)", ErrTokenRejected, user.Username, r.Users)
	}
	nodes := user.Extra[karpv1.UserExtraNodeName]
	if len(nodes) != 1 || nodes[0] == "" {
		return TokenIdentity{}, fmt.Errorf("%w: user %s: token not bound to a pod on a node (extra %s %v)",
			ErrTokenRejected, user.Username, karpv1.UserExtraNodeName, nodes)
	}
	return TokenIdentity{User: user.Username, Node: nodes[0]}, nil
}

// reviewForAudience returns the user of token when the API server
// authenticates it for audience; otherwise an error wrapping
// ErrTokenRejected, or the review's own error.
func reviewForAudience(ctx context.Context, client kubernetes.Interface, token, audience string) (authnv1.UserInfo, error) {
	st, err := reviewToken(ctx, client, token, audience)
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	switch {
	case !st.Authenticated:
		msg := st.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return authnv1.UserInfo{}, fmt.Errorf("%w: %s (want a token for audience %s)", ErrTokenRejected, msg, audience)
	case !slices.Contains(st.Audiences, audience):
		// An authenticator that ignores audiences answers for the API
		// server's own: not a token meant for us.
		return authnv1.UserInfo{}, fmt.Errorf("%w: token audiences %v, want %s", ErrTokenRejected, st.Audiences, audience)
	}
	return st.User, nil
}

// reviewToken has the API server review token for audiences (none: its
// own) and returns the review's status.
func reviewToken(ctx context.Context, client kubernetes.Interface, token string, audiences ...string) (authnv1.TokenReviewStatus, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences}}
	out, err := client.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return authnv1.TokenReviewStatus{}, fmt.Errorf("token review: %w", rbacHint(err, "tokenreviews.authentication.k8s.io"))
	}
	return out.Status, nil
}
