package interruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/test/observe"
)

var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// fakeClaims is a NodeClaim API server and cache in one.
type fakeClaims struct {
	mu        sync.Mutex
	items     map[string]*karpv1.NodeClaim
	nodes     map[string]*corev1.Node
	deleteErr error
	// goneBeforeDelete: these NodeClaims vanish just before the delete.
	goneBeforeDelete map[string]bool
}

func (f *fakeClaims) Node(name string) *corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name]
}

var gr = schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}

func (f *fakeClaims) GetNodeClaim(_ context.Context, name string) (*karpv1.NodeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nc, ok := f.items[name]
	if !ok {
		return nil, fmt.Errorf("getting nodeclaim %s: %w", name, apierrors.NewNotFound(gr, name))
	}
	return nc.DeepCopy(), nil
}

func (f *fakeClaims) UpdateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.items[nc.Name]; !ok {
		return nil, apierrors.NewNotFound(gr, nc.Name)
	}
	f.items[nc.Name] = nc.DeepCopy()
	return nc, nil
}

func (f *fakeClaims) DeleteNodeClaimIfExists(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.deleteErr; err != nil {
		f.deleteErr = nil
		return false, err
	}
	if f.goneBeforeDelete[name] {
		// Deleted by someone else (its finalizer released) after it was
		// read and annotated: the API server answers NotFound.
		delete(f.items, name)
	}
	nc, ok := f.items[name]
	if ok && nc.DeletionTimestamp == nil {
		nc.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return ok, nil
}

func (f *fakeClaims) NodeClaims() []*karpv1.NodeClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*karpv1.NodeClaim
	for _, nc := range f.items {
		out = append(out, nc.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fakeClaims) NodeClaim(name string) *karpv1.NodeClaim {
	nc, _ := f.GetNodeClaim(context.Background(), name)
	return nc
}

type rig struct {
	h      *Handler
	claims *fakeClaims
	state  *fsm.FSM
	raft   *fsmtest.Direct
	rec    *record.FakeRecorder
}

// newRig has one launched instance i-1 on NodeClaim default-1 (provider ID
// set unless noProviderID).
func newRig(t *testing.T, noProviderID bool) *rig {
	r := &rig{state: fsm.New(), rec: record.NewFakeRecorder(100)}
	r.raft = fsmtest.New(r.state)
	r.raft.MustPlanAndLaunch(t, "intent-1", cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-1"}, []string{"p"},
		fsm.Launched{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, t0)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-1", Finalizers: []string{karpv1.TerminationFinalizer},
		Annotations: map[string]string{karpv1.AnnotationLaunchID: "intent-1"}}}
	if !noProviderID {
		nc.Status.ProviderID = "aws:///us-east-1a/i-1"
	}
	r.claims = &fakeClaims{items: map[string]*karpv1.NodeClaim{nc.Name: nc}}
	h, err := New(Config{Now: func() time.Time { return t0.Add(time.Minute) }}, Deps{Cache: r.claims, Claims: r.claims,
		State: r.state, Raft: r.raft, Registerer: prometheus.NewRegistry(), Recorder: r.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	return r
}

// reconcile runs one pass of the handler, failing the test on an error.
func (r *rig) reconcile(t *testing.T) {
	t.Helper()
	if err := r.h.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) report(t *testing.T, id, instance, kind string) {
	r.raft.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: id, InstanceID: instance,
		Kind: kind, NoticeTime: t0, Deadline: t0.Add(2 * time.Minute), ReceivedAt: t0}})
}

// wantActions checks the handler's actions{action} counter.
func (r *rig) wantActions(t *testing.T, action string, want float64) {
	t.Helper()
	if got := observe.Count(t, r.h.metrics.actions.WithLabelValues(action)); got != want {
		t.Errorf("actions{%s} = %v, want %v", action, got, want)
	}
}

// wantHandled checks that the report id is marked handled.
func (r *rig) wantHandled(t *testing.T, id string) {
	t.Helper()
	if rep, _ := r.state.Interruption(id); !rep.Handled {
		t.Errorf("report %s not handled", id)
	}
}

