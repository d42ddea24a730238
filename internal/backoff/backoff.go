// Package backoff computes retry waits and waits them out.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jittered is base*2^attempt capped at maxWait, with ±20% jitter.
func Jittered(attempt int, base, maxWait time.Duration) time.Duration {
	w := base
	for i := 0; i < attempt && w < maxWait; i++ {
		w *= 2
	}
	w = min(w, maxWait)
	return time.Duration(float64(w) * (0.8 + 0.4*rand.Float64()))
}

// Sleep waits for d or ctx; it returns false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
