package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/launcher/fake"
	"github.com/joiner-dev/joiner/test/fakeclock"
	"github.com/joiner-dev/joiner/test/observe"
)

var errCrash = errors.New("crashed")

type harness struct {
	f     *fsm.FSM
	d     *fsmtest.Direct
	cloud *fake.Cloud
	clk   *fakeclock.Clock
}

func newHarness(t *testing.T, intents ...string) *harness {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := &harness{f: fsm.New(), clk: clk, cloud: fake.New("test", clk.Now)}
	h.d = fsmtest.New(h.f)
	for _, id := range intents {
		cmd := fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: id, Pods: []string{"pod-" + id}, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{
			NodePool: "default", NodeClaim: "nc-" + id,
			Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "a", CapacityType: "on-demand", Price: 0.1}},
		}}}}}
		if res := h.f.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, cmd), 0); res != nil {
			t.Fatal(res)
		}
	}
	return h
}

func (h *harness) launcher(hooks launcher.Hooks) *launcher.Launcher {
	return launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now, Hooks: hooks, GCGrace: time.Minute}, launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f})
}

func crashAt(p launcher.Point) launcher.Hooks {
	return launcher.Hooks{At: func(q launcher.Point, _ string) error {
		if q == p {
			return errCrash
		}
		return nil
	}}
}

func TestLaunchAndRecover(t *testing.T) {
	tests := []struct {
		name        string
		crash       launcher.Point // first leader dies here (0: no crash)
		listLag     time.Duration  // tag lookup misses new instances
		errs        []error
		wantAttempt int
		wantCreated int
		wantState   fsm.IntentState
	}{
		{name: "no crash", wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "after attempt start", crash: launcher.AfterAttemptStart, wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "after cloud launch: adopt by tag", crash: launcher.AfterCloudLaunch, wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "after cloud launch, tag lookup lags: same token", crash: launcher.AfterCloudLaunch, listLag: time.Hour, wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "before result", crash: launcher.BeforeLaunchResult, wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "capacity error: failed, as Karpenter", errs: []error{cloud.ErrInsufficientCapacity}, wantAttempt: 1, wantCreated: 0, wantState: fsm.IntentFailed},
		{name: "rejected (UnauthorizedOperation): next attempt, as Karpenter retries", errs: []error{fmt.Errorf("UnauthorizedOperation: %w", cloud.ErrRejected)}, wantAttempt: 2, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "unknown error: same token", errs: []error{errors.New("connection reset")}, wantAttempt: 1, wantCreated: 1, wantState: fsm.IntentLaunched},
		{name: "invalid: failed", errs: []error{cloud.ErrInvalidSpec}, wantAttempt: 1, wantCreated: 0, wantState: fsm.IntentFailed},
		{name: "parameter mismatch, no instance: next attempt", errs: []error{cloud.ErrIdempotentMismatch}, wantAttempt: 2, wantCreated: 1, wantState: fsm.IntentLaunched},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "i1")
			h.cloud.ListLag = tc.listLag
			h.cloud.LaunchErrors = tc.errs
			ctx := context.Background()
			_ = h.launcher(crashAt(tc.crash)).Pass(ctx)
			// The next leader (and a further pass for retries).
			next := h.launcher(launcher.Hooks{})
			for range 3 {
				if err := next.Pass(ctx); err != nil {
					t.Logf("pass: %v", err)
				}
			}
			in, _ := h.f.Intent("i1")
			if in.State != tc.wantState || in.Attempt != tc.wantAttempt {
				t.Fatalf("intent = %s attempt %d, want %s attempt %d", in.State, in.Attempt, tc.wantState, tc.wantAttempt)
			}
			if h.cloud.Created != tc.wantCreated {
				t.Fatalf("created %d instances, want %d", h.cloud.Created, tc.wantCreated)
			}
			if tc.wantState == fsm.IntentLaunched {
				if _, ok := h.f.Instance(in.InstanceID); !ok {
					t.Fatalf("instance %q not recorded", in.InstanceID)
				}
			}
		})
	}
}