func TestActionFor(t *testing.T) {
	for kind, want := range map[string]Action{
		KindSpotInterruption: ActionDelete, KindScheduledEvent: ActionDelete, KindInstanceStopping: ActionDelete,
		KindASGLifecycle: ActionDelete, KindInstanceTerminating: ActionDelete, KindCapacityReservation: ActionDelete,
		KindRebalance: ActionEvent, "something-new": ActionEvent,
	} {
		if got := ActionFor(kind); got != want {
			t.Errorf("ActionFor(%q) = %s, want %s", kind, got, want)
		}
	}
}

func TestTerminationNoticesDeleteTheNodeClaim(t *testing.T) {
	// Each kind's Event is the AWS provider's for it.
	const spot, unhealthy = "Spot interruption warning was triggered", "An unhealthy warning was triggered for the instance"
	for _, tc := range []struct {
		kind            string
		noProviderID    bool
		reason, message string
	}{
		{KindSpotInterruption, false, "SpotInterrupted", spot}, {KindScheduledEvent, false, "InstanceUnhealthy", unhealthy},
		{KindInstanceStopping, false, "InstanceStopping", "Instance is stopping"}, {KindSpotInterruption, true, "SpotInterrupted", spot},
		{KindInstanceTerminating, false, "InstanceTerminating", "Instance is terminating"},
		{KindASGLifecycle, false, "InstanceTerminating", "Instance is terminating"},
	} {
		t.Run(fmt.Sprintf("%s/providerID=%v", tc.kind, !tc.noProviderID), func(t *testing.T) {
			r := newRig(t, tc.noProviderID)
			id := "i-1/" + tc.kind + "/" + t0.Format(time.RFC3339)
			r.report(t, id, "i-1", tc.kind)
			r.reconcile(t)
			nc := r.claims.NodeClaim("default-1")
			if nc.DeletionTimestamp == nil {
				t.Error("nodeclaim not deleted")
			}
			if got := nc.Annotations[karpv1.AnnotationDisruptionReason]; got != Reason {
				t.Errorf("disruption reason %q, want %q", got, Reason)
			}
			terms := r.state.Terminations()
			if len(terms) != 1 || terms[0].ID != "term-i-1" || terms[0].Reason != Reason {
				t.Errorf("terminations %+v, want term-i-1 interrupted", terms)
			}
			r.wantHandled(t, id)
			if got := observe.Count(t, r.h.metrics.received.WithLabelValues(tc.kind)); got != 1 {
				t.Errorf("received{%s} = %v, want 1", tc.kind, got)
			}
			r.wantActions(t, "delete", 1)
			want := []string{
				"Warning " + tc.reason + " " + tc.message,
				"Warning TerminatingOnInterruption Interruption triggered termination for the NodeClaim",
			}
			if ev := observe.Events(r.rec); !slices.Equal(ev, want) {
				t.Errorf("events %q, want %q", ev, want)
			}
			// A second pass does nothing more.
			r.reconcile(t)
			r.wantActions(t, "delete", 1)
		})
	}
}

func TestRebalanceOnlyRecords(t *testing.T) {
	r := newRig(t, false)
	r.report(t, "rb", "i-1", KindRebalance)
	r.reconcile(t)
	nc := r.claims.NodeClaim("default-1")
	if nc.DeletionTimestamp != nil || nc.Annotations[karpv1.AnnotationDisruptionReason] != "" {
		t.Errorf("rebalance recommendation disrupted the nodeclaim: %+v", nc.ObjectMeta)
	}
	if len(r.state.Terminations()) != 0 {
		t.Error("termination committed for a rebalance recommendation")
	}
	r.wantHandled(t, "rb")
	if ev, want := observe.Events(r.rec), []string{"Normal SpotRebalanceRecommendation Spot rebalance recommendation was triggered"}; !slices.Equal(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	r.wantActions(t, "event", 1)
}

func TestUnknownInstanceIsHandled(t *testing.T) {
	r := newRig(t, false)
	r.report(t, "x", "i-unknown", KindSpotInterruption)
	r.reconcile(t)
	r.wantHandled(t, "x")
	if r.claims.NodeClaim("default-1").DeletionTimestamp != nil {
		t.Error("another nodeclaim was deleted")
	}
	r.wantActions(t, "unknown-instance", 1)
}

// TestNodeNameAloneReachesNoClaim: a made-up instance ID beside a real
// node's name (the forged-report attack) deletes nothing.
func TestNodeNameAloneReachesNoClaim(t *testing.T) {
	r := newRig(t, false)
	nc := r.claims.NodeClaim("default-1")
	nc.Status.NodeName = "ip-10-0-0-1"
	r.raft.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: "forged",
		InstanceID: "i-made-up", NodeName: "ip-10-0-0-1", Kind: KindSpotInterruption, NoticeTime: t0, Deadline: t0.Add(2 * time.Minute), ReceivedAt: t0}})
	r.reconcile(t)
	if r.claims.NodeClaim("default-1").DeletionTimestamp != nil {
		t.Fatal("a report naming another instance deleted the node's claim by its node name")
	}
}

