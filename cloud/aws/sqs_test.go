package aws_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// queueEnv is a provider env whose sim has the interruption queue "test"
// (named for the cluster, as Karpenter's stack names it), and the Queue
// reading it.
func queueEnv(t *testing.T) (*env, *joineraws.Queue) {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.InterruptionQueue = "test"
	cfg.IAM.Access.Cluster = "test"
	cfg.IAM.Access.Callers = map[string]sim.Caller{"AKIDADMIN": {Unrestricted: true}}
	e := newEnvWith(t, cfg)
	q, err := joineraws.NewQueue(e.clientsAs("AKIDSIM").SQS, "test")
	if err != nil {
		t.Fatal(err)
	}
	return e, q
}

// receiveAll receives until the queue has nothing visible, deleting every
// message, and returns the events of those that are not no-ops.
func receiveAll(t *testing.T, e *env, q *joineraws.Queue) []cloud.InterruptionEvent {
	t.Helper()
	var out []cloud.InterruptionEvent
	for {
		if visible, _ := e.sim.QueueMessages(); visible == 0 { // a receive would wait 20 s for more
			return out
		}
		msgs, err := q.Receive(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Err != nil || m.ID == "" || m.Receipt == "" || m.Time.IsZero() {
				t.Errorf("message %+v", m)
			}
			out = append(out, m.Events...)
			if err := q.Delete(context.Background(), m.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestQueueReadsTheSimsEvents: what the sim's EventBridge sends about a
// spot instance (its launch, a rebalance recommendation, a scheduled
// change, the interruption warning and the reclaim) comes out of Receive
// parsed, and deleted messages do not come back.
func TestQueueReadsTheSimsEvents(t *testing.T) {
	e, q := queueEnv(t)
	ctx := context.Background()
	inst := e.launch(t, e.spec(t, "spot", []cloud.Candidate{cand("m5.large", "us-east-1a", "spot")}))
	if err := e.sim.Rebalance(inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.ScheduleChange(inst.ID, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Interrupt(inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.provider.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range receiveAll(t, e, q) {
		if ev.InstanceID != inst.ID {
			t.Errorf("event %+v names another instance than %s", ev, inst.ID)
		}
		kinds = append(kinds, string(ev.Kind)+":"+ev.Detail)
	}
	// The launch's pending state change is a no-op.
	want := "rebalance_recommendation: scheduled_change:AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED spot_interrupted:terminate " +
		"instance_terminated:shutting-down"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	if v, h := e.sim.QueueMessages(); v+h != 0 {
		t.Errorf("%d visible and %d hidden messages after deleting all", v, h)
	}
}

// TestQueueErrors: a queue that does not exist is cloud.ErrNotFound (at
// once, and when it goes); a bad receipt handle is neither that nor
// retryable; names SQS refuses are refused before any call.
func TestQueueErrors(t *testing.T) {
	e, q := queueEnv(t)
	ctx := context.Background()
	// The controller may not ask about other queues: an administrator does.
	missing, err := joineraws.NewQueue(e.clientsAs("AKIDADMIN").SQS, "missing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Receive(ctx); !errors.Is(err, cloud.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Receive from a queue that does not exist: %v, want ErrNotFound naming it", err)
	}
	err = q.Delete(ctx, "AQEBnot-a-receipt")
	if err == nil || errors.Is(err, cloud.ErrNotFound) || cloud.IsRetryable(err) || !strings.Contains(err.Error(), "ReceiptHandleIsInvalid") {
		t.Errorf("Delete with a bad receipt: %v", err)
	}
	for _, name := range []string{"", "has space", "a/b", strings.Repeat("x", 81), strings.Repeat("x", 76) + ".fifo"} {
		if _, err := joineraws.NewQueue(e.clientsAs("AKIDSIM").SQS, name); err == nil || !strings.Contains(err.Error(), "interruption queue name") {
			t.Errorf("NewQueue(%q) = %v, want an error naming the queue name", name, err)
		}
	}
	for _, name := range []string{"prod", "Karpenter-prod_1", strings.Repeat("x", 80), "events.fifo"} {
		if _, err := joineraws.NewQueue(e.clientsAs("AKIDSIM").SQS, name); err != nil {
			t.Errorf("NewQueue(%q): %v", name, err)
		}
	}
}

// TestMarkUnavailable: an offering marked unavailable (a reclaimed spot
// instance's) is reported unavailable, it alone, for the TTL, as after a
// capacity error.
func TestMarkUnavailable(t *testing.T) {
	e := newEnv(t)
	nc := e.ready(t, nodeClass())
	unavailable := func() string {
		var out []string
		for _, o := range joineraws.InstanceTypeOf(t, e.provider, nc, "m5.large").Offerings {
			if !o.Available {
				out = append(out, o.Zone+"/"+o.CapacityType)
			}
		}
		return strings.Join(out, " ")
	}
	if got := unavailable(); got != "" {
		t.Fatalf("unavailable before marking: %s", got)
	}
	e.provider.MarkUnavailable(cand("m5.large", "us-east-1a", "spot").Key(), "spot-interruption")
	if got := unavailable(); got != "us-east-1a/spot" {
		t.Errorf("unavailable after marking m5.large us-east-1a spot: %q", got)
	}
	e.clock.Add(3*time.Minute - time.Second)
	if got := unavailable(); got != "us-east-1a/spot" {
		t.Errorf("unavailable before the TTL passed: %q", got)
	}
	e.clock.Add(time.Second)
	if got := unavailable(); got != "" {
		t.Errorf("unavailable after the TTL: %q", got)
	}
}
