package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/joiner-dev/joiner/internal/httpauth"
)

// Errors an Authenticator returns that the server answers specially
// (anything else: 503, retry); the same values as httpauth's, so one
// review answer serves reports, status and /metrics.
var (
	// ErrUnauthenticated: no token, or one that does not authenticate.
	ErrUnauthenticated = httpauth.ErrUnauthenticated
	// ErrBusy: too many authentications right now; 429, retry.
	ErrBusy = httpauth.ErrBusy
	// ErrForbidden: the caller is known but may not do this; 403.
	ErrForbidden = httpauth.ErrForbidden
)

// ProxiedAuthorizationHeader carries a status token ("Bearer <token>")
// through the Kubernetes API server's service and pod proxy, which
// authenticates the request with its Authorization header and drops that
// header before proxying. /v1/status reads it when Authorization is
// absent; the agents' reports never do.
const ProxiedAuthorizationHeader = "X-Joiner-Authorization"

// StatusTokenAudience is the audience of the tokens that read /v1/status:
// `joiner status` requests one (TokenRequest) for the status
// ServiceAccount, never sending the caller's own credential to the
// coordinator, and no other API accepts it.
const StatusTokenAudience = "joiner-status"

// bearer returns the token of an "Authorization: Bearer" header, else of
// ProxiedAuthorizationHeader ("" when neither has one).
func bearer(h http.Header) string {
	for _, name := range []string{"Authorization", ProxiedAuthorizationHeader} {
		if t, ok := strings.CutPrefix(h.Get(name), "Bearer "); ok && t != "" {
			return t
		}
	}
	return ""
}

// Identity is who sent a request.
type Identity struct {
	// User names the caller in logs.
	User string
	// Node is the node the caller runs on: an agent reports only about
	// this node and its instance.
	Node string
	// AnyNode lifts that restriction (a development token).
	AnyNode bool
}

// Authenticator maps a bearer token ("" when none was sent) to the caller.
type Authenticator func(ctx context.Context, token string) (Identity, error)

// limiter is a token bucket (golang.org/x/time/rate) per key (node).
// Keys are nodes that authenticated, so their number is bounded by the
// cluster's size; buckets idle long enough to be full again are dropped.
type limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*bucket{}}
}

func (l *limiter) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.swept) > time.Minute {
		full := time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
		for k, b := range l.buckets {
			if now.Sub(b.last) > full {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.last = now
	return b.lim.AllowN(now, 1)
}
