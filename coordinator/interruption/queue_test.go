package interruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/observe"
)

// fakeQueue hands out its batches one receive at a time and records
// deletions.
type fakeQueue struct {
	mu      sync.Mutex
	batches [][]cloud.InterruptionMessage
	errs    []error // returned by the next receives, before any batch
	deleted []string
}

func (f *fakeQueue) Receive(context.Context) ([]cloud.InterruptionMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	if len(f.batches) == 0 {
		return nil, nil
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, nil
}

func (f *fakeQueue) Delete(_ context.Context, receipt string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, receipt)
	return nil
}

// offeringsSpy records the offerings and reservations marked unavailable.
type offeringsSpy struct {
	mu           sync.Mutex
	marked       []cloud.OfferingKey
	reservations []string
}

func (o *offeringsSpy) MarkReservationUnavailable(id, _ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reservations = append(o.reservations, id)
}

func (o *offeringsSpy) MarkUnavailable(k cloud.OfferingKey, _ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.marked = append(o.marked, k)
}

// failingRaft refuses proposals while fail is set.
type failingRaft struct {
	fsm.Proposer
	fail bool
}

func (f *failingRaft) Propose(ctx context.Context, cmd []byte) (any, error) {
	if f.fail {
		return nil, errors.New("no quorum")
	}
	return f.Proposer.Propose(ctx, cmd)
}

// message is a queue message about one instance.
func message(id string, kind cloud.InterruptionKind, instance string) cloud.InterruptionMessage {
	return cloud.InterruptionMessage{ID: "m-" + id, Receipt: "r-" + id, EventID: "e-" + id, Kind: kind, Time: t0,
		Events: []cloud.InterruptionEvent{{InstanceID: instance, Kind: kind, Time: t0, Deadline: t0.Add(2 * time.Minute)}}}
}