func TestCollectOrphans(t *testing.T) {
	h := newHarness(t, "keep", "old", "launching")
	ctx := context.Background()
	l := h.launcher(launcher.Hooks{})
	if err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	// A stray from a superseded attempt of "keep", one with no intent, and
	// one whose launching attempt is still current.
	tags := func(id, attempt string) map[string]string {
		return map[string]string{karpv1.TagClusterPrefix + "test": "owned", karpv1.TagLaunchID: id, karpv1.TagAttempt: attempt}
	}
	spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{Candidates: []cloud.Candidate{{InstanceType: "m5.large"}}}}
	put := func(id string, tags map[string]string) cloud.Instance {
		inst := cloud.Instance{ID: id, InstanceType: "m5.large", State: "running", LaunchTime: h.clk.Now(), Tags: tags}
		h.cloud.Put(inst)
		return inst
	}
	stray := put("i-stray", tags("keep", "7"))
	ghost := put("i-ghost", tags("ghost", "1"))
	if res := h.f.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "inflight", Pods: []string{"z"}, Spec: spec}}}), 0); res != nil {
		t.Fatal(res)
	}
	h.f.ApplyCommand(fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "inflight", Attempt: 1}), 0)
	inflight := put("i-inflight", tags("inflight", "1"))

	if got, _ := l.CollectOrphans(ctx); len(got) != 0 {
		t.Fatalf("terminated %v inside the grace period", got)
	}
	h.clk.Add(2 * time.Minute)
	got, err := l.CollectOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{stray.ID: true, ghost.ID: true}
	if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
		t.Fatalf("terminated %v, want %v (not %s)", got, want, inflight.ID)
	}
}

// claimsByName is a launcher.Claims over NodeClaims keyed by name.
type claimsByName map[string]*karpv1.NodeClaim

func (c claimsByName) NodeClaim(name string) *karpv1.NodeClaim { return c[name] }
func (c claimsByName) NodeClaimByProviderID(id string) *karpv1.NodeClaim {
	for _, nc := range c {
		if nc.Status.ProviderID == id {
			return nc
		}
	}
	return nil
}

// TestCollectOrphansAfterStateLoss: raft knows no intent at all (a wiped
// volume, an emptyDir install restarted, an old snapshot). Karpenter's
// garbage collection rule decides then: an instance a NodeClaim names (by
// provider ID, or by its karpenter.sh/nodeclaim tag before the status has
// it) is kept; one no NodeClaim names is terminated, and so is another
// attempt's instance tagged for a NodeClaim whose status names a different
// instance. An instance raft knows as superseded is terminated even if a
// NodeClaim tag names it.
func TestCollectOrphansAfterStateLoss(t *testing.T) {
	h := newHarness(t, "known")
	ctx := context.Background()
	tags := func(intent, claim string) map[string]string {
		return map[string]string{karpv1.TagClusterPrefix + "test": "owned", karpv1.TagLaunchID: intent, karpv1.TagAttempt: "1",
			karpv1.TagNodeClaim: claim}
	}
	for _, inst := range []cloud.Instance{
		{ID: "i-by-provider-id", Zone: "us-east-1a", Tags: tags("lost-1", "web-a")},
		{ID: "i-by-tag", Zone: "us-east-1a", Tags: tags("lost-2", "web-b")},
		{ID: "i-unclaimed", Zone: "us-east-1a", Tags: tags("lost-3", "gone")},
		{ID: "i-other-attempt", Zone: "us-east-1a", Tags: tags("lost-1", "web-a")},
		{ID: "i-superseded", Zone: "us-east-1a", Tags: map[string]string{karpv1.TagClusterPrefix + "test": "owned",
			karpv1.TagLaunchID: "known", karpv1.TagAttempt: "9", karpv1.TagNodeClaim: "nc-known"}},
	} {
		inst.InstanceType, inst.State, inst.LaunchTime = "m5.large", "running", h.clk.Now()
		h.cloud.Put(inst)
	}
	claims := claimsByName{
		"web-a":    {ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-by-provider-id"}},
		"web-b":    {ObjectMeta: metav1.ObjectMeta{Name: "web-b"}},
		"nc-known": {ObjectMeta: metav1.ObjectMeta{Name: "nc-known"}},
	}
	l := launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now, GCGrace: time.Minute},
		launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f, Claims: claims})
	h.clk.Add(2 * time.Minute)
	got, err := l.CollectOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"i-other-attempt", "i-superseded", "i-unclaimed"}; !slices.Equal(got, want) {
		t.Fatalf("terminated %v, want %v", got, want)
	}
}

func TestClientToken(t *testing.T) {
	id := "0b7c3c1e-9d55-4a43-9f51-3c6f6b8e1a2b"
	if got := cloud.ClientToken("prod", id, 3); got != "prod-"+id+"-3" {
		t.Fatalf("token = %q", got)
	}
	long := cloud.ClientToken("a-very-long-cluster-name-indeed-much-longer", id, 12)
	if len(long) > 64 {
		t.Fatalf("token %q is %d characters", long, len(long))
	}
}

