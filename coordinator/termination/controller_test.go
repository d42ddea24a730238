package termination

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/test/observe"
)

type rig struct {
	c       *Controller
	claims  *fakeClaims
	kube    *fake.Clientset
	drainer *fakeDrainer
	cloud   *fakeCloud
	state   *fsm.FSM
	raft    *fsmtest.Direct
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	now     time.Time
	t       testing.TB
}

func newRig(t *testing.T, cfg Config, claims []*karpv1.NodeClaim, nodes []*corev1.Node) *rig {
	t.Helper()
	return newRigWith(t, cfg, nil, claims, nodes)
}

// launchedRig is a rig of the NodeClaim nc, launched as instance i-0123
// (intent intent-1), and its Node.
func launchedRig(t *testing.T, nc *karpv1.NodeClaim) *rig {
	t.Helper()
	r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node()})
	r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
	return r
}

// newRigWith is newRig with a Replacements (nil: none).
func newRigWith(t *testing.T, cfg Config, replacements Replacements, claims []*karpv1.NodeClaim, nodes []*corev1.Node) *rig {
	t.Helper()
	r := &rig{kube: fake.NewClientset(), cloud: &fakeCloud{}, state: fsm.New(), rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(),
		now: t0.Add(time.Second)}
	for _, n := range nodes {
		if _, err := r.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r.raft = fsmtest.New(r.state)
	r.t = t
	r.claims = newFakeClaims(r.kube, func() time.Time { return r.now }, claims...)
	r.drainer = &fakeDrainer{kube: r.kube}
	cfg.Now = func() time.Time { return r.now }
	c, err := New(cfg, Deps{Cache: r.claims, Claims: r.claims, Kube: r.kube, State: r.state, Raft: r.raft, Cloud: r.cloud,
		Drainer: r.drainer, Replacements: replacements, Registerer: r.reg, Recorder: r.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.drains = newDrains(c.cfg.Now, c.cfg.MaxConcurrentDrains, c.wake.Wake)
	r.c = c
	return r
}

// launch commits a launch intent for the claim and (unless state says
// otherwise) its launched instance.
func (r *rig) launch(claim, intentID, instanceID string, state fsm.IntentState) {
	r.raft.MustPropose(r.t, fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: intentID,
		Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: claim}}, Pods: []string{"pod-" + intentID}}}, At: t0})
	if state == fsm.IntentPending {
		return
	}
	r.raft.MustPropose(r.t, fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: intentID, Attempt: 1, At: t0})
	if state == fsm.IntentLaunching {
		return
	}
	r.raft.MustPropose(r.t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: intentID, Attempt: 1, At: t0,
		Launched: &fsm.Launched{InstanceID: instanceID, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}})
}

// settle runs passes (each waiting for the drains it started) until the
// claims and nodes stop changing or n passes ran.
func (r *rig) settle(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := r.c.Reconcile(context.Background()); err != nil {
			t.Logf("pass: %v", err)
		}
		r.c.drains.wait()
	}
}

// pastMinDrain runs the first passes (taint, the drain's start) and moves
// the clock past MinDrainTime: the next drain is the one that can find the
// node drained.
func (r *rig) pastMinDrain(t *testing.T) {
	t.Helper()
	r.settle(t, 3)
	r.now = r.now.Add(MinDrainTime + time.Second)
}

