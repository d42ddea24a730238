package imds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// TestWatcherBacksOffOnErrors: a path that keeps failing is read less and
// less often, up to its cap: 30 s for the paths that warn hours ahead,
// two poll intervals for spot instance-action and the ASG target lifecycle
// state, whose notices give two minutes (a spot notice must not be seen
// half a minute late because IMDS hiccuped before it).
func TestWatcherBacksOffOnErrors(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		// maxGap bounds the time between two reads (cap plus jitter plus
		// the poll tick); minReads and maxReads bound the reads in 120 s.
		maxGap             time.Duration
		minReads, maxReads int
	}{
		{kind: KindSpotInterruption, maxGap: 4 * time.Second, minReads: 30, maxReads: 120},
		{kind: KindASGLifecycle, maxGap: 4 * time.Second, minReads: 30, maxReads: 120},
		{kind: KindScheduledEvent, maxGap: 38 * time.Second, minReads: 4, maxReads: 10},
		{kind: KindRebalance, maxGap: 38 * time.Second, minReads: 4, maxReads: 10},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
			path := pathOf(tc.kind)
			g := &mapGetter{bodies: map[string]string{}, errs: map[string]error{path: errors.New("connection refused")}}
			obs := &countObs{}
			w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{
				InstanceID: "i-1", Kinds: []Kind{tc.kind}, Observer: obs,
				Now: func() time.Time { return now },
			})
			var reads []time.Time
			for range 120 {
				before := g.calls[path]
				w.Poll(context.Background())
				if g.calls[path] > before {
					reads = append(reads, now)
				}
				now = now.Add(time.Second)
			}
			if len(reads) < tc.minReads || len(reads) > tc.maxReads {
				t.Errorf("reads during 120 s of errors = %d, want %d..%d", len(reads), tc.minReads, tc.maxReads)
			}
			var longest time.Duration
			for i := 1; i < len(reads); i++ {
				longest = max(longest, reads[i].Sub(reads[i-1]))
			}
			if longest > tc.maxGap {
				t.Errorf("longest gap between reads %s, want at most %s", longest, tc.maxGap)
			}
			if obs.errs != g.calls[path] {
				t.Errorf("observed %d errors, want %d", obs.errs, g.calls[path])
			}
			// Recovery: errors clear and the path answers once its back-off ends.
			delete(g.errs, path)
			for i := 0; i < 40 && obs.oks == 0; i++ {
				w.Poll(context.Background())
				now = now.Add(time.Second)
			}
			if obs.oks == 0 {
				t.Error("no PollOK after recovery")
			}
		})
	}
}

// TestWatcherReportsEndedScheduledEvents: a scheduled event it reported
// is reported once more, Ended, when IMDS shows it canceled or completed or
// lists it no longer; one an earlier agent acted on (Expect) ends the same
// way, or is reported as new while active. Other notices never end.
func TestWatcherReportsEndedScheduledEvents(t *testing.T) {
	const (
		ev1 = `{"NotBefore":"21 Nov 2026 13:00:00 GMT","Code":"system-reboot","EventId":"ev-1","State":"%s"}`
		ev2 = `{"NotBefore":"22 Nov 2026 13:00:00 GMT","Code":"instance-stop","EventId":"ev-2","State":"active"}`
	)
	events := func(evs ...string) string { return "[" + strings.Join(evs, ",") + "]" }
	type poll struct {
		body      string // scheduled events; "-" none (404)
		spot      bool
		wantNew   []string // event IDs (spot: "spot")
		wantEnded []string
	}
	for _, tc := range []struct {
		name   string
		expect []string // event IDs of an earlier agent's notices
		polls  []poll
	}{
		{name: "canceled", polls: []poll{
			{body: events(fmt.Sprintf(ev1, "active"), ev2), wantNew: []string{"ev-1", "ev-2"}},
			{body: events(fmt.Sprintf(ev1, "active"), ev2)},
			{body: events(fmt.Sprintf(ev1, "canceled"), ev2), wantEnded: []string{"ev-1"}},
			{body: events(fmt.Sprintf(ev1, "canceled"), ev2)},
		}},
		{name: "completed", polls: []poll{
			{body: events(fmt.Sprintf(ev1, "active")), wantNew: []string{"ev-1"}},
			{body: events(fmt.Sprintf(ev1, "completed")), wantEnded: []string{"ev-1"}},
		}},
		{name: "gone from the list, then no list at all", polls: []poll{
			{body: events(fmt.Sprintf(ev1, "active"), ev2), wantNew: []string{"ev-1", "ev-2"}},
			{body: events(ev2), wantEnded: []string{"ev-1"}},
			{body: "-", wantEnded: []string{"ev-2"}},
			{body: "-"},
		}},
		{name: "spot notices never end", polls: []poll{
			{body: "[]", spot: true, wantNew: []string{"spot"}},
			{body: "[]"},
		}},
		{name: "expected and over", expect: []string{"ev-1", "ev-9"}, polls: []poll{
			{body: events(fmt.Sprintf(ev1, "completed"), ev2), wantNew: []string{"ev-2"}, wantEnded: []string{"ev-1", "ev-9"}},
			{body: events(ev2)},
		}},
		{name: "expected and still active", expect: []string{"ev-2"}, polls: []poll{
			{body: events(ev2), wantNew: []string{"ev-2"}},
			{body: "[]", wantEnded: []string{"ev-2"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &mapGetter{bodies: map[string]string{}}
			w := NewWatcher(g, zaptest.NewLogger(t), WatcherOptions{InstanceID: "i-1", Kinds: []Kind{KindSpotInterruption, KindScheduledEvent}})
			for _, id := range tc.expect {
				w.Expect(Notice{ID: "i-1/scheduled-event/x-" + id, Kind: KindScheduledEvent, EventID: id},
					Notice{ID: "i-1/spot-interruption/x", Kind: KindSpotInterruption})
			}
			for i, p := range tc.polls {
				delete(g.bodies, PathScheduledEvents)
				if p.body != "-" {
					g.bodies[PathScheduledEvents] = p.body
				}
				delete(g.bodies, PathSpotInstanceAction)
				if p.spot {
					g.bodies[PathSpotInstanceAction] = `{"action":"terminate","time":"2026-11-21T12:02:00Z"}`
				}
				var gotNew, gotEnded []string
				for _, n := range w.Poll(context.Background()) {
					id := n.EventID
					if n.Kind == KindSpotInterruption {
						id = "spot"
					}
					if n.Ended {
						gotEnded = append(gotEnded, id)
					} else {
						gotNew = append(gotNew, id)
					}
				}
				slices.Sort(gotNew)
				slices.Sort(gotEnded)
				if !slices.Equal(gotNew, p.wantNew) || !slices.Equal(gotEnded, p.wantEnded) {
					t.Errorf("poll %d: new %v ended %v, want new %v ended %v", i, gotNew, gotEnded, p.wantNew, p.wantEnded)
				}
			}
		})
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
