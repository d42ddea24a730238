package loop

import (
	"context"
	"errors"
	"testing"
	"time"
)

// run starts a loop whose passes are reported on the returned channel.
func run(t *testing.T, s Spec) (passes <-chan int, done <-chan error, cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := make(chan int, 100)
	n := 0
	s.Pass = func(context.Context) error {
		n++
		p <- n
		return errors.New("ignored")
	}
	d := make(chan error, 1)
	go func() { d <- Run(ctx, s) }()
	t.Cleanup(stop)
	return p, d, stop
}

func next(t *testing.T, passes <-chan int, want int) {
	t.Helper()
	select {
	case got := <-passes:
		if got != want {
			t.Fatalf("pass %d, want %d", got, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no pass %d", want)
	}
}

func TestTriggers(t *testing.T) {
	wake := NewWaker()
	changes := make(chan struct{}, 1)
	woken := make(chan bool, 10)
	side := make(chan bool, 10)
	passes, done, cancel := run(t, Spec{
		Name: "test", Wake: wake, Changes: changes,
		OnWake: func() { woken <- true },
		Side:   &Side{AtStart: true, Do: func(context.Context) { side <- true }},
	})
	next(t, passes, 1) // at start
	<-side             // AtStart after the first pass
	wake.Wake()
	wake.Wake() // merges with the pending one or asks for one more
	next(t, passes, 2)
	<-woken
	changes <- struct{}{}
	next(t, passes, 3)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}

func TestDueAsksForAPass(t *testing.T) {
	calls := 0
	passes, _, cancel := run(t, Spec{Name: "test", Due: func() (time.Duration, bool) {
		calls++
		return -time.Second, calls < 3 // overdue twice, then nothing
	}})
	next(t, passes, 1)
	next(t, passes, 2)
	next(t, passes, 3)
	select {
	case n := <-passes:
		t.Fatalf("pass %d with nothing due", n)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
}

func TestBatchWaitsForTheBurstToEnd(t *testing.T) {
	changes := make(chan struct{})
	passes, _, cancel := run(t, Spec{Name: "test", Changes: changes, BatchIdle: time.Hour, BatchMax: time.Hour})
	next(t, passes, 1)
	changes <- struct{}{}
	changes <- struct{}{} // taken by the batch: the loop is still waiting
	select {
	case n := <-passes:
		t.Fatalf("pass %d before the batch ended", n)
	default:
	}
	cancel()
}

func TestWakerNeverBlocks(t *testing.T) {
	w := NewWaker()
	for range 3 {
		w.Wake()
	}
	if len(w) != 1 {
		t.Fatalf("%d wake-ups pending, want 1", len(w))
	}
}