// waitInFlight waits for n drains to be inside Drain (for goroutines to
// get there, not a timing assertion).
func (r *rig) waitInFlight(n int) {
	for {
		r.drainer.mu.Lock()
		got := r.drainer.inFlight
		r.drainer.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *rig) node(t *testing.T, name string) *corev1.Node {
	n, err := r.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantReleased: the NodeClaim named name and its node ip-10-0-0-1 are
// gone.
func (r *rig) wantReleased(t *testing.T, name string) {
	t.Helper()
	if got := r.claims.get(name); got != nil {
		t.Fatalf("nodeclaim still there: finalizers %v, conditions %+v", got.Finalizers, got.Status.Conditions)
	}
	if r.node(t, "ip-10-0-0-1") != nil {
		t.Error("node still there")
	}
}

// The whole path: commit the termination, taint, drain, terminate, delete
// the Node, release the NodeClaim; raft records the intent and the result.
func TestTerminateNodeClaim(t *testing.T) {
	nc := claim(fresh, func(nc *karpv1.NodeClaim) { nc.Annotations[karpv1.AnnotationDisruptionReason] = "Drifted" })
	r := launchedRig(t, nc)

	r.pastMinDrain(t)
	r.settle(t, 5)

	r.wantReleased(t, nc.Name)
	if got := r.cloud.calls(); len(got) != 1 || got[0] != "i-0123" {
		t.Errorf("terminate calls %v, want [i-0123]", got)
	}
	// The first drain before MinDrainTime, then the one that counts.
	if len(r.drainer.cordons) == 0 || len(r.drainer.drains) != 2 {
		t.Fatalf("cordons %d, drains %d: want >=1 and 2", len(r.drainer.cordons), len(r.drainer.drains))
	}
	req := r.drainer.drains[1]
	if req.Node != "ip-10-0-0-1" || req.Reason != "Drifted" || !req.Evict || !req.Deadline.Equal(r.now.Add(time.Hour)) {
		t.Errorf("drain request %+v: want node ip-10-0-0-1, reason Drifted, evict, deadline now+1h", req)
	}
	if !req.TerminationTime.IsZero() {
		t.Errorf("drain request's termination time %s, want none without a terminationGracePeriod", req.TerminationTime)
	}
	terms := r.state.Terminations()
	if len(terms) != 1 || terms[0].ID != "term-i-0123" || terms[0].Reason != "Drifted" || terms[0].State != fsm.TerminationDone {
		t.Errorf("terminations %+v: want term-i-0123 Drifted done", terms)
	}
	if inst, _ := r.state.Instance("i-0123"); inst.State != fsm.InstanceTerminated {
		t.Errorf("instance state %s, want terminated", inst.State)
	}
	// Karpenter's Events only: the Drained condition's transition (it is
	// Unknown while the drain runs) and the finalizers'; DisruptionReason
	// and InstanceTerminating appear True at once, which Karpenter's
	// status controller does not report.
	ev := observe.EventsText(r.rec)
	for _, want := range []string{
		"Normal Drained Status condition transitioned, Type: Drained, Status: Unknown -> True, Reason: Drained\n",
		"Normal Finalized Finalized karpenter.sh/termination",
	} {
		if !strings.Contains(ev+"\n", want) {
			t.Errorf("events %q: missing %q", ev, want)
		}
	}
	for _, gone := range []string{"Disrupting", "Draining", "Terminating", "DisruptionReason", "InstanceTerminating"} {
		if strings.Contains(ev, " "+gone+" ") {
			t.Errorf("events %q: Joiner's own %s, which Karpenter does not record", ev, gone)
		}
	}
	if got := observe.Count(t, r.c.metrics.terminated.WithLabelValues("Drifted")); got != 1 {
		t.Errorf("terminated{Drifted} = %v, want 1", got)
	}
	if got := observe.Count(t, r.c.metrics.drained); got != 1 {
		t.Errorf("nodes drained = %v, want 1", got)
	}
	if got := observe.Count(t, r.c.metrics.duration); got != 1 {
		t.Errorf("termination duration samples = %v, want 1", got)
	}
}

// As Karpenter's NodeClaim finalizer, the termination holds the NodeClaim
// until the cloud has the instance terminated: while it shuts down the
// Node is gone but the NodeClaim stays; then Karpenter's
// karpenter_nodeclaims_instance_termination_duration_seconds observes the
// time since the termination call.
func TestNodeClaimWaitsForItsInstance(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc)
	r.cloud.after = "shutting-down"
	r.pastMinDrain(t)
	r.settle(t, 5)
	got := r.claims.get(nc.Name)
	if got == nil || !hasFinalizer(got.Finalizers) {
		t.Fatal("nodeclaim released while its instance shuts down")
	}
	if !conditionTrue(got, karpv1.ConditionInstanceTerminating) || r.node(t, "ip-10-0-0-1") != nil {
		t.Fatalf("want the instance terminating and the node deleted first: conditions %+v", got.Status.Conditions)
	}
	if n, _ := observe.Sample(t, r.reg, "karpenter_nodeclaims_instance_termination_duration_seconds", nil); n != 0 {
		t.Fatalf("%v instance terminations observed while it shuts down", n)
	}
	r.now = r.now.Add(40 * time.Second)
	r.cloud.after = ""
	r.settle(t, 1)
	if r.claims.get(nc.Name) != nil {
		t.Fatal("nodeclaim not released once its instance terminated")
	}
	if got := r.cloud.calls(); len(got) != 1 {
		t.Errorf("terminate calls %v, want one", got)
	}
	fams, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "karpenter_nodeclaims_instance_termination_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 40 {
				t.Fatalf("instance termination observed %d times, sum %v s: want once, 40 s", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("karpenter_nodeclaims_instance_termination_duration_seconds not served")
}

// An instance the cloud no longer knows is gone; one still running after
// its termination (EC2's eventual consistency) is terminated again, at most
// once per instanceCheckEvery however often passes come.
func TestInstanceGoneOrTerminatedAgain(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc)
	r.cloud.after = "running"
	r.pastMinDrain(t)
	r.settle(t, 5)
	if got := r.cloud.calls(); len(got) != 2 {
		t.Fatalf("terminate calls %v: want the termination and one more within %s", got, instanceCheckEvery)
	}
	r.now = r.now.Add(instanceCheckEvery)
	r.settle(t, 3)
	if got := r.cloud.calls(); len(got) != 3 {
		t.Fatalf("terminate calls %v: want one more after %s", got, instanceCheckEvery)
	}
	r.now = r.now.Add(instanceCheckEvery)
	r.cloud.after = "gone"
	r.settle(t, 1)
	if r.claims.get(nc.Name) != nil {
		t.Fatal("nodeclaim not released once the cloud no longer knows its instance")
	}
}

// Each step can be interrupted (a failed write, a new leader): the next
// pass resumes from the objects and raft without repeating finished work.
func TestResumeAfterFailures(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc)

	r.cloud.err = errors.New("throttled")
	r.pastMinDrain(t)
	r.settle(t, 3)
	if got := r.claims.get(nc.Name); got == nil || !conditionTrue(got, karpv1.ConditionDrained) || !conditionTrue(got, karpv1.ConditionDisruptionReason) {
		t.Fatalf("want the claim marked disrupting, drained and waiting on the cloud, got %+v", got)
	}
	if r.node(t, "ip-10-0-0-1") == nil {
		t.Fatal("node deleted before the instance was terminated")
	}
	// A new controller (a new leader) takes over.
	r.cloud.err = nil
	c2, err := New(Config{Now: r.c.cfg.Now}, Deps{Cache: r.claims, Claims: r.claims, Kube: r.kube, State: r.state, Raft: r.raft,
		Cloud: r.cloud, Drainer: r.drainer, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c2.drains = newDrains(c2.cfg.Now, 10, c2.wake.Wake)
	r.claims.failOn = "update" // the finalizer removal fails once
	r.c = c2
	drains := len(r.drainer.drains)
	r.settle(t, 3)
	if got := r.claims.get(nc.Name); got != nil {
		t.Fatalf("nodeclaim still there: %+v", got.Status.Conditions)
	}
	if len(r.drainer.drains) != drains {
		t.Errorf("%d drains, want %d (the new leader must not drain again)", len(r.drainer.drains), drains)
	}
	if got := r.cloud.calls(); len(got) != 1 {
		t.Errorf("terminate calls %v, want one successful call", got)
	}
}

// launchingRig: the NodeClaim whose launch intent-1 is in state (no
// instance yet) is deleted; two passes follow.
func launchingRig(t *testing.T, state fsm.IntentState) (*rig, *karpv1.NodeClaim) {
	nc := claim(fresh)
	nc.Status.ProviderID = ""
	r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, nil)
	r.launch(nc.Name, "intent-1", "", state)
	r.settle(t, 2)
	return r, nc
}

func TestPendingLaunchIsCancelled(t *testing.T) {
	r, nc := launchingRig(t, fsm.IntentPending)
	if in, _ := r.state.Intent("intent-1"); in.State != fsm.IntentCancelled {
		t.Errorf("intent %s, want cancelled", in.State)
	}
	if r.claims.get(nc.Name) != nil {
		t.Error("nodeclaim not released")
	}
	if len(r.cloud.calls()) != 0 || len(r.state.Terminations()) != 0 {
		t.Errorf("nothing launched, yet terminate calls %v terminations %v", r.cloud.calls(), r.state.Terminations())
	}
}

func TestLaunchInFlightWaits(t *testing.T) {
	r, nc := launchingRig(t, fsm.IntentLaunching)
	if got := r.claims.get(nc.Name); got == nil || !hasFinalizer(got.Finalizers) {
		t.Fatal("nodeclaim released while its launch was in flight")
	}
	// The launcher records the result; the termination proceeds.
	r.raft.MustPropose(r.t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-1", Attempt: 1, At: t0,
		Launched: &fsm.Launched{InstanceID: "i-0456", InstanceType: "m5.large", Zone: "us-east-1a"}})
	r.settle(t, 2)
	if r.claims.get(nc.Name) != nil {
		t.Error("nodeclaim not released after the launch result")
	}
	if got := r.cloud.calls(); len(got) != 1 || got[0] != "i-0456" {
		t.Errorf("terminate calls %v, want [i-0456] (instance from the intent)", got)
	}
}

