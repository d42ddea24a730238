package lifecycle

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/observe"
)

// fakeKube is the cache and the NodeClaim writer at once (an informer that
// is never behind); Nodes live in a fake clientset.
type fakeKube struct {
	mu      sync.Mutex
	claims  map[string]*karpv1.NodeClaim
	nodes   *fake.Clientset
	writes  int
	deleted []string
}

func newFakeKube(claims ...*karpv1.NodeClaim) *fakeKube {
	k := &fakeKube{claims: map[string]*karpv1.NodeClaim{}, nodes: fake.NewClientset()}
	for _, c := range claims {
		k.claims[c.Name] = c
	}
	return k
}

func (k *fakeKube) NodeClaims() []*karpv1.NodeClaim {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fixture.Sorted(k.claims)
}

func (k *fakeKube) NodeClaim(name string) *karpv1.NodeClaim {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.claims[name]
}

func (k *fakeKube) NodeByProviderID(id string) *corev1.Node {
	if id == "" {
		return nil
	}
	list, _ := k.nodes.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == id {
			return &list.Items[i]
		}
	}
	return nil
}

func (k *fakeKube) NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func (k *fakeKube) Changes() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

func (k *fakeKube) UpdateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return k.update(nc.Name, func(cur *karpv1.NodeClaim) { cur.ObjectMeta = *nc.ObjectMeta.DeepCopy() }), nil // metadata only
}

func (k *fakeKube) UpdateNodeClaimStatus(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return k.update(nc.Name, func(cur *karpv1.NodeClaim) { cur.Status = *nc.Status.DeepCopy() }), nil // status only
}

// update counts a write and stores a copy of the NodeClaim name changed by
// set.
func (k *fakeKube) update(name string, set func(cur *karpv1.NodeClaim)) *karpv1.NodeClaim {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes++
	cur := k.claims[name].DeepCopy()
	set(cur)
	k.claims[name] = cur
	return cur.DeepCopy()
}

func (k *fakeKube) DeleteNodeClaim(_ context.Context, name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes++
	k.deleted = append(k.deleted, name)
	if c := k.claims[name]; c != nil {
		c = c.DeepCopy()
		now := metav1.Now()
		c.DeletionTimestamp = &now // the termination finalizer holds it
		k.claims[name] = c
	}
	return nil
}

// fakeCloud answers Get and List from a map (absent: ErrNotFound) and
// counts Gets.
type fakeCloud struct {
	mu    sync.Mutex
	insts map[string]cloud.Instance
	gets  int
}

func (c *fakeCloud) Get(_ context.Context, id string) (cloud.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets++
	in, ok := c.insts[id]
	if !ok {
		return cloud.Instance{}, cloud.ErrNotFound
	}
	return in, nil
}

func (c *fakeCloud) List(context.Context, map[string]string) ([]cloud.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cloud.Instance
	for _, in := range c.insts {
		if in.State != "terminated" {
			out = append(out, in)
		}
	}
	return out, nil
}

// fakeClasses is every class resolved with one instance type, m5.large.
type fakeClasses struct{}

func (fakeClasses) Class(name string) *view.Class {
	return &view.Class{InstanceTypes: []*catalog.InstanceType{{Name: "m5.large",
		Labels:   map[string]string{karpv1.LabelInstanceType: "m5.large", karpv1.LabelArch: "amd64", karpv1.LabelRegion: "us-east-1"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("29")}}}}
}

type harness struct {
	t     *testing.T
	now   time.Time
	state *fsm.FSM
	raft  *fsmtest.Direct
	kube  *fakeKube
	cloud *fakeCloud
	reg   *prometheus.Registry
	rec   *record.FakeRecorder
	l     *Lifecycle
}

