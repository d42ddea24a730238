package termination

import (
	"context"
	"sync"
	"time"
)

// Pauses before a drain that ended without draining the node is started
// again.
const (
	// retryFailed: the drain failed (API errors, its deadline passed).
	retryFailed = 2 * time.Second
	// retryLeft: only do-not-disrupt pods are left; they may finish on
	// their own (a Job) before the grace period. Shorter when a pod is
	// due for deletion before (drain.Result.NextDelete).
	retryLeft = 15 * time.Second
	// retryMinDrain: the drain found nothing left, but started before
	// MinDrainTime had passed since the taint; at most this long until the
	// next one (Karpenter requeues after a second).
	retryMinDrain = time.Second
)

// drains runs the drains of one leadership term: at most one per key, at
// most max at once, each cancelled with the term's context or when its
// object goes away. The loop owns it and waits for every drain before Run
// returns. A drain that asks for a pause wakes the loop again once the
// pause is over.
type drains struct {
	sem  chan struct{}
	now  func() time.Time // the controller's clock (Config.Now)
	done func()           // called after each drain ends and its pause (wakes the loop)

	mu        sync.Mutex
	running   map[string]context.CancelFunc
	notBefore map[string]time.Time
	timers    map[string]*time.Timer
	wg        sync.WaitGroup
}

func newDrains(now func() time.Time, max int, done func()) *drains {
	return &drains{sem: make(chan struct{}, max), now: now, done: done, running: map[string]context.CancelFunc{},
		notBefore: map[string]time.Time{}, timers: map[string]*time.Timer{}}
}

// start runs fn for key unless a drain of key is running or the last one
// asked for a pause that has not passed. fn returns the pause before a new
// drain of key may start. start reports whether it started one.
func (d *drains) start(ctx context.Context, key string, fn func(context.Context) time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.running[key]; ok || d.now().Before(d.notBefore[key]) {
		return false
	}
	term := ctx
	ctx, cancel := context.WithCancel(ctx)
	d.running[key] = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.done()
		pause := time.Duration(0)
		defer func() {
			cancel()
			d.mu.Lock()
			delete(d.running, key)
			d.notBefore[key] = d.now().Add(pause)
			if t := d.timers[key]; t != nil {
				t.Stop()
				delete(d.timers, key)
			}
			if pause > 0 && term.Err() == nil {
				d.timers[key] = time.AfterFunc(pause, d.done)
			}
			d.mu.Unlock()
		}()
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-d.sem }()
		pause = fn(ctx)
	}()
	return true
}

// forget cancels the drains of objects no longer in keep and drops their
// bookkeeping.
func (d *drains) forget(keep map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, cancel := range d.running {
		if !keep[k] {
			cancel()
		}
	}
	for k := range d.notBefore {
		if !keep[k] {
			delete(d.notBefore, k)
		}
	}
	for k, t := range d.timers {
		if !keep[k] {
			t.Stop()
			delete(d.timers, k)
		}
	}
}

// wait blocks until every drain has returned.
func (d *drains) wait() { d.wg.Wait() }

// stop ends the wake-ups still to come (the term is over).
func (d *drains) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, t := range d.timers {
		t.Stop()
		delete(d.timers, k)
	}
}