func TestGracePeriodElapsedSkipsDrain(t *testing.T) {
	nc := claim(fresh, tgp(30*time.Second))
	r := launchedRig(t, nc)
	r.drainer.gate = make(chan struct{}) // the drain never finishes on its own
	r.now = t0.Add(10 * time.Second)
	if err := r.c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.waitInFlight(1)
	r.drainer.mu.Lock()
	drains := append([]drain.Request(nil), r.drainer.drains...)
	r.drainer.mu.Unlock()
	if len(drains) != 1 || !drains[0].Deadline.Equal(t0.Add(30*time.Second)) || !drains[0].TerminationTime.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("drains %+v: want one with the grace deadline %s as deadline and termination time", drains, t0.Add(30*time.Second))
	}
	r.now = t0.Add(31 * time.Second) // past the grace period: terminate anyway
	if err := r.c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(r.drainer.gate)
	r.c.drains.wait()
	r.settle(t, 2)
	if r.claims.get(nc.Name) != nil {
		t.Error("nodeclaim not released after the grace period")
	}
	if len(r.cloud.calls()) != 1 {
		t.Errorf("terminate calls %v, want 1", r.cloud.calls())
	}
}

func TestDeletedNodeDeletesItsNodeClaim(t *testing.T) {
	nc := claim()
	n := node()
	r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{n})
	r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
	// The fake clientset deletes at once; a real API server would set the
	// deletion timestamp because of the finalizer: do that by hand.
	cur := r.node(t, n.Name)
	cur.DeletionTimestamp = &metav1.Time{Time: t0}
	if _, err := r.kube.CoreV1().Nodes().Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.settle(t, 1)
	got := r.claims.get(nc.Name)
	if got == nil || got.DeletionTimestamp == nil {
		t.Fatalf("nodeclaim %+v: want it deleting", got)
	}
	r.pastMinDrain(t)
	r.settle(t, 4)
	if r.claims.get(nc.Name) != nil || r.node(t, n.Name) != nil {
		t.Error("nodeclaim or node left behind")
	}
	if len(r.cloud.calls()) != 1 {
		t.Errorf("terminate calls %v, want 1", r.cloud.calls())
	}
}

