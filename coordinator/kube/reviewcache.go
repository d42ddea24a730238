package kube

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// reviewCache is what TokenReviewer and StatusReviewer share: answers
// about a token cached by its hash (TTL; a tenth of it for a rejection),
// bounded in number, and reviews rate limited, so a flood of forged tokens
// costs the API server little.
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
	if r, ok := c.cache[key]; ok && now.Before(r.expires) {
		c.mu.Unlock()
		return r.id, r.err
	}
	if !c.reviews.AllowN(now, 1) {
		c.mu.Unlock()
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
			if !now.Before(r.expires) {
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

func isAnyOf(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
