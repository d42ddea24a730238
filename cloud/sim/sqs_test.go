package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/joiner-dev/joiner/test/fakeclock"
)

// queueRig is a sim with the interruption queue "q1" and an SQS client of
// the real SDK reaching it.
type queueRig struct {
	sim   *Sim
	sqs   *sqs.Client
	url   string
	clock *fakeclock.Clock
}

// newQueueRig starts the sim; clk nil runs it on the real clock.
func newQueueRig(t *testing.T, clk *fakeclock.Clock) *queueRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.InterruptionQueue = "q1"
	cfg.IAM.Access.Unrestricted = true
	opts := Options{Config: cfg}
	if clk != nil {
		opts.Now = clk.Now
	}
	s := New(opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	out, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q1")})
	if err != nil {
		t.Fatal(err)
	}
	return &queueRig{sim: s, sqs: client, url: aws.ToString(out.QueueUrl), clock: clk}
}

func (r *queueRig) send(t *testing.T, body string) string {
	t.Helper()
	out, err := r.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(r.url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

func (r *queueRig) receive(t *testing.T, ctx context.Context, visibility, wait int32) []sqstypes.Message {
	t.Helper()
	out, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.url), MaxNumberOfMessages: 10,
		VisibilityTimeout: visibility, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp,
			sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func bodies(msgs []sqstypes.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

// TestSQSVisibilityAndDelete: a received message is hidden for its
// visibility timeout and comes back with a new receipt handle; deleting
// with an earlier receive's handle deletes nothing, with the latest it
// deletes; messages outlive neither the retention period nor a delete.
func TestSQSVisibilityAndDelete(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	r := newQueueRig(t, clk)
	ctx := context.Background()
	if !strings.HasSuffix(r.url, "/123456789012/q1") {
		t.Errorf("queue URL %s", r.url)
	}
	// The SDK checks MD5OfMessageBody and MD5OfBody: a wrong sum fails the calls.
	r.send(t, `{"n":1}`)
	r.send(t, "two ✓")
	first := r.receive(t, ctx, 30, 0)
	if got := bodies(first); len(got) != 2 || got[0] != `{"n":1}` || got[1] != "two ✓" {
		t.Fatalf("first receive %v", got)
	}
	if ts := first[0].Attributes["SentTimestamp"]; ts != "1795309200000" {
		t.Errorf("SentTimestamp %q", ts)
	}
	if got := r.receive(t, ctx, 30, 0); len(got) != 0 {
		t.Fatalf("messages in flight were received again: %v", bodies(got))
	}
	if v, h := r.sim.QueueMessages(); v != 0 || h != 2 {
		t.Errorf("queue: %d visible, %d hidden; want 0, 2", v, h)
	}
	clk.Add(30 * time.Second)
	second := r.receive(t, ctx, 30, 0)
	if len(second) != 2 || second[0].Attributes["ApproximateReceiveCount"] != "2" ||
		aws.ToString(second[0].ReceiptHandle) == aws.ToString(first[0].ReceiptHandle) {
		t.Fatalf("after the visibility timeout: %+v", second)
	}
	// The first receive's handle is stale: success, nothing deleted.
	if _, err := r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.url), ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	for _, m := range second[:1] {
		for i := 0; i < 2; i++ { // deleting twice is no error
			if _, err := r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.Add(30 * time.Second)
	if got := bodies(r.receive(t, ctx, 30, 0)); len(got) != 1 || got[0] != "two ✓" {
		t.Fatalf("after deleting the first: %v", got)
	}
	clk.Add(queueRetention)
	if got := r.receive(t, ctx, 0, 0); len(got) != 0 {
		t.Errorf("a message outlived the retention period: %v", bodies(got))
	}
	if v, h := r.sim.QueueMessages(); v != 0 || h != 0 {
		t.Errorf("queue: %d visible, %d hidden; want none", v, h)
	}
}

// TestSQSErrors: the errors SQS answers, as the SDK reads them.
func TestSQSErrors(t *testing.T) {
	r := newQueueRig(t, nil)
	ctx := context.Background()
	var noQueue *sqstypes.QueueDoesNotExist
	_, err := r.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("other")})
	if !errors.As(err, &noQueue) || noQueue.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("GetQueueUrl of another queue: %v", err)
	}
	_, err = r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(strings.Replace(r.url, "q1", "q2", 1))})
	if !errors.As(err, &noQueue) {
		t.Errorf("ReceiveMessage from another queue: %v", err)
	}
	var badReceipt *sqstypes.ReceiptHandleIsInvalid
	for _, h := range []string{"not-a-handle", receiptPrefix + "!!", receiptPrefix + "cTIvbXNnLzE"} { // the last: queue q2
		_, err = r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.url), ReceiptHandle: aws.String(h)})
		if !errors.As(err, &badReceipt) || !strings.Contains(err.Error(), h) {
			t.Errorf("DeleteMessage %q: %v, want ReceiptHandleIsInvalid naming it", h, err)
		}
	}
	for _, in := range []*sqs.ReceiveMessageInput{
		{QueueUrl: aws.String(r.url), MaxNumberOfMessages: 11},
		{QueueUrl: aws.String(r.url), WaitTimeSeconds: 21},
		{QueueUrl: aws.String(r.url), VisibilityTimeout: 43201},
	} {
		var ae smithy.APIError
		if _, err := r.sqs.ReceiveMessage(ctx, in); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
			t.Errorf("ReceiveMessage %+v: %v, want InvalidParameterValue", in, err)
		}
	}
	var ae smithy.APIError
	if _, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(r.url),
		MessageBody: aws.String(strings.Repeat("x", maxMessageBody+1))}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
		t.Errorf("SendMessage of 256 KiB + 1: %v", err)
	}
	if _, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(r.url),
		MessageBody: aws.String("bell \a")}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidMessageContents" {
		t.Errorf("SendMessage with a control character: %v", err)
	}
}

