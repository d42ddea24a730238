package interruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/test/observe"
)

// Cases of the AWS provider v1.14.1's interruption controller suite
// (pkg/controllers/interruption/suite_test.go), in Joiner's terms: the
// message bodies Karpenter's suite builds go through the real queue client
// (cloud/aws.Queue and its parser), once on a fake SQS API as Karpenter's
// suite fakes it and once on the simulated region's queue (cloud/sim,
// through the SDK, under the shipped policy); the queue loop commits their
// reports and the handler acts. One "reconcile" is the receives that hand
// out every message and a handler pass. Karpenter's NodeClaims are not
// Joiner's launches: they have a provider ID and no launch intent, as a
// migrated cluster's have. The instance status controller's cases
// (DescribeInstanceStatus polling) have no counterpart: Joiner does not
// poll EC2 status checks (README, the interruption-queue loop).

// fakeSQS is the SQS API the queue client calls, as Karpenter's suite
// fakes it: a receive hands out every message set since the last one,
// deletes are counted; receiveErr fails every receive.
type fakeSQS struct {
	mu         sync.Mutex
	bodies     []string
	receiveErr error
	// receiveCalls counts the receives that succeeded.
	receiveCalls int
	deleted      []string
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-west-2.amazonaws.com/000000000000/" + aws.ToString(in.QueueName))}, nil
}

func (f *fakeSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.receiveErr != nil {
		return nil, f.receiveErr
	}
	f.receiveCalls++
	out := &sqs.ReceiveMessageOutput{}
	for i, b := range f.bodies {
		n := strconv.Itoa(i)
		out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String("msg-" + n), ReceiptHandle: aws.String("rcpt-" + n), Body: aws.String(b)})
	}
	f.bodies = nil
	return out, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

// transport is the SQS queue a karpRig reads: Karpenter's fake, or the
// simulated region's queue through the real SDK.
type transport interface {
	api() joineraws.SQSAPI
	// send puts messages with bodies in the queue.
	send(t *testing.T, bodies []string)
	// pending: a receive would get a message or an error (at once).
	pending() bool
	receives() int
	deletes() int
	// left is how many messages are still in the queue (-1: unknown).
	left() int
}

func (f *fakeSQS) api() joineraws.SQSAPI { return f }

func (f *fakeSQS) send(_ *testing.T, bodies []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies = append(f.bodies, bodies...)
}

func (f *fakeSQS) pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies) > 0 || f.receiveErr != nil
}

func (f *fakeSQS) receives() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.receiveCalls
}

func (f *fakeSQS) deletes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.deleted)
}

func (f *fakeSQS) left() int { return -1 }

// simSQS is the sim's interruption queue: the controller reaches it
// under the shipped policy, the test sends as an unrestricted caller.
type simSQS struct {
	sim        *sim.Sim
	controller *sqs.Client
	admin      *sqs.Client
	queue      string // the sim's queue
}

// newSimSQS starts a sim whose interruption queue is queue, holding
// callers to the policy of cluster ("": the cluster each request names).
func newSimSQS(t *testing.T, queue, cluster string) *simSQS {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.InterruptionQueue = queue
	cfg.IAM.Access.Cluster = cluster
	cfg.IAM.Access.Callers = map[string]sim.Caller{"AKIDADMIN": {Unrestricted: true}}
	s := sim.New(sim.Options{Config: cfg, Now: func() time.Time { return t0 }})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	clients := func(key string) *sqs.Client {
		return joineraws.NewClients(aws.Config{Region: cfg.Region, Credentials: credentials.NewStaticCredentialsProvider(key, "secret", "")}, srv.URL).SQS
	}
	return &simSQS{sim: s, controller: clients("AKIDCONTROLLER"), admin: clients("AKIDADMIN"), queue: queue}
}

func (s *simSQS) api() joineraws.SQSAPI { return s.controller }

func (s *simSQS) send(t *testing.T, bodies []string) {
	t.Helper()
	if len(bodies) == 0 {
		return
	}
	url, err := s.admin.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(s.queue)})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := s.admin.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// pending: a message is visible (a receive of an empty queue would wait