// TestClaimGoneBeforeDelete: a NodeClaim that disappears between its
// annotation and its delete (NotFound) was not disrupted by Joiner: the
// report is handled, the notice's own Event stays (it came before), but
// neither karpenter_nodeclaims_disrupted_total nor TerminatingOnInterruption
// is recorded, as Karpenter's deleteNodeClaim returns before both.
func TestClaimGoneBeforeDelete(t *testing.T) {
	r := newRig(t, false)
	reg := prometheus.NewRegistry()
	h, err := New(Config{Now: func() time.Time { return t0.Add(time.Minute) }}, Deps{Cache: r.claims, Claims: r.claims,
		State: r.state, Raft: r.raft, Registerer: reg, Recorder: r.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	r.claims.goneBeforeDelete = map[string]bool{"default-1": true}
	r.report(t, "s", "i-1", KindSpotInterruption)
	r.reconcile(t)
	r.wantHandled(t, "s")
	if got, _ := observe.Sample(t, reg, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "spot_interrupted"}); got != 0 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=spot_interrupted} = %v, want 0", got)
	}
	if ev, want := observe.Events(r.rec), []string{"Warning SpotInterrupted Spot interruption warning was triggered"}; !slices.Equal(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
}

// A failure leaves the report unhandled; the next pass (or leader) finishes.
func TestFailureLeavesReportForNextPass(t *testing.T) {
	r := newRig(t, false)
	r.report(t, "s", "i-1", KindSpotInterruption)
	r.claims.deleteErr = errors.New("apiserver unavailable")
	if err := r.h.Reconcile(context.Background()); err == nil {
		t.Fatal("want an error from the failed delete")
	}
	if rep, _ := r.state.Interruption("s"); rep.Handled {
		t.Fatal("report handled although the nodeclaim was not deleted")
	}
	r.reconcile(t) // the second pass finishes
	r.wantHandled(t, "s")
	if r.claims.NodeClaim("default-1").DeletionTimestamp == nil {
		t.Error("nodeclaim not deleted on the second pass")
	}
}

// objectRecorder keeps each Event as "Kind/name/uid Reason: message".
type objectRecorder struct{ got []string }

func (o *objectRecorder) Event(obj runtime.Object, _, reason, message string) {
	m, _ := meta.Accessor(obj)
	o.got = append(o.got, fmt.Sprintf("%s/%s/%s %s: %s", strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1."), m.GetName(), m.GetUID(), reason, message))
}

func (o *objectRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	o.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (o *objectRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	o.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

// TestInterruptionEventsOnNodeAndNodeClaim: as the AWS provider does, the
// notice's Event and TerminatingOnInterruption go on the NodeClaim and on
// its Node (by UID, so kubectl describe node shows them).
func TestInterruptionEventsOnNodeAndNodeClaim(t *testing.T) {
	r := newRig(t, false)
	r.claims.items["default-1"].Status.NodeName = "ip-10-0-0-1"
	r.claims.nodes = map[string]*corev1.Node{"ip-10-0-0-1": {ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", UID: "node-uid"}}}
	rec := &objectRecorder{}
	r.h.d.Recorder = rec
	r.report(t, "spot", "i-1", KindSpotInterruption)
	r.reconcile(t)
	want := []string{
		"NodeClaim/default-1/ SpotInterrupted: Spot interruption warning was triggered",
		"Node/ip-10-0-0-1/node-uid SpotInterrupted: Spot interruption warning was triggered",
		"NodeClaim/default-1/ TerminatingOnInterruption: Interruption triggered termination for the NodeClaim",
		"Node/ip-10-0-0-1/node-uid TerminatingOnInterruption: Interruption triggered termination for the Node",
	}
	if !slices.Equal(rec.got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(rec.got, "\n"), strings.Join(want, "\n"))
	}
}
