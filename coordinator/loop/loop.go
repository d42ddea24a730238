// Package loop runs the passes of one leader loop: a pass at start, then
// one after each trigger (a resync tick, a wake-up, a burst of cache
// events, a deadline the loop names), until the leadership term ends. Each
// loop states when it passes in a Spec instead of writing its own select.
package loop

import (
	"context"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/record"

	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// Spec says what a loop does and when.
type Spec struct {
	// Name is the loop's name in its warnings ("<Name> pass incomplete").
	Name string
	Log  *zap.Logger
	// Pass is one pass; its error is logged (unless the term ended) and
	// the loop goes on.
	Pass func(ctx context.Context) error
	// Every is the resync period: a pass at least this often (<= 0: none).
	Every time.Duration
	// Changes signals cache events. After one, the loop waits until
	// MinInterval has passed since the last pass began, or, with
	// BatchIdle set, until events stop for BatchIdle (at most BatchMax).
	Changes             <-chan struct{}
	MinInterval         time.Duration
	BatchIdle, BatchMax time.Duration
	// Wake asks for a pass now; OnWake (optional) runs on the loop's
	// goroutine when it does.
	Wake   <-chan struct{}
	OnWake func()
	// Due (optional) says, after each pass, how long until another pass
	// is due on the loop's own account (ok false: none).
	Due func() (after time.Duration, ok bool)
	// Side (optional) is periodic work between passes.
	Side *Side
}

// Side is periodic work beside the passes (garbage collection, say); a
// pass follows it.
type Side struct {
	// Every is its period (<= 0: never).
	Every time.Duration
	// AtStart also runs it once after the first pass (a new leader
	// catching up on what happened during failover).
	AtStart bool
	Do      func(ctx context.Context)
}

// Run makes passes until ctx ends and returns ctx's error.
func Run(ctx context.Context, s Spec) error {
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	tick := ticker(s.Every)
	defer tick.Stop()
	var side *time.Ticker
	if s.Side != nil {
		side = ticker(s.Side.Every)
		defer side.Stop()
	}
	queued := depth.WithLabelValues(s.Name)
	// Series at zero from the start, as controller-runtime's.
	reconcileErrors.WithLabelValues(s.Name)
	reconciles.WithLabelValues(s.Name, "success")
	reconciles.WithLabelValues(s.Name, "error")
	for first := true; ; first = false {
		last := time.Now()
		queued.Set(0)
		err := s.Pass(ctx)
		observe(s.Name, time.Since(last), err)
		if err != nil && ctx.Err() == nil {
			s.Log.Warn(s.Name+" pass incomplete", zap.Error(err))
		}
		if first && s.Side != nil && s.Side.AtStart {
			s.Side.Do(ctx)
		}
		if !s.wait(ctx, tick.C, side, last) {
			queued.Set(0)
			return ctx.Err()
		}
		queued.Set(1)
	}
}

// observe counts a pass in the controller-runtime metrics.
func observe(name string, took time.Duration, err error) {
	reconcileTime.WithLabelValues(name).Observe(took.Seconds())
	result := "success"
	if err != nil {
		result = "error"
		reconcileErrors.WithLabelValues(name).Inc()
	}
	reconciles.WithLabelValues(name, result).Inc()
}

// ticker ticks every d; one with d <= 0 never ticks.
func ticker(d time.Duration) *time.Ticker {
	if d <= 0 {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTicker(d)
}

// wait blocks until the next pass is due; false when ctx ended.
func (s Spec) wait(ctx context.Context, tick <-chan time.Time, side *time.Ticker, last time.Time) bool {
	var due <-chan time.Time
	if s.Due != nil {
		if after, ok := s.Due(); ok {
			t := time.NewTimer(max(time.Millisecond, after))
			defer t.Stop()
			due = t.C
		}
	}
	var sideC <-chan time.Time
	if side != nil {
		sideC = side.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-tick:
	case <-due:
	case <-s.Wake:
		if s.OnWake != nil {
			s.OnWake()
		}
	case <-sideC:
		s.Side.Do(ctx)
	case <-s.Changes:
		depth.WithLabelValues(s.Name).Set(1) // due once the burst settles
		return s.settle(ctx, last)
	}
	return true
}

// settle lets a burst of cache events pass before the next pass.
func (s Spec) settle(ctx context.Context, last time.Time) bool {
	if s.BatchIdle > 0 {
		return s.batch(ctx)
	}
	if wait := s.MinInterval - time.Since(last); wait > 0 && !backoff.Sleep(ctx, wait) {
		return false
	}
	select { // events during the wait are covered by the next pass
	case <-s.Changes:
	default:
	}
	return true
}

// batch waits until events stop for BatchIdle or BatchMax has passed since
// the first; false when ctx ended.
func (s Spec) batch(ctx context.Context) bool {
	limit := time.NewTimer(max(s.BatchMax, s.BatchIdle))
	defer limit.Stop()
	idle := time.NewTimer(s.BatchIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-limit.C:
			return true
		case <-idle.C:
			return true
		case <-s.Changes:
			idle.Reset(s.BatchIdle)
		}
	}
}

// Waker asks a loop for a pass (its Spec.Wake) without blocking the
// caller; wake-ups while one is pending merge into it.
type Waker chan struct{}

// NewWaker returns a Waker.
func NewWaker() Waker { return make(Waker, 1) }

// Wake asks for a pass. It never blocks.
func (w Waker) Wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Defaults fills the clock, event recorder and logger a leader loop's
// caller left unset (time.Now, a recorder that drops events, a no-op
// logger).
func Defaults(now *func() time.Time, rec *record.EventRecorder, log **zap.Logger) {
	defaults.Clock(now)
	if *rec == nil {
		*rec = &record.FakeRecorder{}
	}
	defaults.Zero(log, zap.NewNop())
}