func newHarness(t *testing.T, cfg Config, claims ...*karpv1.NodeClaim) *harness {
	h := &harness{t: t, now: t0, state: fsm.New(), kube: newFakeKube(claims...), cloud: &fakeCloud{insts: map[string]cloud.Instance{}},
		reg: prometheus.NewRegistry(), rec: record.NewFakeRecorder(100)}
	h.raft = fsmtest.New(h.state)
	cfg.Now = func() time.Time { return h.now }
	l, err := New(cfg, Deps{Cache: h.kube, Claims: h.kube, Nodes: h.kube.nodes, State: h.state, Raft: h.raft, Cloud: h.cloud,
		Classes: fakeClasses{}, Registerer: h.reg, Recorder: h.rec, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h.l = l
	return h
}

// commitIntent puts intent1 (nodeclaim default-abcde) in state s.
func (h *harness) commitIntent(s fsm.IntentState) {
	spec := intent(fsm.IntentPending).Spec
	h.raft.MustPropose(h.t, fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "intent1", Spec: spec, Pods: []string{"default/p1"}}}, At: t0})
	if s == fsm.IntentPending {
		return
	}
	h.raft.MustPropose(h.t, fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent1", Attempt: 1, At: t0})
	switch s {
	case fsm.IntentLaunched:
		h.raft.MustPropose(h.t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent1", Attempt: 1, At: t0.Add(time.Minute),
			Launched: &fsm.Launched{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", LaunchedAt: t0.Add(time.Minute)}})
		h.cloud.insts["i-1"] = cloud.Instance{ID: "i-1", State: "running"}
	case fsm.IntentFailed:
		h.raft.MustPropose(h.t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent1", Attempt: 1, At: t0,
			Failed: &fsm.Failed{Reason: "invalid launch request: no such image"}})
	}
}

func (h *harness) reconcile() {
	h.t.Helper()
	if err := h.l.Reconcile(context.Background()); err != nil {
		h.t.Fatalf("Reconcile: %v", err)
	}
}

// wantDeleted checks that the claim, and only it, was deleted for reason:
// annotated and counted.
func (h *harness) wantDeleted(reason string) {
	h.t.Helper()
	if len(h.kube.deleted) != 1 || h.claim().Annotations[karpv1.AnnotationDisruptionReason] != reason {
		h.t.Fatalf("deleted %v, annotations %v; want the claim deleted for %s", h.kube.deleted, h.claim().Annotations, reason)
	}
	if got := value(h.l.metrics.deleted.WithLabelValues("default", reason)); got != 1 {
		h.t.Fatalf("joiner_nodeclaims_lifecycle_deleted_total{reason=%q} = %v, want 1", reason, got)
	}
}

func (h *harness) claim() *karpv1.NodeClaim { return h.kube.NodeClaim("default-abcde") }

func (h *harness) node() *corev1.Node {
	n, err := h.kube.nodes.CoreV1().Nodes().Get(context.Background(), "ip-10-0-0-1", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) condStatus(t string) metav1.ConditionStatus {
	if c := condition(h.claim().Status.Conditions, t); c != nil {
		return c.Status
	}
	return ""
}

func TestLifecycleHappyPath(t *testing.T) {
	h := newHarness(t, Config{RemoveStartupTaints: true}, claim())
	h.commitIntent(fsm.IntentLaunched)
	ctx := context.Background()

	h.now = t0.Add(time.Minute)
	h.reconcile()
	nc := h.claim()
	if h.condStatus(karpv1.ConditionLaunched) != metav1.ConditionTrue || nc.Status.ProviderID != "aws:///us-east-1a/i-1" {
		t.Fatalf("after launch: conditions %+v providerID %q", nc.Status.Conditions, nc.Status.ProviderID)
	}
	if nc.Labels[karpv1.LabelArch] != "amd64" || nc.Labels[karpv1.LabelCapacityType] != "spot" || nc.Status.ImageID != "ami-a" {
		t.Fatalf("after launch: labels %v imageID %q", nc.Labels, nc.Status.ImageID)
	}
	if q := nc.Status.Allocatable[corev1.ResourcePods]; q.Value() != 29 {
		t.Fatalf("allocatable pods %s", q.String())
	}

	// The node joins, not ready yet: registration syncs it.
	// The node joins as Joiner's user data makes it: with the unregistered
	// taint, which registration removes.
	joining := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute})
	}
	if _, err := h.kube.nodes.CoreV1().Nodes().Create(ctx, node(notReady, joining), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(3 * time.Minute)
	h.reconcile()
	if h.condStatus(karpv1.ConditionRegistered) != metav1.ConditionTrue || h.claim().Status.NodeName != "ip-10-0-0-1" {
		t.Fatalf("after registration: %+v", h.claim().Status)
	}
	n := h.node()
	if n.Labels[karpv1.LabelRegistered] != "true" || n.Labels[karpv1.LabelNodePool] != "default" || len(n.Finalizers) != 1 || len(n.OwnerReferences) != 1 {
		t.Fatalf("node after registration: labels %v finalizers %v owners %v", n.Labels, n.Finalizers, n.OwnerReferences)
	}
	if inst, _ := h.state.Instance("i-1"); inst.State != fsm.InstanceRegistered || inst.NodeName != "ip-10-0-0-1" {
		t.Fatalf("instance after registration: %+v", inst)
	}

	// Not ready: the startup taint stays; the claim says what it waits for.
	h.reconcile()
	if len(h.node().Spec.Taints) != 2 {
		t.Fatalf("taints touched before the node was ready: %v", h.node().Spec.Taints)
	}
	if c := condition(h.claim().Status.Conditions, karpv1.ConditionInitialized); c.Status != metav1.ConditionUnknown || c.Reason != ReasonNodeNotReady {
		t.Fatalf("Initialized while the node is not ready: %+v", c)
	}
	// Ready: the startup taint is removed, then the claim initializes.
	n = h.node()
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := h.kube.nodes.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(4 * time.Minute)
	h.reconcile()
	if taints := h.node().Spec.Taints; len(taints) != 1 || taints[0].Key != "dedicated" {
		t.Fatalf("taints after removal: %v", taints)
	}
	h.reconcile()
	if h.condStatus(karpv1.ConditionInitialized) != metav1.ConditionTrue || h.condStatus(karpv1.ConditionReady) != metav1.ConditionTrue {
		t.Fatalf("after initialization: %+v", h.claim().Status.Conditions)
	}
	if h.node().Labels[karpv1.LabelInitialized] != "true" {
		t.Fatalf("node not labelled initialized: %v", h.node().Labels)
	}
	if inst, _ := h.state.Instance("i-1"); inst.State != fsm.InstanceReady {
		t.Fatalf("instance after initialization: %+v", inst)
	}

	// Idempotent: more passes, much later, write nothing.
	writes, actions, cmds := h.kube.writes, len(h.kube.nodes.Actions()), h.raft.Count()
	for i := 0; i < 3; i++ {
		h.now = h.now.Add(time.Hour)
		h.reconcile()
	}
	if h.kube.writes != writes || h.raft.Count() != cmds {
		t.Fatalf("re-running wrote %d nodeclaim changes and %d commands", h.kube.writes-writes, h.raft.Count()-cmds)
	}
	for _, a := range h.kube.nodes.Actions()[actions:] {
		if a.GetVerb() != "list" {
			t.Fatalf("re-running made node call %s", a.GetVerb())
		}
	}
	for name, want := range map[string]float64{"joiner_nodeclaims_launched_total": 1, "joiner_nodeclaims_registered_total": 1, "joiner_nodeclaims_initialized_total": 1} {
		if got := counter(t, h.reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	var m dto.Metric
	if err := h.l.metrics.initDuration.Write(&m); err != nil || m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetSampleSum() != 240 {
		t.Errorf("initialization histogram %v (%v), want one 240 s sample", m.GetHistogram(), err)
	}
	wantEvents(t, h.rec, "Normal Launched Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched",
		"Normal Registered Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered",
		"Normal Initialized Status condition transitioned, Type: Initialized, Status: Unknown -> True, Reason: Initialized",
		"Normal Ready Status condition transitioned, Type: Ready, Status: Unknown -> True, Reason: Ready")
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func wantEvents(t *testing.T, rec *record.FakeRecorder, reasons ...string) {
	t.Helper()
	got := observe.Events(rec)
	if len(got) != len(reasons) {
		t.Fatalf("events %q, want reasons %v", got, reasons)
	}
	for i, r := range reasons {
		if !strings.Contains(got[i], r) {
			t.Errorf("event %d = %q, want reason %s", i, got[i], r)
		}
	}
}

// TestNoCapacityIntent: a NodeClaim whose launch found no capacity is
// deleted with Karpenter's reason, insufficient_capacity.
func TestNoCapacityIntent(t *testing.T) {
	h := newHarness(t, Config{}, claim())
	h.commitIntent(fsm.IntentPending)
	h.raft.MustPropose(t, fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent1", Attempt: 1, At: t0})
	h.raft.MustPropose(t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent1", Attempt: 1, At: t0,
		Failed: &fsm.Failed{Reason: "insufficient capacity for 2 offerings", NoCapacity: true}})
	h.reconcile()
	h.wantDeleted(ReasonInsufficientCapacity)
}

// TestWaitingClaimConditions: a claim whose launch is still pending shows
// Karpenter's conditions (all four, Registered NodeNotFound) from the first
// pass, written once.
func TestWaitingClaimConditions(t *testing.T) {
	h := newHarness(t, Config{}, claim())
	h.commitIntent(fsm.IntentPending)
	h.reconcile()
	got := map[string]string{}
	for _, c := range h.claim().Status.Conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	want := map[string]string{karpv1.ConditionLaunched: "Unknown/AwaitingReconciliation", karpv1.ConditionRegistered: "Unknown/NodeNotFound",
		karpv1.ConditionInitialized: "Unknown/AwaitingReconciliation", karpv1.ConditionReady: "Unknown/ReconcilingDependents"}
	if !maps.Equal(got, want) {
		t.Fatalf("conditions %v, want %v", got, want)
	}
	writes := h.kube.writes
	h.now = h.now.Add(time.Minute)
	h.reconcile()
	if h.kube.writes != writes {
		t.Fatalf("a second pass wrote %d times", h.kube.writes-writes)
	}
	wantEvents(t, h.rec)
}

func TestLaunchTimeoutCancelsPendingIntent(t *testing.T) {
	h := newHarness(t, Config{}, claim())
	h.commitIntent(fsm.IntentPending)
	h.now = t0.Add(5 * time.Minute)
	h.reconcile()
	if len(h.kube.deleted) != 0 {
		t.Fatalf("deleted at exactly the timeout: %v", h.kube.deleted)
	}
	h.now = t0.Add(5*time.Minute + time.Second)
	h.reconcile()
	if in, _ := h.state.Intent("intent1"); in.State != fsm.IntentCancelled {
		t.Fatalf("intent %s, want cancelled", in.State)
	}
	h.wantDeleted(ReasonLaunchTimeout)
	if got := len(h.state.NominatedPods()); got != 0 {
		t.Fatalf("%d pods still nominated: they must go back to the provisioner", got)
	}
	h.reconcile() // being deleted: left to termination
	if len(h.kube.deleted) != 1 {
		t.Fatalf("deleted twice: %v", h.kube.deleted)
	}
	wantEvents(t, h.rec, "LaunchTimeout")
}

func TestRegistrationTimeoutTerminates(t *testing.T) {
	h := newHarness(t, Config{RegistrationTimeout: 10 * time.Minute}, claim())
	h.commitIntent(fsm.IntentLaunched)
	h.reconcile() // launched at t0
	h.now = t0.Add(10 * time.Minute)
	h.reconcile()
	if len(h.kube.deleted) != 0 {
		t.Fatalf("deleted before the timeout")
	}
	h.now = t0.Add(10*time.Minute + time.Second)
	h.reconcile()
	h.wantDeleted(ReasonRegistrationTimeout)
	terms := h.state.Terminations()
	if len(terms) != 1 || terms[0].ID != "term-i-1" || terms[0].Reason != ReasonRegistrationTimeout {
		t.Fatalf("terminations %+v", terms)
	}
	if inst, _ := h.state.Instance("i-1"); inst.State != fsm.InstanceTerminating {
		t.Fatalf("instance %s, want terminating", inst.State)
	}
}

func TestFailedIntent(t *testing.T) {
	h := newHarness(t, Config{}, claim())
	h.commitIntent(fsm.IntentFailed)
	h.reconcile()
	c := condition(h.claim().Status.Conditions, karpv1.ConditionLaunched)
	if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != ReasonLaunchFailed || !strings.Contains(c.Message, "no such image") {
		t.Fatalf("Launched = %+v, want Unknown, LaunchFailed with the error (Karpenter's)", c)
	}
	if len(h.kube.deleted) != 1 {
		t.Fatalf("deleted %v", h.kube.deleted)
	}
	// No status changed (Unknown to Unknown): no condition Event.
	wantEvents(t, h.rec)
}

func TestOrphansAndForeignClaims(t *testing.T) {
	foreign := claim(func(nc *karpv1.NodeClaim) { nc.Name, nc.Annotations = "karpenter-made", nil })
	h := newHarness(t, Config{}, claim(), foreign)
	h.reconcile() // no intent1 in raft
	if len(h.kube.deleted) != 1 || h.kube.deleted[0] != "default-abcde" {
		t.Fatalf("deleted %v, want only the Joiner orphan", h.kube.deleted)
	}
}

func TestGarbageCollection(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{GCGrace: time.Minute}, claim())
	h.commitIntent(fsm.IntentLaunched)
	h.reconcile()

	h.now = t0.Add(time.Hour)
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("running instance collected: %v %v", gone, err)
	}
	h.cloud.insts["i-1"] = cloud.Instance{ID: "i-1", State: "terminated"}
	gone, err := h.l.CollectGarbage(ctx)
	if err != nil || len(gone) != 1 {
		t.Fatalf("CollectGarbage = %v, %v", gone, err)
	}
	if inst, _ := h.state.Instance("i-1"); inst.State != fsm.InstanceLost {
		t.Fatalf("instance %s, want lost", inst.State)
	}
	h.wantDeleted(ReasonInstanceGone)
	if gone, _ := h.l.CollectGarbage(ctx); len(gone) != 0 {
		t.Fatalf("lost instance collected again: %v", gone)
	}
	if got := value(h.l.metrics.instancesGone.WithLabelValues("lost")); got != 1 {
		t.Fatalf("gone metric %v", got)
	}
}

// TestGarbageCollectionSparesAReadyNode: the cloud says the instance is
// gone but its Node says Ready (its kubelet runs): as Karpenter's garbage
// collection, the NodeClaim is left alone until the Node stops saying so.
func TestGarbageCollectionSparesAReadyNode(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{GCGrace: time.Minute}, claim())
	h.commitIntent(fsm.IntentLaunched)
	h.reconcile()
	if _, err := h.kube.nodes.CoreV1().Nodes().Create(ctx, node(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(h.cloud.insts, "i-1")
	h.now = t0.Add(time.Hour)
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 0 || len(h.kube.deleted) != 0 {
		t.Fatalf("collected %v (%v), deleted %v, while the node is Ready", gone, err, h.kube.deleted)
	}
	n := h.node()
	notReady(n)
	if _, err := h.kube.nodes.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 1 || len(h.kube.deleted) != 1 {
		t.Fatalf("collected %v (%v), deleted %v, once the node is not Ready", gone, err, h.kube.deleted)
	}
}

func TestGarbageCollectionNotFound(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{GCGrace: time.Minute}, claim())
	h.commitIntent(fsm.IntentLaunched) // LaunchedAt t0+1m
	delete(h.cloud.insts, "i-1")
	h.raft.MustPropose(t, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-1", InstanceID: "i-1", Reason: "drifted", At: t0})

	h.now = t0.Add(2 * time.Minute) // within grace: maybe not listed yet
	if gone, _ := h.l.CollectGarbage(ctx); len(gone) != 0 {
		t.Fatalf("young instance collected: %v", gone)
	}
	h.now = t0.Add(2*time.Minute + time.Second)
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 1 {
		t.Fatalf("CollectGarbage = %v, %v", gone, err)
	}
	if inst, _ := h.state.Instance("i-1"); inst.State != fsm.InstanceTerminated {
		t.Fatalf("instance %s, want terminated (a termination intent exists)", inst.State)
	}
}

func TestNewRejectsDoubleRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t)
	d := Deps{Cache: newFakeKube(), Claims: newFakeKube(), Nodes: fake.NewClientset(), State: fsm.New(), Registerer: reg, Log: log}
	if _, err := New(Config{}, d); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, d); err == nil {
		t.Fatal("second New on the same registry: want an error")
	}
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestGarbageCollectionLists(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{}, claim())
	h.commitIntent(fsm.IntentLaunched)
	lc := h.cloud
	h.now = t0.Add(time.Hour)
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 0 || lc.gets != 0 {
		t.Fatalf("listed instance: gone %v err %v, %d Gets (want none)", gone, err, lc.gets)
	}
	h.cloud.insts["i-1"] = cloud.Instance{ID: "i-1", State: "terminated"}
	if gone, err := h.l.CollectGarbage(ctx); err != nil || len(gone) != 1 || lc.gets != 1 {
		t.Fatalf("unlisted instance: gone %v err %v, %d Gets (want 1)", gone, err, lc.gets)
	}
}
