// Package backoff is Joiner's one retry schedule, an apimachinery
// wait.Backoff, and a wait that ends with its context.
package backoff

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Jitter is the most a wait is stretched at random (20 %), so that replicas
// retrying the same thing spread out.
const Jitter = 0.2

// New is the schedule base, 2×base, 4×base ... capped at maxWait, each wait
// then stretched by up to Jitter (so a wait may reach 1.2×maxWait); it never
// runs out of steps. Call Step for the
// next wait; start over with a fresh New after a success.
func New(base, maxWait time.Duration) wait.Backoff {
	return wait.Backoff{Duration: base, Factor: 2, Jitter: Jitter, Steps: math.MaxInt32, Cap: maxWait}
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