// TestSQSLongPoll: a long poll returns as soon as a message is sent, or
// when an in-flight message becomes visible again; it ends early when the
// request is cancelled.
func TestSQSLongPoll(t *testing.T) {
	r := newQueueRig(t, nil)
	ctx := context.Background()
	type result struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	got := make(chan result, 1)
	go func() {
		out, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.url), VisibilityTimeout: 1, WaitTimeSeconds: 20})
		got <- result{out, err}
	}()
	// Send once the poll is in: it then waits for a message.
	for r.sim.Calls("ReceiveMessage") < 1 {
		time.Sleep(time.Millisecond)
	}
	r.send(t, "wake up")
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	if b := bodies(res.out.Messages); len(b) != 1 || b[0] != "wake up" {
		t.Fatalf("long poll got %v", b)
	}
	// Hidden for 1 s: the next long poll gets it back when that ends.
	again := r.receive(t, ctx, 30, 20)
	if len(again) != 1 || again[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("long poll after the visibility timeout: %+v", again)
	}
	// A cancelled request ends the poll (the handler returns {}).
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	req := httptest.NewRequestWithContext(cctx, http.MethodPost, "/",
		strings.NewReader(`{"QueueUrl":"`+r.url+`","WaitTimeSeconds":20}`))
	req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { r.sim.Handler().ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a long poll outlived its cancelled request")
	}
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "{}" {
		t.Errorf("cancelled long poll: %d %s", rec.Code, rec.Body)
	}
}