func TestLoneNodeIsDrainedAndReleased(t *testing.T) {
	n := node(nodeDeleting)
	r := newRig(t, Config{}, nil, []*corev1.Node{n})
	r.settle(t, 3)
	got := r.node(t, n.Name)
	if got == nil {
		t.Fatal("node gone (the fake keeps it: only the finalizer is removed)")
	}
	if hasFinalizer(got.Finalizers) {
		t.Errorf("finalizer still on the node: %v", got.Finalizers)
	}
	if len(r.drainer.drains) != 1 || !Tainted(got) {
		t.Errorf("drains %d, tainted %v: want one drain of a tainted node", len(r.drainer.drains), Tainted(got))
	}
	if len(r.cloud.calls()) != 0 {
		t.Errorf("terminate calls %v for a node without a nodeclaim", r.cloud.calls())
	}
}

// Drains of different nodes run concurrently, at most MaxConcurrentDrains.
func TestDrainsAreBounded(t *testing.T) {
	var claims []*karpv1.NodeClaim
	var nodes []*corev1.Node
	for i := range 5 {
		id := "i-" + string(rune('a'+i))
		claims = append(claims, claim(fresh, func(nc *karpv1.NodeClaim) {
			nc.Name = "claim-" + id
			nc.Annotations[karpv1.AnnotationLaunchID] = "intent-" + id
			nc.Status.ProviderID = "aws:///us-east-1a/" + id
		}))
		nodes = append(nodes, node(func(n *corev1.Node) { n.Name = "node-" + id; n.Spec.ProviderID = "aws:///us-east-1a/" + id }))
	}
	r := newRig(t, Config{MaxConcurrentDrains: 2}, claims, nodes)
	for _, nc := range claims {
		id := cloud.InstanceID(nc.Status.ProviderID)
		r.launch(nc.Name, "intent-"+id, id, fsm.IntentLaunched)
	}
	r.drainer.gate = make(chan struct{})
	if err := r.c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.waitInFlight(2)
	close(r.drainer.gate)
	r.c.drains.wait()
	r.pastMinDrain(t)
	r.settle(t, 4)
	if r.drainer.maxSeen != 2 {
		t.Errorf("max concurrent drains %d, want 2", r.drainer.maxSeen)
	}
	if len(r.claims.NodeClaims()) != 0 || len(r.cloud.calls()) != 5 {
		t.Errorf("left %d nodeclaims, %d terminate calls; want 0 and 5", len(r.claims.NodeClaims()), len(r.cloud.calls()))
	}
}

