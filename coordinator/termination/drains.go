package termination

import (
	"context"
	"sync"
	"time"
)

// retryAfter is how long a drain that ended without draining waits before
// it is started again.
const retryAfter = 2 * time.Second

// drains runs the drains of one leadership term: at most one per key, at
// most max at once, each cancelled with the term's context. The loop owns
// it and waits for every drain before Run returns.
type drains struct {
	sem  chan struct{}
	done func() // called after each drain ends (wakes the loop)

	mu      sync.Mutex
	running map[string]bool
	ended   map[string]time.Time
	wg      sync.WaitGroup
}

func newDrains(max int, done func()) *drains {
	return &drains{sem: make(chan struct{}, max), done: done, running: map[string]bool{}, ended: map[string]time.Time{}}
}

// start runs fn for key unless a drain of key is running or ended less
// than retryAfter ago. It reports whether it started one.
func (d *drains) start(ctx context.Context, key string, fn func(context.Context)) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running[key] || time.Since(d.ended[key]) < retryAfter {
		return false
	}
	d.running[key] = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.done()
		defer func() {
			d.mu.Lock()
			delete(d.running, key)
			d.ended[key] = time.Now()
			d.mu.Unlock()
		}()
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-d.sem }()
		fn(ctx)
	}()
	return true
}

// forget drops the bookkeeping of ended drains whose object is gone.
func (d *drains) forget(keep map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.ended {
		if !keep[k] {
			delete(d.ended, k)
		}
	}
}

// wait blocks until every drain has returned.
func (d *drains) wait() { d.wg.Wait() }
