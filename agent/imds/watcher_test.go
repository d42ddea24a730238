package imds

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// mapGetter is a Getter over a map; missing paths are 404; errs forces errors.
type mapGetter struct {
	mu     sync.Mutex
	bodies map[string]string
	errs   map[string]error
	calls  map[string]int
}

func (m *mapGetter) Get(_ context.Context, path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[path]++
	if err := m.errs[path]; err != nil {
		return nil, err
	}
	b, ok := m.bodies[path]
	if !ok {
		return nil, ErrNotFound
	}
	return []byte(b), nil
}

type countObs struct{ errs, oks int }

func (c *countObs) PollError(string) { c.errs++ }
func (c *countObs) PollOK()          { c.oks++ }

func TestWatcherNotices(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	g := &mapGetter{bodies: map[string]string{PathInstanceID: "i-1"}, errs: map[string]error{}}
	w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{Now: func() time.Time { return now }})
	if _, err := w.ResolveInstanceID(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ns := w.Poll(context.Background()); len(ns) != 0 {
		t.Fatalf("no notices in IMDS, got %v", ns)
	}
	g.bodies[PathSpotInstanceAction] = `{"action":"terminate","time":"2026-11-21T12:02:00Z"}`
	g.bodies[PathRebalance] = `{"noticeTime":"2026-11-21T11:59:00Z"}`
	g.bodies[PathScheduledEvents] = `[{"NotBefore":"21 Nov 2026 13:00:00 GMT","Code":"system-reboot","EventId":"ev-1","State":"active"},
	  {"NotBefore":"21 Nov 2026 14:00:00 GMT","Code":"instance-stop","EventId":"ev-2","State":"canceled"}]`
	g.bodies[PathLifecycleState] = "InService"
	ns := w.Poll(context.Background())
	want := map[string]time.Time{
		"i-1/spot-interruption/2026-11-21T12:02:00Z":        time.Date(2026, 11, 21, 12, 2, 0, 0, time.UTC),
		"i-1/rebalance-recommendation/2026-11-21T11:59:00Z": time.Date(2026, 11, 21, 12, 1, 0, 0, time.UTC),
		"i-1/scheduled-event/2026-11-21T13:00:00Z":          time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC),
	}
	if len(ns) != len(want) {
		t.Fatalf("got %d notices %+v, want %d", len(ns), ns, len(want))
	}
	for _, n := range ns {
		d, ok := want[n.ID]
		if !ok || !n.Deadline.Equal(d) {
			t.Errorf("notice %s deadline %s: want one of %v", n.ID, n.Deadline, want)
		}
	}
	// Repeats are not reported again; ASG Terminated is new.
	g.bodies[PathLifecycleState] = "Terminated"
	ns = w.Poll(context.Background())
	if len(ns) != 1 || ns[0].Kind != KindASGLifecycle || ns[0].ID != "i-1/asg-lifecycle/Terminated" || !ns[0].Deadline.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("second poll: %+v, want only the ASG notice", ns)
	}
	if ns := w.Poll(context.Background()); len(ns) != 0 {
		t.Fatalf("third poll: %+v, want none", ns)
	}
}

func TestWatcherBacksOffOnErrors(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	g := &mapGetter{bodies: map[string]string{}, errs: map[string]error{PathSpotInstanceAction: errors.New("connection refused")}}
	obs := &countObs{}
	w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{
		InstanceID: "i-1", Kinds: []Kind{KindSpotInterruption}, Observer: obs,
		Now: func() time.Time { return now },
	})
	for i := 0; i < 20; i++ {
		w.Poll(context.Background())
		now = now.Add(time.Second)
	}
	// 1 s, 2 s, 4 s, 8 s ... back-off: far fewer than 20 reads in 20 s.
	if c := g.calls[PathSpotInstanceAction]; c < 3 || c > 7 {
		t.Errorf("reads during 20 s of errors = %d, want back-off (3..7)", c)
	}
	if obs.errs != g.calls[PathSpotInstanceAction] {
		t.Errorf("observed %d errors, want %d", obs.errs, g.calls[PathSpotInstanceAction])
	}
	// Recovery: errors clear and a notice shows up once its back-off ends.
	delete(g.errs, PathSpotInstanceAction)
	g.bodies[PathSpotInstanceAction] = `{"action":"terminate","time":"2026-11-21T12:02:00Z"}`
	var got []Notice
	for i := 0; i < 40 && len(got) == 0; i++ {
		got = w.Poll(context.Background())
		now = now.Add(time.Second)
	}
	if len(got) != 1 {
		t.Fatalf("after recovery got %v, want one notice", got)
	}
	if obs.oks == 0 {
		t.Error("no PollOK after recovery")
	}
}

func TestWatcherGarbageIsAnError(t *testing.T) {
	g := &mapGetter{bodies: map[string]string{PathSpotInstanceAction: "<html>oops</html>"}}
	obs := &countObs{}
	w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{InstanceID: "i-1", Kinds: []Kind{KindSpotInterruption}, Observer: obs})
	if ns := w.Poll(context.Background()); len(ns) != 0 || obs.errs != 1 {
		t.Fatalf("garbage body: notices %v, errors %d; want none and 1", ns, obs.errs)
	}
}

// AEMM recomputes the spot time on every read; the first sighting wins.
func TestWatcherSpotTimeDrift(t *testing.T) {
	g := &mapGetter{bodies: map[string]string{PathSpotInstanceAction: `{"action":"terminate","time":"2026-11-21T12:02:00Z"}`}}
	w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{InstanceID: "i-1", Kinds: []Kind{KindSpotInterruption}})
	first := w.Poll(context.Background())
	g.bodies[PathSpotInstanceAction] = `{"action":"terminate","time":"2026-11-21T12:02:01Z"}`
	again := w.Poll(context.Background())
	if len(first) != 1 || len(again) != 0 || first[0].ID != "i-1/spot-interruption/2026-11-21T12:02:00Z" {
		t.Fatalf("first %v, again %v: want one notice with the first time", first, again)
	}
}