// TestEventBridgeEvents: spot interruptions, rebalance recommendations,
// scheduled changes and state changes reach the queue shaped as AWS
// documents them.
func TestEventBridgeEvents(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	r := newQueueRig(t, clk)
	s := r.sim
	s.mu.Lock()
	for _, in := range []*instance{
		{ID: "i-0spot", Type: "m5.large", Zone: "us-east-1a", Lifecycle: "spot", State: "running", LastBeat: clk.Now()},
		{ID: "i-0od", Type: "m5.large", Zone: "us-east-1b", State: "running", LastBeat: clk.Now()},
	} {
		s.instances[in.ID] = in
		s.order = append(s.order, in.ID)
	}
	s.mu.Unlock()
	if _, err := s.Interrupt("i-0spot"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Interrupt("i-0od"); err != nil { // IMDS only: EC2 interrupts spot instances alone
		t.Fatal(err)
	}
	if err := s.Rebalance("i-0spot"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rebalance("i-0od"); err == nil {
		t.Error("rebalance recommendation for an on-demand instance")
	}
	if err := s.ScheduleChange("i-0od", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop("i-0od"); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Minute)
	s.Step(context.Background()) // the spot instance goes; the stopping one stops
	if err := s.Rebalance("i-0gone"); err == nil {
		t.Error("rebalance recommendation for an unknown instance")
	}

	var got []ebEvent
	for {
		msgs := r.receive(t, context.Background(), 30, 0)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			var ev ebEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev)
		}
	}
	type want struct {
		detailType, source, resource string
		detail                       map[string]any
	}
	zonal := "arn:aws:ec2:us-east-1a:instance/i-0spot"
	state := func(id, s string) want {
		return want{"EC2 Instance State-change Notification", "aws.ec2", "arn:aws:ec2:us-east-1:123456789012:instance/" + id,
			map[string]any{"instance-id": id, "state": s}}
	}
	wants := []want{
		{"EC2 Spot Instance Interruption Warning", "aws.ec2", zonal, map[string]any{"instance-id": "i-0spot", "instance-action": "terminate"}},
		{"EC2 Instance Rebalance Recommendation", "aws.ec2", zonal, map[string]any{"instance-id": "i-0spot"}},
		{"AWS Health Event", "aws.health", "i-0od", nil},
		state("i-0od", "stopping"),
		state("i-0spot", "shutting-down"),
		state("i-0spot", "terminated"),
		state("i-0od", "stopped"),
	}
	if len(got) != len(wants) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(wants), got)
	}
	ids := map[string]bool{}
	for i, w := range wants {
		ev := got[i]
		if ev.Version != "0" || ev.Account != ownerID || ev.Region != "us-east-1" || ids[ev.ID] || len(ev.ID) != 36 {
			t.Errorf("event %d envelope %+v", i, ev)
		}
		ids[ev.ID] = true
		if _, err := time.Parse(time.RFC3339, ev.Time); err != nil {
			t.Errorf("event %d time %q: %v", i, ev.Time, err)
		}
		if ev.DetailType != w.detailType || ev.Source != w.source || len(ev.Resources) != 1 || ev.Resources[0] != w.resource {
			t.Errorf("event %d = %s %s %v, want %s %s [%s]", i, ev.DetailType, ev.Source, ev.Resources, w.detailType, w.source, w.resource)
		}
		detail, _ := ev.Detail.(map[string]any)
		for k, v := range w.detail {
			if detail[k] != v {
				t.Errorf("event %d detail %s = %v, want %v", i, k, detail[k], v)
			}
		}
	}
	health, _ := got[2].Detail.(map[string]any)
	ents, _ := health["affectedEntities"].([]any)
	start, err := time.Parse(time.RFC1123, health["startTime"].(string))
	if health["service"] != "EC2" || health["eventTypeCategory"] != "scheduledChange" || health["eventTypeCode"] != DefaultScheduledChange ||
		len(ents) != 1 || ents[0].(map[string]any)["entityValue"] != "i-0od" || err != nil || !start.Equal(clk.Now().Add(-2*time.Minute).Add(scheduledChangeLead)) {
		t.Errorf("health detail %v (start %v, %v)", health, start, err)
	}
}

// TestReservationInterruption: reclaiming an interruptible capacity
// reservation sends its instance's warning, shaped as AWS documents it,
// and terminates the instance after the notice; an instance outside such a
// reservation gets nothing.
func TestReservationInterruption(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	r := newQueueRig(t, clk)
	s := r.sim
	s.mu.Lock()
	s.cfg.CapacityReservations = append(s.cfg.CapacityReservations,
		CapacityReservation{ID: "cr-0int", InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Interruptible: true},
		CapacityReservation{ID: "cr-0odcr", InstanceType: "m5.large", Zone: "us-east-1a", Total: 2})
	for _, in := range []*instance{
		{ID: "i-0int", Type: "m5.large", Zone: "us-east-1a", State: "running", LastBeat: clk.Now(), ReservationID: "cr-0int"},
		{ID: "i-0odcr", Type: "m5.large", Zone: "us-east-1a", State: "running", LastBeat: clk.Now(), ReservationID: "cr-0odcr"},
	} {
		s.instances[in.ID] = in
		s.order = append(s.order, in.ID)
	}
	s.mu.Unlock()
	at, err := s.ReclaimReservation("i-0int")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReclaimReservation("i-0odcr"); err == nil {
		t.Error("an instance in a reservation that is not interruptible was reclaimed")
	}
	msgs := r.receive(t, context.Background(), 30, 0)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the one warning: %v", len(msgs), bodies(msgs))
	}
	var ev ebEvent
	if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &ev); err != nil {
		t.Fatal(err)
	}
	detail, _ := json.Marshal(ev.Detail)
	if ev.DetailType != "EC2 Capacity Reservation Instance Interruption Warning" || ev.Source != "aws.ec2" ||
		string(detail) != `{"azId":"`+zoneID("us-east-1a")+`","instance-action":"terminate","instance-id":"i-0int","instance-termination-time":"2026-11-22T01:02:00Z"}` {
		t.Errorf("event %s %s %s", ev.DetailType, ev.Source, detail)
	}
	clk.Add(at.Sub(clk.Now()) + time.Second) // past the notice
	s.Step(context.Background())
	s.mu.Lock()
	state, other := s.instances["i-0int"].State, s.instances["i-0odcr"].State
	s.mu.Unlock()
	if state != "terminated" || other != "running" {
		t.Errorf("states after the notice: reclaimed %s, other %s; want terminated and running", state, other)
	}
}
