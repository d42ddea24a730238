package retention

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func handledReport(t *testing.T, d *fsmtest.Direct, id string, at time.Time) {
	t.Helper()
	d.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: id, InstanceID: "i-1", Kind: "spot"}})
	d.MustPropose(t, fsm.InterruptionHandledType, fsm.InterruptionHandled{ReportID: id, At: at})
}

// TestPrune: a prune is proposed only when something is older than now
// minus the retention, flagged ignorable, and removes just that.
func TestPrune(t *testing.T) {
	state := fsm.New()
	d := fsmtest.New(state)
	now := t0
	reg := prometheus.NewRegistry()
	p, err := New(Config{Retention: time.Hour, Now: func() time.Time { return now }}, Deps{State: state, Raft: d, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	handledReport(t, d, "old", t0)
	handledReport(t, d, "new", t0.Add(30*time.Minute))
	d.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: "open", InstanceID: "i-2", Kind: "spot"}})

	steps := []struct {
		now      time.Time
		want     fsm.PruneStats
		proposed bool
		left     int
	}{
		{t0.Add(59 * time.Minute), fsm.PruneStats{}, false, 3},
		{t0.Add(61 * time.Minute), fsm.PruneStats{Reports: 1}, true, 2},
		{t0.Add(80 * time.Minute), fsm.PruneStats{}, false, 2},
		{t0.Add(91 * time.Minute), fsm.PruneStats{Reports: 1}, true, 1},
		{t0.Add(100 * time.Hour), fsm.PruneStats{}, false, 1}, // the unhandled report stays
	}
	for i, s := range steps {
		now = s.now
		before := d.Count()
		got, err := p.Prune(context.Background())
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got != s.want || (d.Count() > before) != s.proposed || len(state.Interruptions()) != s.left {
			t.Fatalf("step %d: pruned %+v (proposed %v), %d reports left; want %+v (%v), %d",
				i, got, d.Count() > before, len(state.Interruptions()), s.want, s.proposed, s.left)
		}
		if s.proposed {
			if typ := d.Types()[d.Count()-1]; typ != fsm.PruneType|fsm.IgnoreUnknownTypeFlag {
				t.Fatalf("step %d: proposed %s, want an ignorable prune", i, typ)
			}
		}
	}
	if n := testutil.ToFloat64(p.pruned.WithLabelValues("interruptions")); n != 2 {
		t.Fatalf("pruned interruptions metric %v, want 2", n)
	}
}

func TestRetentionZeroKeepsEverything(t *testing.T) {
	state := fsm.New()
	d := fsmtest.New(state)
	p, err := New(Config{Now: func() time.Time { return t0.Add(1000 * time.Hour) }}, Deps{State: state, Raft: d})
	if err != nil {
		t.Fatal(err)
	}
	handledReport(t, d, "old", t0)
	before := d.Count()
	if got, err := p.Prune(context.Background()); err != nil || got.Total() != 0 || d.Count() != before {
		t.Fatalf("retention 0 pruned %+v, %v", got, err)
	}
	if _, err := New(Config{Retention: -time.Second}, Deps{State: state, Raft: d}); err == nil {
		t.Fatal("negative retention accepted")
	}
}

// TestRejectedEntriesCounted: the metric counts the entries the FSM
// rejects (the coordinator's wiring logs each through fsm.OnReject).
func TestRejectedEntriesCounted(t *testing.T) {
	state := fsm.New()
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Retention: time.Hour}, Deps{State: state, Raft: fsmtest.New(state), Registerer: reg, Log: zap.NewNop()}); err != nil {
		t.Fatal(err)
	}
	var hooked []string
	state.OnReject(func(index uint64, _ fsm.MessageType, err error) { hooked = append(hooked, err.Error()) })
	state.ApplyCommand([]byte{100, '{', '}'}, 7)
	state.ApplyCommand(nil, 8)
	if len(hooked) != 2 || !strings.Contains(hooked[0], "raft entry 7 (type-100)") {
		t.Fatalf("hook saw %v", hooked)
	}
	n, err := testutil.GatherAndCount(reg, "joiner_fsm_rejected_entries_total")
	if err != nil || n != 1 {
		t.Fatalf("metric: %d series, %v", n, err)
	}
	if v := state.Rejected(); v != 2 {
		t.Fatalf("rejected %d, want 2", v)
	}
}

// TestRunStopsWithTheTerm: Run prunes at once and returns when ctx ends.
func TestRunStopsWithTheTerm(t *testing.T) {
	state := fsm.New()
	d := fsmtest.New(state)
	handledReport(t, d, "old", t0)
	p, err := New(Config{Retention: time.Hour, Interval: time.Hour, Now: func() time.Time { return t0.Add(2 * time.Hour) }},
		Deps{State: state, Raft: d})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for len(state.Interruptions()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not prune")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}