// A parameter mismatch on the attempt's token adopts the attempt's
// instance when one exists (the spec was not frozen, but the launch
// happened).
func TestParameterMismatchAdopts(t *testing.T) {
	h := newHarness(t, "i1")
	h.cloud.Put(cloud.Instance{ID: "i-prev", InstanceType: "m5.large", Zone: "a", CapacityType: "on-demand", State: "running",
		LaunchTime: h.clk.Now(), Tags: map[string]string{karpv1.TagLaunchID: "i1", karpv1.TagAttempt: "1"}})
	h.cloud.LaunchErrors = []error{cloud.ErrIdempotentMismatch}
	if err := h.launcher(launcher.Hooks{}).Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	in, _ := h.f.Intent("i1")
	if in.State != fsm.IntentLaunched || in.Attempt != 1 || in.InstanceID != "i-prev" || h.cloud.Created != 0 {
		t.Fatalf("intent %s attempt %d instance %q, created %d; want launched attempt 1 on i-prev, nothing created",
			in.State, in.Attempt, in.InstanceID, h.cloud.Created)
	}
}

func TestLaunchErrorsCounted(t *testing.T) {
	h := newHarness(t, "i1")
	h.cloud.LaunchErrors = []error{errors.New("connection reset"), cloud.ErrInsufficientCapacity}
	reg := prometheus.NewRegistry()
	l := launcher.New(launcher.Config{Cluster: "c", Now: h.clk.Now}, launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f, Registerer: reg})
	for range 3 {
		_ = l.Pass(context.Background())
		h.clk.Add(time.Minute) // past the backoff
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"joiner_launch_errors_total/insufficient-capacity": 1, "joiner_launch_errors_total/unknown": 1}
	if !maps.Equal(got, want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
}

// TestPassIsConcurrent: a pass drives several intents at once (a serial
// pass launched about 20 instances a second, 25 s for 500 claims), each
// exactly once, and a failing intent does not stop the others.
func TestPassIsConcurrent(t *testing.T) {
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("i%02d", i))
	}
	h := newHarness(t, ids...)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	release := make(chan struct{})
	var once sync.Once
	hooks := launcher.Hooks{At: func(p launcher.Point, id string) error {
		if p != launcher.AfterAttemptStart {
			return nil
		}
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		if peak == 8 {
			once.Do(func() { close(release) }) // enough intents met at once
		}
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		if id == "i07" {
			return errCrash
		}
		return nil
	}}
	l := launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now, Hooks: hooks, Concurrency: 8},
		launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f})
	if err := l.Pass(context.Background()); !errors.Is(err, errCrash) {
		t.Fatalf("pass error %v, want the crashed intent's", err)
	}
	if peak != 8 {
		t.Fatalf("at most %d intents in flight, want 8", peak)
	}
	launched := 0
	for _, in := range h.f.Intents() {
		if in.State == fsm.IntentLaunched {
			launched++
		}
	}
	if launched != 39 || h.cloud.LaunchCalls != 39 {
		t.Fatalf("%d intents launched with %d cloud calls, want 39 and 39", launched, h.cloud.LaunchCalls)
	}
}

// TestInsufficientCapacityEvent: an attempt that finds no capacity fails
// its intent (as Karpenter deletes the NodeClaim) and tells the NodeClaim
// (Karpenter's InsufficientCapacityError Event, Warning) once its failure
// is committed; other failures, and a NodeClaim the cache does not hold,
// tell nothing.
func TestInsufficientCapacityEvent(t *testing.T) {
	h := newHarness(t, "i1", "i2", "i3", "i4") // nc-i3 is not in the cache
	nodeClaim := func(name string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	}
	claims := claimsByName{"nc-i1": nodeClaim("nc-i1"), "nc-i2": nodeClaim("nc-i2"), "nc-i4": nodeClaim("nc-i4")}
	rec := record.NewFakeRecorder(100)
	l := launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now, Concurrency: 1},
		launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f, Claims: claims, Recorder: rec})
	ice := fmt.Errorf("insufficient capacity for 1 offerings [m5.large/a/on-demand]: %w", cloud.ErrInsufficientCapacity)
	h.cloud.LaunchErrors = []error{ice, ice, ice, cloud.ErrInvalidSpec} // i1, i2, i3 (not cached), i4
	if err := l.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := observe.Events(rec)
	want := []string{"Warning InsufficientCapacityError NodeClaim nc-i1 event: " + ice.Error(),
		"Warning InsufficientCapacityError NodeClaim nc-i2 event: " + ice.Error()}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for _, in := range h.f.Intents() {
		if in.State != fsm.IntentFailed || in.Attempt != 1 {
			t.Errorf("intent %s %s at attempt %d, want failed at attempt 1", in.ID, in.State, in.Attempt)
		}
	}
	// Nothing more to launch: no more calls, no more Events.
	h.clk.Add(time.Hour)
	if err := l.Pass(context.Background()); err != nil || h.cloud.LaunchCalls != 4 {
		t.Fatalf("second pass: %v, %d launch calls, want 4", err, h.cloud.LaunchCalls)
	}
	if got := observe.Events(rec); len(got) != 0 {
		t.Fatalf("events on the second pass: %q", got)
	}
}