// its long poll out).
func (s *simSQS) pending() bool {
	visible, _ := s.sim.QueueMessages()
	return visible > 0
}

func (s *simSQS) receives() int { return s.sim.Calls("ReceiveMessage") }
func (s *simSQS) deletes() int  { return s.sim.Calls("DeleteMessage") }

func (s *simSQS) left() int {
	visible, hidden := s.sim.QueueMessages()
	return visible + hidden
}

// karpRig is the queue loop and the handler on one FSM, NodeClaim fake,
// registry and offerings spy, reading the queue "test-cluster" through
// the queue client.
type karpRig struct {
	claims *fakeClaims
	state  *fsm.FSM
	queue  transport
	spy    *offeringsSpy
	reg    *prometheus.Registry
	rec    *record.FakeRecorder
	h      *Handler
	q      *QueueLoop
}

func newKarpRig(t *testing.T, queue transport, name string) *karpRig {
	t.Helper()
	r := &karpRig{claims: &fakeClaims{items: map[string]*karpv1.NodeClaim{}, nodes: map[string]*corev1.Node{}}, state: fsm.New(),
		queue: queue, spy: &offeringsSpy{}, reg: prometheus.NewRegistry(), rec: record.NewFakeRecorder(2048)}
	raft := fsmtest.New(r.state)
	var err error
	r.h, err = New(Config{Now: func() time.Time { return t0.Add(time.Minute) }}, Deps{Cache: r.claims, Claims: r.claims, State: r.state,
		Raft: raft, Offerings: r.spy, Registerer: r.reg, Recorder: r.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := joineraws.NewQueue(queue.api(), name)
	if err != nil {
		t.Fatal(err)
	}
	r.q, err = NewQueueLoop(QueueConfig{Now: func() time.Time { return t0.Add(5 * time.Second) }}, QueueDeps{Queue: q, Cache: r.claims,
		State: r.state, Raft: raft, Registerer: r.reg, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claimSpec is a NodeClaim (and its Node) of NodePool "default" on an
// instance, with extra labels.
type claimSpec struct {
	instance string
	labels   map[string]string
	deleting bool // the NodeClaim is being deleted already
}

// add creates the NodeClaim nc-<instance> and the Node node-<instance>,
// as Karpenter's NodeClaimAndNode makes them.
func (r *karpRig) add(c claimSpec) {
	labels := map[string]string{karpv1.LabelNodePool: "default"}
	for k, v := range c.labels {
		labels[k] = v
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + c.instance, Labels: labels, Finalizers: []string{karpv1.TerminationFinalizer}}}
	nc.Status.ProviderID = "aws:///test-zone-1a/" + c.instance
	nc.Status.NodeName = "node-" + c.instance
	if c.deleting {
		nc.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	r.claims.items[nc.Name] = nc
	r.claims.nodes[nc.Status.NodeName] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName, Labels: labels},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
}

// reconcile is Karpenter's one reconcile of its controller: receives
// until the queue has handed out every message, and a handler pass over
// what they committed.
func (r *karpRig) reconcile(ctx context.Context) error {
	for r.queue.pending() {
		if err := r.q.Poll(ctx); err != nil {
			return err
		}
	}
	return r.h.Reconcile(ctx)
}

// deleting are the instances whose NodeClaims are being deleted, sorted.
func (r *karpRig) deleting() []string {
	var out []string
	for _, nc := range r.claims.NodeClaims() {
		if nc.DeletionTimestamp != nil {
			out = append(out, nc.Name[len("nc-"):])
		}
	}
	sort.Strings(out)
	return out
}

// ebEvent is an EventBridge event as the queue receives it (its JSON).
type ebEvent struct {
	Version    string    `json:"version"`
	ID         string    `json:"id"`
	DetailType string    `json:"detail-type"`
	Source     string    `json:"source"`
	Account    string    `json:"account"`
	Time       time.Time `json:"time"`
	Region     string    `json:"region"`
	Resources  []string  `json:"resources"`
	Detail     any       `json:"detail"`
}

// body is the JSON of an event about an instance, as Karpenter's suite
// shapes it.
func body(detailType, source, instance string, detail any) string {
	b, err := json.Marshal(ebEvent{Version: "0", ID: "ev-" + instance + "-" + detailType, DetailType: detailType, Source: source,
		Account: "000000000000", Time: t0, Region: "us-west-2", Resources: []string{"arn:aws:ec2:us-west-2:instance/" + instance}, Detail: detail})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func spotWarning(instance string) string {
	return body("EC2 Spot Instance Interruption Warning", "aws.ec2", instance,
		map[string]string{"instance-id": instance, "instance-action": "terminate"})
}

func reservationWarning(instance string) string {
	return body("EC2 Capacity Reservation Instance Interruption Warning", "aws.ec2", instance,
		map[string]string{"instance-id": instance, "instance-action": "terminate"})
}

func stateChange(instance, state string) string {
	return body("EC2 Instance State-change Notification", "aws.ec2", instance, map[string]string{"instance-id": instance, "state": state})
}

// scheduledChange is an AWS Health scheduled change of EC2 naming
// instances.
func scheduledChange(instances ...string) string {
	var entities []map[string]string
	for _, id := range instances {
		entities = append(entities, map[string]string{"entityValue": id})
	}
	return body("AWS Health Event", "aws.health", instances[0], map[string]any{"service": "EC2", "eventTypeCategory": "scheduledChange",
		"affectedEntities": entities})
}

// instanceID is the n-th test instance's ID.
func instanceID(n int) string { return fmt.Sprintf("i-%017x", n) }

// onInstances is n claims with the bodies msg makes for them.
func onInstances(n int, msg func(string) string) ([]claimSpec, []string) {
	var claims []claimSpec
	var bodies []string
	for i := range n {
		id := instanceID(i + 1)
		claims = append(claims, claimSpec{instance: id})
		bodies = append(bodies, msg(id))
	}
	return claims, bodies
}

// instances are the instance IDs of claims, sorted.
func instances(claims []claimSpec) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.instance)
	}
	sort.Strings(out)
	return out
}

// messageTypes are karpenter_interruption_received_messages_total's
// message types.
var messageTypes = []string{"spot_interrupted", "rebalance_recommendation", "scheduled_change", "instance_stopped",
	"instance_terminated", "capacity_reservation_interrupted", "no_op"}

// disruptionReasons are the karpenter_nodeclaims_disrupted_total reasons
// of interruptions.
var disruptionReasons = []string{"spot_interrupted", "capacity_reservation_interrupted", "scheduled_change", "instance_terminated", "instance_stopped"}

// deletedOn are the Events of NodeClaims (and their Nodes) deleted on n
// notices whose Event is reason.
func deletedOn(n int, reason string) map[string]int {
	return map[string]int{reason: 2 * n, "TerminatingOnInterruption": 2 * n}
}

func TestKarpenterInterruptionSuite(t *testing.T) {
	reserved := map[string]string{karpv1.LabelCapacityReservationID: "cr-56fac701cc1951b03", karpv1.LabelCapacityReservationType: "default"}
	one := instanceID(1)
	type tc struct {
		karpenter string // the Karpenter case
		claims    []claimSpec
		bodies    []string
		// receiveErr fails Karpenter's fake's receives; simQueue makes
		// the sim's queue fail them (nil: the queue "test-cluster").
		receiveErr error
		simQueue   func(t *testing.T) (transport, string)

		wantErr   bool
		wantErrIs error
		// wantDeleted are the instances whose NodeClaims are deleted
		// (every other claim is kept).
		wantDeleted   []string
		wantDeletes   int                // messages deleted
		wantReceived  map[string]float64 // karpenter_interruption_received_messages_total{message_type}
		wantDisrupted map[string]float64 // karpenter_nodeclaims_disrupted_total{reason, nodepool="default"}
		wantEvents    map[string]int     // Events by reason
		wantMarked    []cloud.OfferingKey
		wantReserved  []string // capacity reservations marked unavailable
	}
	// failingSim is a sim queue receives from which fail: the controller
	// asks for queue name in a sim whose queue is "test-cluster" (the
	// message waiting there makes it poll) and whose policy is cluster's.
	failingSim := func(name, simQueue, cluster string) func(t *testing.T) (transport, string) {
		return func(t *testing.T) (transport, string) {
			q := newSimSQS(t, simQueue, cluster)
			q.send(t, []string{spotWarning(one)})
			return q, name
		}
	}
	cases := []tc{
		{karpenter: "should delete the NodeClaim when receiving a spot interruption warning",
			claims: []claimSpec{{instance: one}}, bodies: []string{spotWarning(one)}, wantDeleted: []string{one}, wantDeletes: 1,
			wantReceived: map[string]float64{"spot_interrupted": 1}, wantDisrupted: map[string]float64{"spot_interrupted": 1},
			wantEvents: deletedOn(1, "SpotInterrupted")},
		{karpenter: "should delete the NodeClaim when receiving a capacity reservation interruption warning",
			claims: []claimSpec{{instance: one, labels: reserved}}, bodies: []string{reservationWarning(one)}, wantDeleted: []string{one},
			wantDeletes: 1, wantReceived: map[string]float64{"capacity_reservation_interrupted": 1},
			wantDisrupted: map[string]float64{"capacity_reservation_interrupted": 1}, wantEvents: deletedOn(1, "CapacityReservationInstanceInterrupted"),
			wantReserved: []string{"cr-56fac701cc1951b03"}},
		{karpenter: "should delete the NodeClaim when receiving a scheduled change message",
			claims: []claimSpec{{instance: one}}, bodies: []string{scheduledChange(one)}, wantDeleted: []string{one}, wantDeletes: 1,
			wantReceived: map[string]float64{"scheduled_change": 1}, wantDisrupted: map[string]float64{"scheduled_change": 1},
			wantEvents: deletedOn(1, "InstanceUnhealthy")},
		func() tc {
			c := tc{karpenter: "should delete the NodeClaim when receiving a state change message", wantDeletes: 4,
				wantReceived:  map[string]float64{"instance_terminated": 2, "instance_stopped": 2},
				wantDisrupted: map[string]float64{"instance_terminated": 2, "instance_stopped": 2},
				wantEvents:    map[string]int{"InstanceTerminating": 4, "InstanceStopping": 4, "TerminatingOnInterruption": 8}}
			for i, state := range []string{"terminated", "stopped", "stopping", "shutting-down"} {
				id := instanceID(i + 1)
				c.claims = append(c.claims, claimSpec{instance: id})
				c.bodies = append(c.bodies, stateChange(id, state))
			}
			c.wantDeleted = instances(c.claims)
			return c
		}(),
		func() tc {
			claims, bodies := onInstances(100, spotWarning)
			return tc{karpenter: "should handle multiple messages that cause nodeClaim deletion: with spot interruption messages",
				claims: claims, bodies: bodies, wantDeleted: instances(claims), wantDeletes: 100,
				wantReceived: map[string]float64{"spot_interrupted": 100}, wantDisrupted: map[string]float64{"spot_interrupted": 100},
				wantEvents: deletedOn(100, "SpotInterrupted")}
		}(),
		func() tc {
			claims, bodies := onInstances(100, reservationWarning)
			return tc{karpenter: "should handle multiple messages that cause nodeClaim deletion: with capacity reservation interruption messages",
				claims: claims, bodies: bodies, wantDeleted: instances(claims), wantDeletes: 100,
				wantReceived:  map[string]float64{"capacity_reservation_interrupted": 100},
				wantDisrupted: map[string]float64{"capacity_reservation_interrupted": 100},
				wantEvents:    deletedOn(100, "CapacityReservationInstanceInterrupted")}
		}(),
		// A JSON object that is no event is a no-op (Karpenter parses
		// its envelope, empty, as one).
		{karpenter: "should delete a message when the message can't be parsed",
			bodies: []string{`{"field1":"value1","field2":"value2"}`}, wantDeletes: 1, wantReceived: map[string]float64{"no_op": 1}},
		{karpenter: "should delete a state change message when the state isn't in accepted states",
			claims: []claimSpec{{instance: one}}, bodies: []string{stateChange(one, "creating")}, wantDeletes: 1,
			wantReceived: map[string]float64{"no_op": 1}},
		{karpenter: "should mark the ICE cache for the offering when getting a spot interruption warning",
			claims: []claimSpec{{instance: one, labels: map[string]string{corev1.LabelTopologyZone: "coretest-zone-1a",
				corev1.LabelInstanceTypeStable: "t3.large", karpv1.LabelCapacityType: karpv1.CapacityTypeSpot}}},
			bodies: []string{spotWarning(one)}, wantDeleted: []string{one}, wantDeletes: 1,
			wantReceived: map[string]float64{"spot_interrupted": 1}, wantDisrupted: map[string]float64{"spot_interrupted": 1},
			wantEvents: deletedOn(1, "SpotInterrupted"),
			wantMarked: []cloud.OfferingKey{{InstanceType: "t3.large", Zone: "coretest-zone-1a", CapacityType: karpv1.CapacityTypeSpot}}},
		{karpenter: "should mark the capacity reservation as unavailable when getting an interruption warning",
			claims: []claimSpec{{instance: one, labels: reserved}}, bodies: []string{reservationWarning(one)}, wantDeleted: []string{one},
			wantDeletes: 1, wantReceived: map[string]float64{"capacity_reservation_interrupted": 1},
			wantDisrupted: map[string]float64{"capacity_reservation_interrupted": 1}, wantEvents: deletedOn(1, "CapacityReservationInstanceInterrupted"),
			wantReserved: []string{"cr-56fac701cc1951b03"}},
		// Not cases of Karpenter's suite but of its handler
		// (handleMessage, deleteNodeClaim): every instance a message
		// names is acted on; a NodeClaim already being deleted gets the
		// notice's Events and nothing more (no second delete, no metric).
		{karpenter: "extra: a scheduled change naming two instances deletes both NodeClaims",
			claims: []claimSpec{{instance: one}, {instance: instanceID(2)}}, bodies: []string{scheduledChange(one, instanceID(2))},
			wantDeleted: []string{one, instanceID(2)}, wantDeletes: 1, wantReceived: map[string]float64{"scheduled_change": 1},
			wantDisrupted: map[string]float64{"scheduled_change": 2}, wantEvents: deletedOn(2, "InstanceUnhealthy")},
		{karpenter: "extra: a spot interruption of a NodeClaim already being deleted records its Events only",
			claims: []claimSpec{{instance: one, deleting: true}}, bodies: []string{spotWarning(one)}, wantDeleted: []string{one},
			wantDeletes: 1, wantReceived: map[string]float64{"spot_interrupted": 1}, wantEvents: map[string]int{"SpotInterrupted": 2}},
		// Error Handling: on the sim, the controller's first call
		// (GetQueueUrl) fails as Karpenter's fake's receive does.
		{karpenter: "should send an error on polling when QueueNotExists",
			receiveErr: &smithy.GenericAPIError{Code: "QueueDoesNotExist", Message: "error"}, simQueue: failingSim("missing", "test-cluster", ""),
			wantErr: true, wantErrIs: cloud.ErrNotFound},
		{karpenter: "should send an error on polling when AccessDenied",
			receiveErr: &smithy.GenericAPIError{Code: "AccessDenied", Message: "error"}, simQueue: failingSim("other-cluster", "other-cluster", "test-cluster"),
			wantErr: true},
		{karpenter: "should not return an error when deleting a nodeClaim that is already deleted: with spot interruption messages",
			bodies: []string{spotWarning(one)}, wantDeletes: 1, wantReceived: map[string]float64{"spot_interrupted": 1}},
		{karpenter: "should not return an error when deleting a nodeClaim that is already deleted: with capacity reservation interruption messages",
			bodies: []string{reservationWarning(one)}, wantDeletes: 1, wantReceived: map[string]float64{"capacity_reservation_interrupted": 1}},
	}
	for _, c := range cases {
		for _, onSim := range []bool{false, true} {
			t.Run(map[bool]string{false: "fake/", true: "sim/"}[onSim]+c.karpenter, func(t *testing.T) {
				var queue transport = &fakeSQS{receiveErr: c.receiveErr}
				name, wantReceives := "test-cluster", 1 // Karpenter's fake hands out every message at once
				switch {
				case onSim && c.simQueue != nil:
					queue, name = c.simQueue(t)
				case onSim:
					queue = newSimSQS(t, "test-cluster", "test-cluster")
					wantReceives = (len(c.bodies) + 9) / 10 // SQS hands out up to 10 a receive
				}
				if c.wantErr {
					wantReceives = 0
				}
				r := newKarpRig(t, queue, name)
				for _, cl := range c.claims {
					r.add(cl)
				}
				queue.send(t, c.bodies)
				err := r.reconcile(context.Background())
				if (err != nil) != c.wantErr || c.wantErrIs != nil && !errors.Is(err, c.wantErrIs) {
					t.Fatalf("reconcile: %v, want error %v (%v)", err, c.wantErr, c.wantErrIs)
				}
				r.check(t, c.wantDeleted, c.wantMarked, c.wantReserved)
				if queue.receives() != wantReceives || queue.deletes() != c.wantDeletes {
					t.Errorf("receives %d, deletes %d; want %d, %d", queue.receives(), queue.deletes(), wantReceives, c.wantDeletes)
				}
				if n := queue.left(); n > 0 && !c.wantErr {
					t.Errorf("%d messages left in the queue", n)
				}
				for _, typ := range messageTypes {
					got, _ := observe.Sample(t, r.reg, "karpenter_interruption_received_messages_total", map[string]string{"message_type": typ})
					if got != c.wantReceived[typ] {
						t.Errorf("karpenter_interruption_received_messages_total{message_type=%s} = %v, want %v", typ, got, c.wantReceived[typ])
					}
				}
				if got, _ := observe.Sample(t, r.reg, "karpenter_interruption_deleted_messages_total", nil); got != float64(c.wantDeletes) {
					t.Errorf("karpenter_interruption_deleted_messages_total = %v, want %v", got, c.wantDeletes)
				}
				for _, reason := range disruptionReasons {
					got, _ := observe.Sample(t, r.reg, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": reason, "nodepool": "default"})
					if got != c.wantDisrupted[reason] {
						t.Errorf("karpenter_nodeclaims_disrupted_total{reason=%s} = %v, want %v", reason, got, c.wantDisrupted[reason])
					}
				}
				evs := observe.Events(r.rec)
				got := map[string]int{}
				for _, e := range evs {
					if f := strings.Fields(e); len(f) > 1 {
						got[f[1]]++
					}
				}
				if !maps.Equal(got, c.wantEvents) {
					t.Errorf("events by reason %v, want %v", got, c.wantEvents)
				}
				// A second reconcile (nothing left to receive) changes
				// nothing.
				if err := r.reconcile(context.Background()); err != nil && !c.wantErr {
					t.Fatal(err)
				}
				r.check(t, c.wantDeleted, c.wantMarked, c.wantReserved)
			})
		}
	}
}

// check checks the NodeClaims being deleted (by instance) and the
// offerings and reservations marked unavailable.
func (r *karpRig) check(t *testing.T, deleted []string, marked []cloud.OfferingKey, reserved []string) {
	t.Helper()
	if got := r.deleting(); !slices.Equal(got, deleted) {
		t.Errorf("nodeclaims deleted on instances %v, want %v", got, deleted)
	}
	if !slices.Equal(r.spy.marked, marked) || !slices.Equal(r.spy.reservations, reserved) {
		t.Errorf("offerings marked unavailable %v, reservations %v; want %v, %v", r.spy.marked, r.spy.reservations, marked, reserved)
	}
}
