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
	// their own (a Job) before the grace period.
	retryLeft = 15 * time.Second
)

// drains runs the drains of one leadership term: at most one per key, at
// most max at once, each cancelled with the term's context or when its
// object goes away. The loop owns it and waits for every drain before Run
// returns.
type drains struct {
	sem  chan struct{}
	done func() // called after each drain ends (wakes the loop)

	mu        sync.Mutex
	running   map[string]context.CancelFunc
	notBefore map[string]time.Time
	wg        sync.WaitGroup
}

func newDrains(max int, done func()) *drains {
	return &drains{sem: make(chan struct{}, max), done: done, running: map[string]context.CancelFunc{}, notBefore: map[string]time.Time{}}
}

// start runs fn for key unless a drain of key is running or the last one
// asked for a pause that has not passed. fn returns the pause before a new
// drain of key may start. start reports whether it started one.
func (d *drains) start(ctx context.Context, key string, fn func(context.Context) time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.running[key]; ok || time.Now().Before(d.notBefore[key]) {
		return false
	}
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
			d.notBefore[key] = time.Now().Add(pause)
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
}

// wait blocks until every drain has returned.
func (d *drains) wait() { d.wg.Wait() }