// Run stops its drains when its context (the term) ends.
func TestRunStopsDrainsWithContext(t *testing.T) {
	nc := claim(fresh)
	r := newRig(t, Config{Resync: time.Hour}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node()})
	r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
	r.drainer.gate = make(chan struct{}) // never opened
	r.c.drains = nil
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.c.Run(ctx) }()
	r.waitInFlight(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if r.drainer.inFlight != 0 {
		t.Error("a drain outlived Run")
	}
	if got := r.claims.get(nc.Name); got == nil || conditionTrue(got, karpv1.ConditionDrained) {
		t.Error("want the claim still waiting, not drained")
	}
}

func TestTaintValue(t *testing.T) {
	for in, want := range map[string]string{"Drifted": "Drifted", "spot interruption!": "spot-interruption", "": "deleted", "--": "deleted",
		strings.Repeat("a", 70): strings.Repeat("a", 63)} {
		if got := taintValue(in); got != want {
			t.Errorf("taintValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// do-not-disrupt pods hold the NodeClaim until they go or the grace
// period passes.
func TestDoNotDisruptPodsHoldUntilGracePeriod(t *testing.T) {
	nc := claim(fresh, tgp(time.Hour))
	r := launchedRig(t, nc)
	r.drainer.left = []string{"default/batch"}
	r.settle(t, 3)
	got := r.claims.get(nc.Name)
	if want := t0.Add(time.Hour).Format(time.RFC3339); got.Annotations[karpv1.AnnotationTerminationTimestamp] != want {
		t.Errorf("termination timestamp annotation %q, want %q", got.Annotations[karpv1.AnnotationTerminationTimestamp], want)
	}
	if got == nil || conditionTrue(got, karpv1.ConditionDrained) || len(r.cloud.calls()) != 0 {
		t.Fatalf("claim %+v, terminate calls %v: want it held, not drained, not terminated", got, r.cloud.calls())
	}
	r.now = t0.Add(time.Hour)
	r.settle(t, 2)
	if r.claims.get(nc.Name) != nil || len(r.cloud.calls()) != 1 {
		t.Errorf("after the grace period: claim still there or terminate calls %v", r.cloud.calls())
	}
}

// TestMinDrainTime: as Karpenter's MinDrainTime, a NodeClaim's node is
// drained only by a drain that starts MinDrainTime after its drain began
// (Drained Unknown, after the taint; counted from the end of the
// condition's second) and finds nothing left: earlier ones, which may have
// listed the pods before a scheduler saw the taint, are followed by
// another, each listing the pods again. A lone Node (no NodeClaim) has no
// such wait, as in Karpenter.
func TestMinDrainTime(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc) // now: t0+1s, the drain begins then
	began := r.now
	for i, step := range []struct {
		at      time.Time
		drains  int
		drained bool
	}{
		{at: began, drains: 1},
		{at: began.Add(time.Second), drains: 2},
		{at: began.Add(MinDrainTime), drains: 3}, // within the condition's second
		{at: began.Add(MinDrainTime + time.Second), drains: 4, drained: true},
	} {
		r.now = step.at
		r.settle(t, 1)
		got := r.claims.get(nc.Name)
		drained := got == nil || conditionTrue(got, karpv1.ConditionDrained)
		if len(r.drainer.drains) != step.drains || drained != step.drained {
			t.Fatalf("step %d (%s after the drain began): %d drains, drained %v; want %d, %v", i, step.at.Sub(began),
				len(r.drainer.drains), drained, step.drains, step.drained)
		}
		if !drained && len(r.cloud.calls()) != 0 {
			t.Fatalf("step %d: instance terminated before the node was drained", i)
		}
	}
	if c := meta.FindStatusCondition(r.claims.get(nc.Name).Status.Conditions, karpv1.ConditionDrained); c == nil ||
		!c.LastTransitionTime.Time.Equal(began.Add(MinDrainTime+time.Second)) {
		t.Errorf("Drained %+v, want True since %s", c, began.Add(MinDrainTime+time.Second))
	}
}

// A NodeClaim held by do-not-disrupt pods is drained again when the next
// pod is due for deletion by its terminationGracePeriod
// (drain.Result.NextDelete), not only every retryLeft.
func TestHeldDrainReturnsForTheNextDeletion(t *testing.T) {
	nc := claim(fresh, tgp(time.Hour))
	r := launchedRig(t, nc)
	r.drainer.left = []string{"default/batch"}
	r.drainer.next = r.now.Add(3 * time.Second)
	r.settle(t, 2)
	if len(r.drainer.drains) != 1 {
		t.Fatalf("%d drains, want 1", len(r.drainer.drains))
	}
	r.now = r.now.Add(2 * time.Second)
	r.settle(t, 1)
	if len(r.drainer.drains) != 1 {
		t.Fatalf("%d drains before the next deletion is due, want 1", len(r.drainer.drains))
	}
	r.now = r.now.Add(time.Second)
	r.settle(t, 1)
	if len(r.drainer.drains) != 2 {
		t.Fatalf("%d drains once the next deletion is due, want 2", len(r.drainer.drains))
	}
}

// A drain whose NodeClaim went away (finalizer removed by hand) is cancelled.
func TestDrainOfVanishedClaimIsCancelled(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc)
	r.drainer.gate = make(chan struct{}) // never opened
	for range 4 {
		if err := r.c.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r.waitInFlight(1)
	r.claims.mu.Lock()
	delete(r.claims.items, nc.Name)
	r.claims.mu.Unlock()
	if err := r.c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.c.drains.wait() // returns only because the drain was cancelled
	if len(r.cloud.calls()) != 0 {
		t.Errorf("terminate calls %v", r.cloud.calls())
	}
}

// fakeReplacements says whether a provisioning pass has completed since t.
type fakeReplacements struct{ done time.Time }

func (f *fakeReplacements) PlannedSince(t time.Time) bool { return f.done.After(t) }

// Replacement first: the drain waits until the provisioner has planned
// capacity for the node's pods (a pass started after the deletion), or
// until ReplacementWait has passed.
func TestDrainWaitsForReplacementPlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		planned   time.Duration // pass start, relative to the deletion (0: none)
		elapsed   time.Duration // time since the deletion
		wantDrain bool
	}{
		{name: "no pass yet", elapsed: 5 * time.Second},
		{name: "pass started before the deletion", planned: -time.Second, elapsed: 5 * time.Second},
		{name: "pass started after the deletion", planned: 2 * time.Second, elapsed: 5 * time.Second, wantDrain: true},
		{name: "waited long enough", elapsed: time.Minute, wantDrain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(fresh)
			deleted := nc.DeletionTimestamp.Time
			rep := &fakeReplacements{}
			if tc.planned != 0 {
				rep.done = deleted.Add(tc.planned)
			}
			r := newRigWith(t, Config{ReplacementWait: 30 * time.Second}, rep, []*karpv1.NodeClaim{nc}, []*corev1.Node{node()})
			r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
			r.now = deleted.Add(tc.elapsed)
			r.settle(t, 5)
			drained := len(r.drainer.drains) > 0
			if drained != tc.wantDrain {
				t.Fatalf("drained = %v, want %v", drained, tc.wantDrain)
			}
			if !tc.wantDrain {
				if n := r.node(t, "ip-10-0-0-1"); n == nil || !Tainted(n) {
					t.Fatal("the node should be tainted while the drain waits")
				}
				if len(r.cloud.calls()) != 0 {
					t.Fatal("terminated before the drain")
				}
			}
		})
	}
}

