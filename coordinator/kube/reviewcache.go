package kube

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// reviewCache is what TokenReviewer, StatusReviewer and AccessReviewer
// share (each reviewer has its own): answers about a token cached by its
// hash (TTL; a tenth of it for a rejection), bounded in number, and
// reviews rate limited, so a flood of forged tokens costs the API server
// little. While the rate is spent, a token allowed before is still allowed
// for staleAllows TTLs after its answer expired, so a flood of forged
// tokens cannot lock out a caller the cache already knows (nothing new is
// cached then).
type reviewCache struct {
	mu      sync.Mutex
	cache   map[[32]byte]reviewed
	reviews *rate.Limiter
}

type reviewed struct {
	id      TokenIdentity
	err     error
	expires time.Time
}

// staleAllows is how many TTLs past its expiry a cached allow still
// answers while the review rate is spent.
const staleAllows = 5

// usable reports whether r may still answer at now: until it expires, or
// for an allow, while the review rate is spent, staleAllows TTLs longer.
func (r reviewed) usable(now time.Time, ttl time.Duration, busy bool) bool {
	if busy && r.err == nil {
		return now.Before(r.expires.Add(staleAllows * ttl))
	}
	return now.Before(r.expires)
}

// ReviewLimits bound a reviewer's cache and review rate: TTL of a cached
// answer, MaxCached entries, at most ReviewsPerSecond reviews (burst
// twice, at least 1); zero values take the reviewer's defaults.
type ReviewLimits struct {
	TTL              time.Duration
	MaxCached        int
	ReviewsPerSecond float64
	Now              func() time.Time
}

// reviewLimits are a reviewer's settings with its defaults applied.
type reviewLimits struct {
	ttl       time.Duration
	maxCached int
	perSecond float64
	now       func() time.Time
}

// withDefaults applies the defaults to l's zero fields and returns them.
func (l *ReviewLimits) withDefaults(maxCached int, perSecond float64) reviewLimits {
	defaults.Positive(&l.TTL, time.Minute)
	defaults.Positive(&l.MaxCached, maxCached)
	defaults.Positive(&l.ReviewsPerSecond, perSecond)
	defaults.Clock(&l.Now)
	return reviewLimits{ttl: l.TTL, maxCached: l.MaxCached, perSecond: l.ReviewsPerSecond, now: l.Now}
}

// do answers for token from the cache, else from review. limits runs under
// the cache's lock (it may apply defaults to the reviewer's fields); an
// error of review that wraps none of answers is not about the token and
// is not cached.
func (c *reviewCache) do(ctx context.Context, token string, limits func() reviewLimits,
	review func(context.Context, string) (TokenIdentity, error), answers ...error) (TokenIdentity, error) {
	if token == "" {
		return TokenIdentity{}, fmt.Errorf("%w: no bearer token", ErrTokenRejected)
	}
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	l := limits()
	if c.cache == nil {
		c.cache = map[[32]byte]reviewed{}
	}
	if c.reviews == nil {
		c.reviews = rate.NewLimiter(rate.Limit(l.perSecond), max(1, int(2*l.perSecond)))
	}
	now := l.now()
	r, cached := c.cache[key]
	if cached && r.usable(now, l.ttl, false) {
		c.mu.Unlock()
		return r.id, r.err
	}
	if !c.reviews.AllowN(now, 1) {
		c.mu.Unlock()
		if cached && r.err == nil && r.usable(now, l.ttl, true) {
			return r.id, nil // a stale allow: better than 429 for a known caller
		}
		return TokenIdentity{}, ErrReviewBusy
	}
	c.mu.Unlock()

	id, err := review(ctx, token)
	if err != nil && !isAnyOf(err, answers) {
		return id, err // not an answer about the token: not cached
	}
	ttl := l.ttl
	if err != nil {
		ttl /= 10
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= l.maxCached {
		for k, r := range c.cache {
			if !r.usable(now, l.ttl, true) { // stale allows are kept
				delete(c.cache, k)
			}
		}
		if len(c.cache) >= l.maxCached {
			clear(c.cache)
		}
	}
	c.cache[key] = reviewed{id: id, err: err, expires: now.Add(ttl)}
	return id, err
}

// requireJWT refuses, before it spends any review budget, a token that
// is not shaped as a JWT (JWS compact serialization: three non-empty
// base64url segments separated by dots). ServiceAccount tokens (legacy,
// TokenRequest and projected) and OIDC ID tokens are JWTs; a reviewer that
// takes only those uses it so that junk strings are 401 for free. (Static
// tokens, webhook-authenticated ones such as EKS's k8s-aws-v1. and node
// credentials are not JWTs: TokenReviewer does not use it.)
func requireJWT(token string) error {
	if token == "" {
		return fmt.Errorf("%w: no bearer token", ErrTokenRejected)
	}
	segments := strings.Split(token, ".")
	if len(segments) != 3 || slices.ContainsFunc(segments, func(s string) bool { return !isBase64URL(s) }) {
		return fmt.Errorf("%w: not a JWT (ServiceAccount and OIDC tokens are)", ErrTokenRejected)
	}
	return nil
}

// isBase64URL reports whether s is a non-empty run of the unpadded
// base64url alphabet.
func isBase64URL(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

func isAnyOf(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
