package interruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Queue is the interruption queue (cloud/aws.Queue): the SQS queue
// EventBridge rules send EC2 and AWS Health events to, read as parsed
// messages.
type Queue interface {
	// Receive waits (long-polls) for messages; a message received is
	// hidden from the next receives for a while, and comes back unless
	// deleted.
	Receive(ctx context.Context) ([]cloud.InterruptionMessage, error)
	// Delete deletes a received message by its receipt handle.
	Delete(ctx context.Context, receipt string) error
}

// kindOfEvent maps the queue's event kinds to report kinds (the agent's
// where they mean the same notice).
var kindOfEvent = map[cloud.InterruptionKind]string{
	cloud.InterruptionSpot:                KindSpotInterruption,
	cloud.InterruptionRebalance:           KindRebalance,
	cloud.InterruptionCapacityReservation: KindCapacityReservation,
	cloud.InterruptionScheduledChange:     KindScheduledEvent,
	cloud.InterruptionStopped:             KindInstanceStopping,
	cloud.InterruptionTerminated:          KindInstanceTerminating,
}

// QueueConfig configures a QueueLoop.
type QueueConfig struct {
	// MaxBackoff caps the wait after failed receives, which doubles from
	// one second (default 1 min).
	MaxBackoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnCommit (optional) runs after a pass committed reports (wake the
	// Handler).
	OnCommit func()
}

// QueueDeps are the queue loop's collaborators.
type QueueDeps struct {
	Queue Queue
	Cache Cache
	State State
	Raft  fsm.Proposer
	// Registerer may be nil (no metrics).
	Registerer prometheus.Registerer
	Log        *zap.Logger
}

// QueueLoop is the leader loop that consumes the interruption queue, as
// Karpenter's interruption controller does: it receives messages (up to 10
// at a time, long polling), turns each event about an instance Joiner
// knows into the interruption report an agent would commit, and deletes a
// message only once its reports are committed, so a leader that fails in
// between leaves the message to come back to the next one. The Handler
// acts on the reports; nodes without an agent (Windows, stock AMIs) are
// handled through the queue alone. A message about an instance Joiner
// does not know (the queue receives the whole account's events), a no-op
// and a body that does not parse are deleted without a report.
type QueueLoop struct {
	cfg     QueueConfig
	d       QueueDeps
	log     *zap.Logger
	metrics *queueMetrics

	// backoff is the wait before the next receive (0: at once); the
	// loop's goroutine alone touches it.
	backoff time.Duration
}

// NewQueueLoop builds a QueueLoop.
func NewQueueLoop(cfg QueueConfig, d QueueDeps) (*QueueLoop, error) {
	if d.Queue == nil {
		return nil, errors.New("interruption queue loop: a queue is required")
	}
	defaults.Positive(&cfg.MaxBackoff, time.Minute)
	defaults.Clock(&cfg.Now)
	defaults.Zero(&d.Log, zap.NewNop())
	m, err := newQueueMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	return &QueueLoop{cfg: cfg, d: d, log: d.Log.Named("interruption-queue"), metrics: m}, nil
}

// Run polls the queue until ctx ends: the next receive follows each pass
// at once (the receive itself waits for messages), after failures with a
// doubling back-off.
func (q *QueueLoop) Run(ctx context.Context) error {
	return loop.Run(ctx, loop.Spec{Name: "interruption queue", Log: q.log, Pass: q.Poll,
		Due: func() (time.Duration, bool) { return q.backoff, true }})
}

// minBackoff is the first wait after a failed receive, and the least
// time between two receives that got nothing.
const minBackoff = time.Second

// Poll receives once and handles what it got. A message whose reports
// could not all be committed stays in the queue (it comes back after its
// visibility timeout); the error names the first such message.
func (q *QueueLoop) Poll(ctx context.Context) error {
	start := time.Now()
	msgs, err := q.d.Queue.Receive(ctx)
	if err != nil {
		q.backoff = min(max(2*q.backoff, minBackoff), q.cfg.MaxBackoff)
		return err
	}
	q.backoff = 0
	if len(msgs) == 0 {
		// A receive that long-polled waited already; one that came back
		// empty at once is not repeated in a tight loop.
		q.backoff = max(0, minBackoff-time.Since(start))
	}
	var first error
	committed := false
	for _, m := range msgs {
		n, err := q.handle(ctx, m)
		committed = committed || n > 0
		if err != nil && first == nil {
			first = fmt.Errorf("interruption message %s: %w", m.ID, err)
		}
	}
	if committed && q.cfg.OnCommit != nil {
		q.cfg.OnCommit()
	}
	return first
}

// handle commits a message's reports, then deletes it; it returns how
// many reports it committed.
func (q *QueueLoop) handle(ctx context.Context, m cloud.InterruptionMessage) (int, error) {
	log := q.log.With(zap.String("message-id", m.ID), zap.String("event-id", m.EventID), zap.String("message-type", string(m.Kind)))
	if m.Err != nil {
		log.Error("interruption message does not parse; deleting it", zap.Error(m.Err))
		return 0, q.delete(ctx, m)
	}
	q.metrics.received.WithLabelValues(string(m.Kind)).Inc()
	n := 0
	for _, ev := range m.Events {
		ok, err := q.commit(ctx, log, m, ev)
		if err != nil {
			return n, fmt.Errorf("instance %s: %w", ev.InstanceID, err)
		}
		if ok {
			n++
		}
	}
	if !m.Time.IsZero() {
		q.metrics.latency.Observe(max(0, q.cfg.Now().Sub(m.Time).Seconds()))
	}
	return n, q.delete(ctx, m)
}

// commit commits the report of one event; false when none was needed:
// the instance is not Joiner's, or a report of the same instance and kind
// (its agent's, or an earlier message's) is committed already. A report
// the FSM refuses as invalid is logged and dropped, as a body that does
// not parse is.
func (q *QueueLoop) commit(ctx context.Context, log *zap.Logger, m cloud.InterruptionMessage, ev cloud.InterruptionEvent) (bool, error) {
	log = log.With(zap.String(logging.KeyInstance, ev.InstanceID))
	kind, ok := kindOfEvent[ev.Kind]
	if !ok {
		return false, nil
	}
	if _, known := q.d.State.Instance(ev.InstanceID); !known && findClaim(q.d.Cache, q.d.State, ev.InstanceID) == nil {
		log.Debug("interruption event for an instance that is not Joiner's; ignored")
		return false, nil
	}
	for _, r := range q.d.State.Interruptions() {
		if r.InstanceID == ev.InstanceID && r.Kind == kind {
			log.Info("interruption event already reported for this instance and kind", zap.String(logging.KeyNotice, r.ID))
			return false, nil
		}
	}
	id := m.EventID
	if id == "" {
		id = m.ID
	}
	rep := fsm.InterruptionReport{ID: ev.InstanceID + "/" + kind + "/event/" + id, InstanceID: ev.InstanceID, Kind: kind,
		NoticeTime: ev.Time, Deadline: ev.Deadline, ReceivedAt: q.cfg.Now().UTC()}
	err := fsm.Propose(ctx, q.d.Raft, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: rep})
	if errors.Is(err, fsm.ErrInvalidCommand) {
		log.Error("interruption event makes an invalid report; dropped", zap.Error(err))
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("committing interruption report %s: %w", rep.ID, err)
	}
	log.Info("committed interruption report from the queue", zap.String(logging.KeyNotice, rep.ID), zap.String("kind", kind),
		zap.String("detail", ev.Detail))
	return true, nil
}

// delete deletes a message from the queue.
func (q *QueueLoop) delete(ctx context.Context, m cloud.InterruptionMessage) error {
	if err := q.d.Queue.Delete(ctx, m.Receipt); err != nil {
		return err
	}
	q.metrics.deleted.Inc()
	return nil
}
