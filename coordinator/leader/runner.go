package leader

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

// Loop is one duty of the leader: Run works until ctx (the leadership
// term) ends.
type Loop struct {
	Name string
	Run  func(ctx context.Context) error
}

// runner runs loops under one policy: a loop that returns before its term
// ends is logged, counted and restarted after an exponential backoff
// (1 s doubling to 1 min), so one failing loop does not stop the others.
type runner struct {
	log      *zap.Logger
	restarts *prometheus.CounterVec
	running  *prometheus.GaugeVec
	// backoff is the restart policy (a copy is used per loop).
	backoff wait.Backoff
}

func newRunner(reg prometheus.Registerer, log *zap.Logger) (*runner, error) {
	r := &runner{log: log,
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_leader_loop_restarts_total",
			Help: "Leader loops that stopped before their term ended and were restarted, by loop."}, []string{"loop"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "joiner_leader_loop_running",
			Help: "1 while a leader loop runs on this replica, by loop."}, []string{"loop"}),
		backoff: wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute},
	}
	if err := telemetry.Register(reg, "leader", r.restarts, r.running); err != nil {
		return nil, err
	}
	return r, nil
}

// start runs l on its own goroutine until ctx ends; the WaitGroup counts it.
func (r *runner) start(ctx context.Context, wg *sync.WaitGroup, l Loop) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.run(ctx, l)
	}()
}

func (r *runner) run(ctx context.Context, l Loop) {
	ctx = karpmetrics.WithController(ctx, l.Name)
	r.running.WithLabelValues(l.Name).Set(1)
	defer r.running.WithLabelValues(l.Name).Set(0)
	backoff := r.backoff
	for ctx.Err() == nil {
		started := time.Now()
		err := l.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > backoff.Cap {
			backoff = r.backoff // it ran fine for a while: start the backoff over
		}
		pause := backoff.Step()
		r.restarts.WithLabelValues(l.Name).Inc()
		r.log.Error("leader loop stopped, restarting", zap.String("loop", l.Name), zap.Error(err), zap.Duration("after", pause))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