// A disruption that was rolled back leaves a cancelled termination intent;
// a later deletion of the NodeClaim re-opens it and finishes normally.
func TestCancelledTerminationIsReopened(t *testing.T) {
	nc := claim(fresh)
	r := launchedRig(t, nc)
	r.raft.MustPropose(r.t, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-0123", InstanceID: "i-0123", Reason: "Underutilized", At: t0})
	r.raft.MustPropose(r.t, fsm.TerminationCancelType, fsm.TerminationCancel{ID: "term-i-0123", At: t0})
	r.pastMinDrain(t)
	r.settle(t, 5)
	terms := r.state.Terminations()
	if len(terms) != 1 || terms[0].State != fsm.TerminationDone || terms[0].Reason != DefaultReason {
		t.Fatalf("terminations %+v: want term-i-0123 re-opened with reason %q and done", terms, DefaultReason)
	}
	if got := r.cloud.calls(); len(got) != 1 {
		t.Fatalf("terminate calls %v", got)
	}
}

// TestGracePeriodExpiringEvents: a NodeClaim with a terminationGracePeriod
// gets Karpenter's TerminationGracePeriodExpiring Warning once, when its
// termination time is annotated; its Node gets one on the passes that work
// on it, at most every two minutes (Karpenter's dedupe).
func TestGracePeriodExpiringEvents(t *testing.T) {
	nc := claim(fresh, tgp(time.Hour))
	nc.TypeMeta = metav1.TypeMeta{Kind: "NodeClaim", APIVersion: "karpenter.sh/v1"} // the fake recorder names objects by it
	n := node()
	n.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
	r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{n})
	r.rec.IncludeObject = true
	r.drainer.left = []string{"default/keep"} // do-not-disrupt: the drain holds
	r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
	const msg = "Warning TerminationGracePeriodExpiring All pods will be deleted by 2026-11-22T02:00:00Z involvedObject"
	onClaim, onNode := msg+"{kind=NodeClaim,apiVersion=karpenter.sh/v1}", msg+"{kind=Node,apiVersion=v1}"
	expiring := func() []string {
		var out []string
		for _, e := range observe.Events(r.rec) {
			if strings.Contains(e, "TerminationGracePeriodExpiring") {
				out = append(out, e)
			}
		}
		return out
	}
	for i, step := range []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{onClaim, onNode}},
		{time.Minute, nil},
		{time.Minute, []string{onNode}},
	} {
		r.now = r.now.Add(step.advance)
		r.settle(t, 3)
		if got := expiring(); !slices.Equal(got, step.want) {
			t.Fatalf("step %d: events %q, want %q", i, got, step.want)
		}
	}
}

// A deleting NodeClaim of another provider's node class, and its Node,
// keep the termination finalizer for that provider to remove
// (Karpenter's IsManaged): no drain, no cloud call.
func TestOtherProvidersClaimsAreLeftAlone(t *testing.T) {
	nc := claim(deleting, func(nc *karpv1.NodeClaim) {
		delete(nc.Annotations, karpv1.AnnotationLaunchID)
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
	})
	r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node(nodeDeleting)})
	r.settle(t, 3)
	if got := r.claims.get(nc.Name); got == nil || !hasFinalizer(got.Finalizers) {
		t.Fatalf("nodeclaim released: %+v", got)
	}
	if n := r.node(t, "ip-10-0-0-1"); n == nil || !hasFinalizer(n.Finalizers) {
		t.Fatalf("node released: %+v", n)
	}
	if len(r.drainer.drains) != 0 || len(r.drainer.cordons) != 0 || len(r.cloud.calls()) != 0 {
		t.Fatalf("acted: %d drains, %d cordons, cloud calls %v", len(r.drainer.drains), len(r.drainer.cordons), r.cloud.calls())
	}
}