// TestFailedAttemptsBackOff: an intent whose cloud call failed (here with
// an outcome the launcher cannot know, so it stays launching) waits 1 s,
// 2 s, 4 s ... before its next call instead of calling every pass, as
// Karpenter's launch is requeued with backoff; success forgets the count.
func TestFailedAttemptsBackOff(t *testing.T) {
	h := newHarness(t, "i1")
	reset := errors.New("connection reset")
	h.cloud.LaunchErrors = []error{reset, reset, reset}
	l := launcher.New(launcher.Config{Cluster: "c", Now: h.clk.Now, Interval: time.Second}, launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f})
	ctx := context.Background()
	for i, step := range []struct {
		advance   time.Duration
		wantCalls int
	}{
		{0, 1},               // fails: next in 1 s
		{0, 1},               // too early
		{time.Second, 2},     // fails: next in 2 s
		{time.Second, 2},     // too early
		{time.Second, 3},     // fails: next in 4 s
		{3 * time.Second, 3}, // too early
		{time.Second, 4},     // launches
		{time.Hour, 4},       // launched: nothing to do
	} {
		h.clk.Add(step.advance)
		_ = l.Pass(ctx)
		if h.cloud.LaunchCalls != step.wantCalls {
			t.Fatalf("step %d: %d launch calls, want %d", i, h.cloud.LaunchCalls, step.wantCalls)
		}
	}
	if in, _ := h.f.Intent("i1"); in.State != fsm.IntentLaunched || in.Attempt != 1 || h.cloud.Created != 1 {
		t.Fatalf("intent %s attempt %d, %d created; want launched at attempt 1 (the same token), 1 created", in.State, in.Attempt, h.cloud.Created)
	}
}

// TestRejectedAttemptsBackOff: a request the cloud refused (a missing
// permission) is tried again with a new token after the backoff, not every
// pass, and never fails the intent by itself (the lifecycle's launch
// timeout gives the NodeClaim up, as Karpenter's).
func TestRejectedAttemptsBackOff(t *testing.T) {
	h := newHarness(t, "i1")
	refused := fmt.Errorf("UnauthorizedOperation: %w", cloud.ErrRejected)
	h.cloud.LaunchErrors = []error{refused, refused}
	l := launcher.New(launcher.Config{Cluster: "c", Now: h.clk.Now, Interval: time.Second}, launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f})
	ctx := context.Background()
	for i, step := range []struct {
		advance     time.Duration
		wantCalls   int
		wantAttempt int
		wantState   fsm.IntentState
	}{
		{0, 1, 1, fsm.IntentPending},
		{0, 1, 1, fsm.IntentPending},           // too early
		{time.Second, 2, 2, fsm.IntentPending}, // refused again: next in 2 s
		{time.Second, 2, 2, fsm.IntentPending},
		{time.Second, 3, 3, fsm.IntentLaunched},
	} {
		h.clk.Add(step.advance)
		_ = l.Pass(ctx)
		in, _ := h.f.Intent("i1")
		if h.cloud.LaunchCalls != step.wantCalls || in.Attempt != step.wantAttempt || in.State != step.wantState {
			t.Fatalf("step %d: %d launch calls, intent %s at attempt %d; want %d calls, %s at attempt %d",
				i, h.cloud.LaunchCalls, in.State, in.Attempt, step.wantCalls, step.wantState, step.wantAttempt)
		}
	}
}
