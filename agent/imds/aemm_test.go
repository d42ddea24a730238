package imds_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/test/poll"
	"github.com/joiner-dev/joiner/test/testenv"
)

type counter struct {
	mu     sync.Mutex
	errs   int
	oks    int
	byPath map[string]int
}

func (c *counter) PollError(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byPath == nil {
		c.byPath = map[string]int{}
	}
	c.errs++
	c.byPath[p]++
}
func (c *counter) PollOK() { c.mu.Lock(); c.oks++; c.mu.Unlock() }
func (c *counter) snapshot() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs, c.oks
}

type collector struct {
	mu sync.Mutex
	ns []imds.Notice
}

func (c *collector) add(n imds.Notice) { c.mu.Lock(); c.ns = append(c.ns, n); c.mu.Unlock() }
func (c *collector) byKind() map[imds.Kind][]imds.Notice {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[imds.Kind][]imds.Notice{}
	for _, n := range c.ns {
		out[n.Kind] = append(out[n.Kind], n)
	}
	return out
}

func startWatcher(t *testing.T, ctx context.Context, endpoint string, ttl time.Duration, obs imds.Observer) (*collector, *sync.WaitGroup) {
	t.Helper()
	// A generous read timeout: AEMM is a real process on a loaded machine.
	cl, err := imds.NewClient(imds.ClientOptions{Endpoint: endpoint, TokenTTL: ttl, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := imds.NewWatcher(cl, zaptest.NewLogger(t), imds.WatcherOptions{Interval: 250 * time.Millisecond, Observer: obs, MaxBackoff: time.Second})
	col := &collector{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(ctx, col.add)
	}()
	return col, &wg
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, d, 50*time.Millisecond, what, cond)
}

// Against AEMM in IMDSv2-only mode: every kind produces exactly one notice
// with the right deadline; a short token TTL is survived without errors.
func TestAEMMNotices(t *testing.T) {
	const ttl = 4 * time.Second
	before := time.Now()
	m := testenv.StartIMDS(t, testenv.IMDSOptions{IMDSv2Only: true, SpotDelay: 2 * time.Second, RebalanceDelay: time.Second, ASGTerminationDelay: 2 * time.Second})
	started := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	obs := &counter{}
	col, wg := startWatcher(t, ctx, m.Endpoint, ttl, obs)
	defer wg.Wait()
	defer cancel()
	waitUntil(t, time.Minute, func() bool { return len(col.byKind()) == 4 }, "a notice of every kind")
	seen := time.Now()
	// 20 more polls spanning at least two token lifetimes, however slowly
	// the machine runs them.
	_, oks0 := obs.snapshot()
	waitUntil(t, 2*time.Minute, func() bool {
		_, oks := obs.snapshot()
		return oks >= oks0+20 && time.Since(seen) > 2*ttl+time.Second
	}, "20 more polls across two token lifetimes")
	cancel()
	wg.Wait()
	ks := col.byKind()
	for _, k := range imds.Kinds {
		if len(ks[k]) != 1 {
			t.Errorf("%s: %d notices, want exactly 1: %+v", k, len(ks[k]), ks[k])
		}
	}
	spot := ks[imds.KindSpotInterruption][0]
	// AEMM's spot time is "now + 2 min" when read (between its start and
	// when the watcher saw every notice), to the second.
	if dl := spot.Deadline; dl.Before(started.Add(2*time.Minute-2*time.Second)) || dl.After(seen.Add(2*time.Minute+2*time.Second)) ||
		spot.Action != "terminate" {
		t.Errorf("spot notice %+v: deadline %s after start, want 2m after it was read", spot, spot.Deadline.Sub(started))
	}
	reb := ks[imds.KindRebalance][0]
	if !reb.Deadline.Equal(reb.NoticeTime.Add(2 * time.Minute)) {
		t.Errorf("rebalance deadline %s, want noticeTime %s + 2m", reb.Deadline, reb.NoticeTime)
	}
	sch := ks[imds.KindScheduledEvent][0]
	if !sch.Deadline.Equal(sch.NoticeTime) || sch.Action != "system-reboot" || sch.EventID == "" ||
		sch.Deadline.Before(before.Add(-2*time.Second)) || sch.Deadline.After(started.Add(2*time.Second)) {
		t.Errorf("scheduled notice %+v: want deadline = NotBefore (AEMM: its start time)", sch)
	}
	asg := ks[imds.KindASGLifecycle][0]
	if asg.Action != "Terminated" || asg.ID != asg.InstanceID+"/asg-lifecycle/Terminated" || asg.Deadline.Sub(asg.NoticeTime) != 2*time.Minute {
		t.Errorf("asg notice %+v", asg)
	}
	if errs, oks := obs.snapshot(); errs != 0 || oks < 20 {
		t.Errorf("imds errors %d (%v), ok rounds %d: want no errors across token expiries", errs, obs.byPath, oks)
	}
}

// An AEMM restart (tokens invalidated, connection refused meanwhile) is
// survived: the watcher recovers and reports nothing twice.
func TestAEMMRestart(t *testing.T) {
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, IMDSv2Only: true, SpotDelay: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	obs := &counter{}
	col, wg := startWatcher(t, ctx, m.Endpoint, time.Hour, obs)
	defer wg.Wait()
	defer cancel()
	waitUntil(t, time.Minute, func() bool { return len(col.byKind()[imds.KindSpotInterruption]) == 1 }, "the spot notice")
	m.Stop()
	waitUntil(t, time.Minute, func() bool { e, _ := obs.snapshot(); return e > 0 }, "errors while AEMM is down")
	time.Sleep(time.Second)
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	_, oksAtRestart := obs.snapshot()
	waitUntil(t, time.Minute, func() bool { _, o := obs.snapshot(); return o > oksAtRestart+3 }, "successful polls after the restart")
	// The spot notice is back (with a new time) after AEMM's spot delay:
	// poll for well past it, so a second notice would have been seen.
	_, oksNow := obs.snapshot()
	waitUntil(t, time.Minute, func() bool { _, o := obs.snapshot(); return o > oksNow+8 }, "polls past the spot delay")
	cancel()
	wg.Wait()
	if n := len(col.byKind()[imds.KindSpotInterruption]); n != 1 {
		t.Errorf("spot notices = %d across a restart, want 1", n)
	}
	errs, _ := obs.snapshot()
	t.Logf("imds errors while AEMM was down: %d", errs)
}

// A canceled scheduled event (AEMM restarted with --state canceled, as NTH's
// e2e does) produces no notice; an active instance-stop does, with
// deadline = NotBefore.
func TestAEMMScheduledEventStates(t *testing.T) {
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSEvents, IMDSv2Only: true, EventCode: "instance-stop", EventState: "canceled"})
	ctx, cancel := context.WithCancel(context.Background())
	obs := &counter{}
	col, wg := startWatcher(t, ctx, m.Endpoint, time.Hour, obs)
	waitUntil(t, time.Minute, func() bool { _, o := obs.snapshot(); return o >= 8 }, "polls of the canceled event")
	cancel()
	wg.Wait()
	if ns := col.byKind()[imds.KindScheduledEvent]; len(ns) != 0 {
		t.Fatalf("canceled event produced notices: %+v", ns)
	}
	if err := m.RestartWith(testenv.IMDSOptions{Scenario: testenv.IMDSEvents, IMDSv2Only: true, EventCode: "instance-stop", EventState: "active"}); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	col2, wg2 := startWatcher(t, ctx2, m.Endpoint, time.Hour, &counter{})
	defer wg2.Wait()
	defer cancel2()
	waitUntil(t, time.Minute, func() bool { return len(col2.byKind()[imds.KindScheduledEvent]) == 1 }, "the active event's notice")
	n := col2.byKind()[imds.KindScheduledEvent][0]
	if n.Action != "instance-stop" || !n.Deadline.Equal(n.NoticeTime) || n.EventID == "" {
		t.Errorf("notice %+v: want instance-stop with deadline = NotBefore", n)
	}
}
