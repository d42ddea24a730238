// Package httpauth guards an HTTP endpoint (/metrics) the way
// controller-runtime's secure metrics serving and kube-rbac-proxy do: a
// caller presents a bearer token, an Authorizer (a TokenReview and a
// SubjectAccessReview through the Kubernetes API server, coordinator/kube)
// says whether its user may read the endpoint, and the answer becomes 401,
// 403, 429 or 503. A server with client certificates may admit a verified
// peer without a token. It also makes the self-signed serving certificate a
// node agent's metrics listener presents.
package httpauth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// Errors an Authorizer returns that Guard answers specially (anything
// else: 503, retry).
var (
	// ErrUnauthenticated: no token, or one that does not authenticate; 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrBusy: too many reviews right now; 429, retry.
	ErrBusy = errors.New("authentication busy")
	// ErrForbidden: the caller is known but may not do this; 403.
	ErrForbidden = errors.New("forbidden")
)

// Authorizer maps a bearer token ("" when none was sent) to the user it
// belongs to when that user may read the endpoint, else fails with one of
// the errors above or with why no review could be made.
type Authorizer func(ctx context.Context, token string) (user string, err error)

// BearerToken returns the token of an "Authorization: Bearer" header, ""
// when there is none. The scheme's name is case-insensitive (RFC 7235).
func BearerToken(h http.Header) string {
	scheme, t, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(t)
}

// Guard serves Next to callers Peer admits or whose bearer token Authorize
// accepts, and answers everyone else itself.
type Guard struct {
	Next http.Handler
	// Peer admits a request without a token (e.g. a verified client
	// certificate); nil: none.
	Peer func(*http.Request) bool
	// Authorize checks a bearer token; nil: tokens are not accepted.
	Authorize Authorizer
	// Want says what a caller needs, in the 401 answer.
	Want string
	Log  *zap.Logger
}

// ServeHTTP implements http.Handler.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.Peer != nil && g.Peer(r) {
		g.Next.ServeHTTP(w, r)
		return
	}
	token := BearerToken(r.Header)
	if g.Authorize == nil || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="joiner"`)
		http.Error(w, g.Want, http.StatusUnauthorized)
		return
	}
	user, err := g.Authorize(r.Context(), token)
	switch {
	case err == nil:
		g.Next.ServeHTTP(w, r)
	case errors.Is(err, ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="joiner"`)
		http.Error(w, "bearer token rejected", http.StatusUnauthorized)
	case errors.Is(err, ErrForbidden):
		g.log().Debug("refused a request", zap.String("path", r.URL.Path), zap.String("user", user), zap.Error(err))
		http.Error(w, err.Error(), http.StatusForbidden)
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many authentications, retry", http.StatusTooManyRequests)
	default:
		// Not an answer about the caller (e.g. we may not create reviews):
		// logged, never shown to an unknown caller.
		g.log().Warn("authorizing a request", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "cannot check the caller now, retry", http.StatusServiceUnavailable)
	}
}

func (g *Guard) log() *zap.Logger {
	if g.Log == nil {
		return zap.NewNop()
	}
	return g.Log
}