// queueRig is the handler rig with a queue loop beside it and an
// offerings spy behind the handler.
func newQueueRig(t *testing.T, batches ...[]cloud.InterruptionMessage) (*rig, *QueueLoop, *fakeQueue, *offeringsSpy, *failingRaft) {
	r := newRig(t, false)
	spy := &offeringsSpy{}
	h, err := New(Config{Now: func() time.Time { return t0.Add(time.Minute) }}, Deps{Cache: r.claims, Claims: r.claims,
		State: r.state, Raft: r.raft, Offerings: spy, Registerer: prometheus.NewRegistry(), Recorder: r.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	fq := &fakeQueue{batches: batches}
	raft := &failingRaft{Proposer: r.raft}
	q, err := NewQueueLoop(QueueConfig{Now: func() time.Time { return t0.Add(5 * time.Second) }}, QueueDeps{Queue: fq,
		Cache: r.claims, State: r.state, Raft: raft, Registerer: prometheus.NewRegistry(), Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return r, q, fq, spy, raft
}

// countEvents counts the Events of a reason among evs.
func countEvents(evs []string, reason string) int {
	n := 0
	for _, e := range evs {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// TestQueueMessagesBecomeReports: each event about a known instance
// becomes the report an agent would commit; events about other
// instances, repeats of a committed notice, no-ops and bodies that did
// not parse commit nothing; every message is deleted once handled.
func TestQueueMessagesBecomeReports(t *testing.T) {
	bad := cloud.InterruptionMessage{ID: "m-bad", Receipt: "r-bad", Kind: cloud.InterruptionNoOp, Err: errors.New("not JSON")}
	noop := cloud.InterruptionMessage{ID: "m-noop", Receipt: "r-noop", Kind: cloud.InterruptionNoOp, Time: t0}
	r, q, fq, spy, _ := newQueueRig(t, []cloud.InterruptionMessage{
		message("spot", cloud.InterruptionSpot, "i-1"),
		message("other", cloud.InterruptionSpot, "i-not-joiners"),
		bad, noop,
		message("rebalance", cloud.InterruptionRebalance, "i-1"),
		message("again", cloud.InterruptionSpot, "i-1"),
	})
	woke := 0
	q.cfg.OnCommit = func() { woke++ }
	if err := q.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, rep := range r.state.Interruptions() {
		ids = append(ids, rep.ID+"="+rep.Kind)
	}
	want := "i-1/rebalance-recommendation/event/e-rebalance=rebalance-recommendation i-1/spot-interruption/event/e-spot=spot-interruption"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("reports %s, want %s", got, want)
	}
	if got := strings.Join(fq.deleted, " "); got != "r-spot r-other r-bad r-noop r-rebalance r-again" {
		t.Errorf("deleted %s", got)
	}
	if woke != 1 {
		t.Errorf("handler woken %d times, want once", woke)
	}
	// The body that does not parse is deleted uncounted, as Karpenter's.
	for typ, want := range map[string]float64{"spot_interrupted": 3, "rebalance_recommendation": 1, "no_op": 1} {
		if got := observe.Count(t, q.metrics.received.WithLabelValues(typ)); got != want {
			t.Errorf("received{%s} = %v, want %v", typ, got, want)
		}
	}
	if got := observe.Count(t, q.metrics.deleted); got != 6 {
		t.Errorf("deleted = %v, want 6", got)
	}
	if got := observe.Count(t, q.metrics.latency); got != 5 { // every parsed message (the bad one has no time)
		t.Errorf("queue duration observations = %v, want 5", got)
	}

	// The handler acts once: the NodeClaim goes, the spot offering is
	// marked, the rebalance recommendation is recorded.
	r.reconcile(t)
	if r.claims.NodeClaim("default-1").DeletionTimestamp == nil {
		t.Error("nodeclaim not deleted")
	}
	if len(spy.marked) != 1 || spy.marked[0] != (cloud.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}) {
		t.Errorf("marked unavailable %v, want m5.large us-east-1a spot once", spy.marked)
	}
	evs := observe.Events(r.rec)
	if n, m := countEvents(evs, "SpotInterrupted"), countEvents(evs, "SpotRebalanceRecommendation"); n != 1 || m != 1 {
		t.Errorf("SpotInterrupted events %d, SpotRebalanceRecommendation events %d; want 1 each: %v", n, m, evs)
	}
}

// TestQueueReservationInterruption: an interruptible capacity
// reservation's reclaim deletes the NodeClaim (Karpenter's CordonAndDrain),
// records its Events, counts the disruption by Karpenter's message kind and
// makes the reservation take no more instances; no offering is marked.
func TestQueueReservationInterruption(t *testing.T) {
	r, q, _, spy, _ := newQueueRig(t, []cloud.InterruptionMessage{message("odcr", cloud.InterruptionCapacityReservation, "i-1")})
	r.claims.items["default-1"].Labels = map[string]string{karpv1.LabelCapacityReservationID: "cr-0123", karpv1.LabelNodePool: "default"}
	if err := q.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := observe.Count(t, q.metrics.received.WithLabelValues("capacity_reservation_interrupted")); got != 1 {
		t.Errorf("received{capacity_reservation_interrupted} = %v, want 1", got)
	}
	r.reconcile(t)
	if r.claims.NodeClaim("default-1").DeletionTimestamp == nil {
		t.Error("nodeclaim not deleted")
	}
	if len(spy.reservations) != 1 || spy.reservations[0] != "cr-0123" || len(spy.marked) != 0 {
		t.Errorf("reservations marked %v, offerings %v: want cr-0123 and no offering", spy.reservations, spy.marked)
	}
	if n := countEvents(observe.Events(r.rec), "CapacityReservationInstanceInterrupted"); n != 1 {
		t.Errorf("CapacityReservationInstanceInterrupted events %d, want 1 (the NodeClaim's; no Node)", n)
	}
	r.wantActions(t, string(ActionDelete), 1)
}

// TestQueueKeepsMessagesItCouldNotCommit: a message whose report did not
// commit is not deleted (it comes back after its visibility timeout), and
// the pass says which; the next delivery commits it.
func TestQueueKeepsMessagesItCouldNotCommit(t *testing.T) {
	m := message("spot", cloud.InterruptionSpot, "i-1")
	r, q, fq, _, raft := newQueueRig(t, []cloud.InterruptionMessage{m}, []cloud.InterruptionMessage{m})
	raft.fail = true
	if err := q.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), "m-spot") {
		t.Fatalf("poll with raft down: %v, want an error naming the message", err)
	}
	if len(fq.deleted) != 0 || len(r.state.Interruptions()) != 0 {
		t.Fatalf("deleted %v, reports %v: want neither", fq.deleted, r.state.Interruptions())
	}
	raft.fail = false
	if err := q.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(fq.deleted) != 1 || len(r.state.Interruptions()) != 1 {
		t.Errorf("after redelivery: deleted %v, reports %v; want one each", fq.deleted, r.state.Interruptions())
	}
}

// TestQueueBacksOffOnErrors: failed receives double the wait before the
// next (up to the cap); a receive that succeeds resets it.
func TestQueueBacksOffOnErrors(t *testing.T) {
	_, q, fq, _, _ := newQueueRig(t, []cloud.InterruptionMessage{message("x", cloud.InterruptionRebalance, "i-1")})
	q.cfg.MaxBackoff = 3 * time.Second
	gone := fmt.Errorf("receiving: %w", cloud.ErrNotFound)
	fq.errs = []error{gone, gone, gone}
	var waits []time.Duration
	for range 4 {
		err := q.Poll(context.Background())
		if (err != nil) != (len(waits) < 3) {
			t.Fatalf("poll %d: %v", len(waits)+1, err)
		}
		waits = append(waits, q.backoff)
	}
	if waits[0] != time.Second || waits[1] != 2*time.Second || waits[2] != 3*time.Second || waits[3] != 0 {
		t.Errorf("waits %v, want [1s 2s 3s 0s]", waits)
	}
}

// TestAgentAndQueueReportActOnce: the agent's report and the queue's of
// one notice (same instance and kind, different IDs) lead to one action,
// one set of Events and one marked offering, in whichever order they
// arrive; the later one is a duplicate.
func TestAgentAndQueueReportActOnce(t *testing.T) {
	for _, queueFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "agent first", true: "queue first"}[queueFirst], func(t *testing.T) {
			r, q, _, spy, _ := newQueueRig(t, []cloud.InterruptionMessage{message("spot", cloud.InterruptionSpot, "i-1")})
			agent := func() {
				r.report(t, "i-1/spot-interruption/"+t0.Add(2*time.Minute).Format(time.RFC3339), "i-1", KindSpotInterruption)
			}
			if !queueFirst {
				agent()
			}
			if err := q.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if queueFirst {
				r.reconcile(t)
				agent()
			}
			r.reconcile(t)
			for _, rep := range r.state.Interruptions() {
				if !rep.Handled {
					t.Errorf("report %s not handled", rep.ID)
				}
			}
			want := map[bool]int{false: 1, true: 2}[queueFirst] // agent first: the queue's event is not even committed
			if n := len(r.state.Interruptions()); n != want {
				t.Errorf("%d reports, want %d", n, want)
			}
			r.wantActions(t, "delete", 1)
			r.wantActions(t, "duplicate", float64(want-1))
			evs := observe.Events(r.rec)
			if n, m := countEvents(evs, "SpotInterrupted"), countEvents(evs, "TerminatingOnInterruption"); n != 1 || m != 1 {
				t.Errorf("events %v: want one SpotInterrupted and one TerminatingOnInterruption", evs)
			}
			if len(spy.marked) != 1 {
				t.Errorf("marked unavailable %v, want once", spy.marked)
			}
		})
	}
}

// TestUnhandledPairActsOnce: both reports of one notice committed before
// a pass: the first (by ID) acts, the second is a duplicate.
func TestUnhandledPairActsOnce(t *testing.T) {
	r, _, _, spy, _ := newQueueRig(t)
	r.report(t, "i-1/instance-terminating/event/a", "i-1", KindInstanceTerminating)
	r.report(t, "i-1/instance-terminating/event/b", "i-1", KindInstanceTerminating)
	r.reconcile(t)
	if r.claims.NodeClaim("default-1").DeletionTimestamp == nil {
		t.Error("instance-terminating did not delete the nodeclaim")
	}
	evs := observe.Events(r.rec)
	if countEvents(evs, "InstanceTerminating") != 1 || countEvents(evs, "TerminatingOnInterruption") != 1 {
		t.Errorf("events %v: want one InstanceTerminating and one TerminatingOnInterruption", evs)
	}
	r.wantActions(t, "duplicate", 1)
	if len(spy.marked) != 0 {
		t.Errorf("a termination marked offerings unavailable: %v", spy.marked)
	}
}
