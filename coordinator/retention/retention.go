// Package retention keeps the replicated state bounded: while it leads, a
// coordinator proposes fsm.Prune every Interval with a cutoff of its clock
// minus Retention, so handled interruption reports, finished launch
// intents (and their gone instances) and finished termination intents
// leave the FSM once they are older than the retention period. The FSM
// decides what goes, deterministically, from the cutoff in the entry;
// nothing in flight is ever removed.
//
// It also surfaces what the FSM rejects: every replica logs each entry its
// FSM refuses as invalid and exports the count
// (joiner_fsm_rejected_entries_total); the FSM itself logs nothing.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

// DefaultRetention is how long finished records are kept by default.
const DefaultRetention = time.Hour

// State is the FSM (fsm.FSM).
type State interface {
	Prunable(cutoff time.Time) fsm.PruneStats
	Rejected() uint64
}

// Config configures a Pruner.
type Config struct {
	// Retention is how long a finished record is kept; 0 keeps them
	// forever (no prune is proposed). Negative is an error.
	Retention time.Duration
	// Interval between prunes (default Retention/4, between 1 s and 5 min).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Deps are the Pruner's collaborators.
type Deps struct {
	State State
	Raft  fsm.Proposer
	// Registerer may be nil (no metrics).
	Registerer prometheus.Registerer
	Log        *zap.Logger
}

// Pruner is the retention leader loop.
type Pruner struct {
	cfg    Config
	d      Deps
	log    *zap.Logger
	pruned *prometheus.CounterVec
}

// New builds a Pruner, registers its metrics and sets the FSM's reject
// hook to log (build it once per process: every replica applies, so every
// replica logs its rejections, leader or not).
func New(cfg Config, d Deps) (*Pruner, error) {
	if cfg.Retention < 0 {
		return nil, fmt.Errorf("state retention %s: want >= 0 (0 keeps finished records forever)", cfg.Retention)
	}
	defaults.Positive(&cfg.Interval, min(max(cfg.Retention/4, time.Second), 5*time.Minute))
	defaults.Clock(&cfg.Now)
	defaults.Zero(&d.Log, zap.NewNop())
	if d.State == nil || d.Raft == nil {
		return nil, errors.New("retention: State and Raft are required")
	}
	p := &Pruner{cfg: cfg, d: d, log: d.Log.Named("retention"),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_state_pruned_total",
			Help: "Finished records this replica's prunes removed from the replicated state while it led, by table."}, []string{"table"}),
	}
	rejected := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "joiner_fsm_rejected_entries_total",
		Help: "Raft entries this replica's FSM rejected as invalid (empty, unknown type, undecodable, invalid fields) since it started."},
		func() float64 { return float64(d.State.Rejected()) })
	if err := telemetry.Register(d.Registerer, "retention", p.pruned, rejected); err != nil {
		return nil, err
	}
	return p, nil
}

// Run prunes every Interval until ctx (the leadership term) ends.
func (p *Pruner) Run(ctx context.Context) error {
	if p.cfg.Retention == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("pruning finished records", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Prune proposes one fsm.Prune when the FSM has something older than the
// cutoff to remove, and returns what it expected to remove (nothing
// proposed: zero).
func (p *Pruner) Prune(ctx context.Context) (fsm.PruneStats, error) {
	if p.cfg.Retention == 0 {
		return fsm.PruneStats{}, nil
	}
	cutoff := p.cfg.Now().Add(-p.cfg.Retention).UTC()
	want := p.d.State.Prunable(cutoff)
	if want.Total() == 0 {
		return want, nil
	}
	// Flagged ignorable: a replica older than the prune command skips it.
	if err := fsm.Propose(ctx, p.d.Raft, fsm.PruneType|fsm.IgnoreUnknownTypeFlag, fsm.Prune{Cutoff: cutoff}); err != nil {
		return fsm.PruneStats{}, fmt.Errorf("proposing prune before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	for table, n := range map[string]int{"interruptions": want.Reports, "intents": want.Intents,
		"instances": want.Instances, "terminations": want.Terminations} {
		p.pruned.WithLabelValues(table).Add(float64(n))
	}
	p.log.Info("pruned finished records", zap.Time("cutoff", cutoff), zap.Int("reports", want.Reports),
		zap.Int("intents", want.Intents), zap.Int("instances", want.Instances), zap.Int("terminations", want.Terminations))
	return want, nil
}
