package static

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/test/fixture"
)

// world is the static loop's surroundings in memory: the informer cache
// (pools, NodeClaims, Nodes), the raft state (launch intents), the view,
// the launcher (which commits an intent per claim, as PlanCommit does) and
// the NodeClaim writer. Safe for concurrent Reconciles.
type world struct {
	mu      sync.Mutex
	pools   []*karpv1.NodePool
	notView map[string]bool // pools the view leaves out (not ready)
	claims  map[string]*karpv1.NodeClaim
	nodes   []*corev1.Node
	pods    map[string][]*corev1.Pod
	intents []fsm.LaunchIntent
	// objects: the launcher creates the NodeClaim objects too (else only
	// the intents exist, as between PlanCommit and the creation).
	objects   bool
	launchErr error
	deleteErr error
	launches  [][]scheduler.NodeClaim
	deleted   []string
	seq       int
}

func newWorld(pools ...*karpv1.NodePool) *world {
	return &world{pools: pools, notView: map[string]bool{}, claims: map[string]*karpv1.NodeClaim{}, pods: map[string][]*corev1.Pod{}, objects: true}
}

// Cache.
func (w *world) NodePools() []*karpv1.NodePool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.pools)
}

func (w *world) NodeClaims() []*karpv1.NodeClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*karpv1.NodeClaim
	for _, nc := range w.claims {
		out = append(out, nc.DeepCopy())
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (w *world) NodeClaim(name string) *karpv1.NodeClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	if nc := w.claims[name]; nc != nil {
		return nc.DeepCopy()
	}
	return nil
}

func (w *world) Nodes() []*corev1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.nodes)
}

func (w *world) Changes() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

// State.
func (w *world) Intents() []fsm.LaunchIntent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.intents)
}
func (w *world) Instances() []fsm.Instance             { return nil }
func (w *world) Terminations() []fsm.TerminationIntent { return nil }

// Views: the ready pools (defaulted), one class's instance types and the
// pods by node.
func (w *world) Build(now time.Time) *view.View {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := &view.View{Now: now, InstanceTypes: map[string][]*catalog.InstanceType{"default": testTypes()}, PodsByNode: map[string][]*corev1.Pod{}}
	for _, np := range w.pools {
		if w.notView[np.Name] || np.DeletionTimestamp != nil {
			continue
		}
		d := np.DeepCopy()
		d.SetDefaults()
		v.NodePools = append(v.NodePools, d)
	}
	for n, ps := range w.pods {
		v.PodsByNode[n] = ps
	}
	return v
}

func testTypes() []*catalog.InstanceType {
	return fixture.InstanceTypes(4, func(cpu int64) []catalog.Offering {
		return []catalog.Offering{{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1 * float64(cpu), Available: true}}
	})
}

// Launcher.
func (w *world) LaunchClaims(_ context.Context, claims []scheduler.NodeClaim, _ []string, _ string) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.launchErr != nil {
		return nil, w.launchErr
	}
	w.launches = append(w.launches, claims)
	var names []string
	for _, c := range claims {
		w.seq++
		name := fmt.Sprintf("%s-%04d", c.NodePool, w.seq)
		in := fsm.LaunchIntent{ID: "intent-" + name, State: fsm.IntentPending, CreatedAt: t0, UpdatedAt: t0}
		in.Spec.LaunchSpec = cloud.LaunchSpec{NodePool: c.NodePool, NodeClaim: name}
		w.intents = append(w.intents, in)
		if w.objects {
			w.claims[name] = &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: c.NodePool},
				CreationTimestamp: metav1.NewTime(t0)}}
		}
		names = append(names, name)
	}
	return names, nil
}

// Writer.
func (w *world) GetNodeClaim(_ context.Context, name string) (*karpv1.NodeClaim, error) {
	if nc := w.NodeClaim(name); nc != nil {
		return nc, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: karpv1.Group, Resource: "nodeclaims"}, name)
}

func (w *world) UpdateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims[nc.Name] = nc.DeepCopy()
	return nc, nil
}

// DeleteNodeClaim marks the NodeClaim deleting (its termination finalizer
// holds it).
func (w *world) DeleteNodeClaim(_ context.Context, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleteErr != nil {
		return w.deleteErr
	}
	nc := w.claims[name]
	if nc == nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: karpv1.Group, Resource: "nodeclaims"}, name)
	}
	now := metav1.NewTime(t0)
	nc.DeletionTimestamp = &now
	w.deleted = append(w.deleted, name)
	return nil
}

// launched is every NodeClaim launched so far.
func (w *world) launched() []scheduler.NodeClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Concat(w.launches...)
}

// addClaim adds a NodeClaim of pool: launched (instance i-<name>) when
// launched, with a Node of that name when node is set.
func (w *world) addClaim(name, pool string, launched, node bool) *corev1.Node {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}, CreationTimestamp: metav1.NewTime(t0)}}
	if launched {
		nc.Status.ProviderID = "aws:///zone-a/i-" + name
	}
	w.claims[name] = nc
	if !node {
		return nil
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	w.nodes = append(w.nodes, n)
	return n
}

func (w *world) controller() *Controller {
	counter := &Counter{Cache: w, State: w}
	return New(Config{Now: func() time.Time { return t0 }}, Deps{Cache: w, Views: w, Counter: counter, Launcher: w, Kube: w,
		Recorder: record.NewFakeRecorder(100)})
}

func (w *world) active() []string {
	var out []string
	for _, nc := range w.NodeClaims() {
		if nc.DeletionTimestamp == nil {
			out = append(out, nc.Name)
		}
	}
	return out
}

// The cases of Karpenter v1.14.1's static provisioning and deprovisioning
// suites that need the loop's I/O: what is launched and deleted, pass after
// pass, with the launches counted through the raft intents.
func TestReconcile(t *testing.T) {
	ctx := context.Background()

	// Karpenter: "should handle CreateNodeClaims errors gracefully".
	t.Run("launch error", func(t *testing.T) {
		w := newWorld(pool("s", 1))
		w.launchErr = errors.New("simulated error creating nodeclaims")
		ctl := w.controller()
		if err := ctl.Reconcile(ctx); err == nil || !strings.Contains(err.Error(), "launching 1 nodeclaim(s)") {
			t.Fatalf("err %v, want the launch's", err)
		}
		if len(w.NodeClaims()) != 0 || len(w.Intents()) != 0 {
			t.Fatalf("nodeclaims %d, intents %d after a failed launch", len(w.NodeClaims()), len(w.Intents()))
		}
		// The next pass tries again.
		w.launchErr = nil
		if err := ctl.Reconcile(ctx); err != nil || len(w.NodeClaims()) != 1 {
			t.Fatalf("second pass: %v, %d nodeclaims", err, len(w.NodeClaims()))
		}
	})

	// "should return early if nodepool is not managed by cloud provider" (both suites): an EC2NodeClass
	// of the same name does not make another provider's pool Joiner's.
	t.Run("another provider's pool", func(t *testing.T) {
		w := newWorld(unmanaged(pool("up", 1)), unmanaged(pool("down", 1)))
		w.addClaim("down-a", "down", true, true)
		w.addClaim("down-b", "down", true, true)
		if err := w.controller().Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if len(w.launched()) != 0 || len(w.deleted) != 0 {
			t.Fatalf("launched %d, deleted %v", len(w.launched()), w.deleted)
		}
	})

	// "should return early if nodepool root condition is not true": not launched, but a pool that is
	// not ready is still scaled down (Karpenter's deprovisioning does not look at readiness).
	t.Run("pool not ready", func(t *testing.T) {
		w := newWorld(pool("up", 1), pool("down", 1))
		w.notView["up"], w.notView["down"] = true, true
		w.addClaim("down-a", "down", true, true)
		w.addClaim("down-b", "down", true, true)
		if err := w.controller().Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if len(w.launched()) != 0 || !slices.Equal(w.deleted, []string{"down-a"}) {
			t.Fatalf("launched %d, deleted %v", len(w.launched()), w.deleted)
		}
	})

	// "should create nodeclaims when current node count is less than desired replicas" and
	// "should respect nodepool template specifications": a claim of the pool and its class, with the
	// pool's requirements (Gt 2 admits 3 and not 2, as Karpenter's Gte 3), no pods and no requests.
	t.Run("claims of the pool's template", func(t *testing.T) {
		np := pool("s", 4)
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: "example.com/generation", Operator: karpv1.OpGt, Values: []string{"2"}},
			{Key: karpv1.LabelArch, Operator: karpv1.OpIn, Values: []string{"amd64", "arm64"}},
			{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{"on-demand", "spot"}},
		}
		w := newWorld(np)
		if err := w.controller().Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		got := w.launched()
		if len(got) != 4 || len(w.NodeClaims()) != 4 {
			t.Fatalf("launched %d, nodeclaims %d, want 4", len(got), len(w.NodeClaims()))
		}
		for _, c := range got {
			if c.NodePool != "s" || c.NodeClass != "default" || len(c.Pods) != 0 || len(c.Requests) != 0 {
				t.Fatalf("claim %+v", c)
			}
			reqs, err := requirements.FromNodeSelector(c.Requirements)
			if err != nil {
				t.Fatal(err)
			}
			gen := reqs.Get("example.com/generation")
			if gen == nil || !gen.Has("3") || gen.Has("2") || !reqs.Get(karpv1.LabelNodePool).Has("s") {
				t.Fatalf("requirements %v", c.Requirements)
			}
		}
	})

	// "should not create additional nodeclaims": launched NodeClaims count whether their Node is
	// missing, unregistered or there, pass after pass.
	t.Run("launched, with or without a node", func(t *testing.T) {
		w := newWorld(pool("s", 3))
		w.addClaim("s-nonode", "s", true, false)
		n := w.addClaim("s-unregistered", "s", true, true)
		n.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute}}
		w.addClaim("s-node", "s", true, true)
		ctl := w.controller()
		for range 10 {
			if err := ctl.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(w.launched()) != 0 || len(w.deleted) != 0 {
			t.Fatalf("launched %d, deleted %v", len(w.launched()), w.deleted)
		}
	})

	// "should wait for cluster to be synced and not over provision": a committed launch whose NodeClaim
	// the cache does not show yet counts, so passes in between launch nothing more.
	t.Run("committed launches count before their objects", func(t *testing.T) {
		w := newWorld(withLimit(pool("s", 5), 10))
		w.objects = false
		ctl := w.controller()
		for range 5 {
			if err := ctl.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(w.launched()) != 5 || len(w.Intents()) != 5 {
			t.Fatalf("launched %d, intents %d, want 5", len(w.launched()), len(w.Intents()))
		}
	})

	// "should reserve nodepool nodecount during provisioning and release after": replicas 3 under
	// limits.nodes 10 launch 3; raised to 15, the pool stops at 10.
	t.Run("limits.nodes caps a larger replica count", func(t *testing.T) {
		np := withLimit(pool("s", 3), 10)
		w := newWorld(np)
		ctl := w.controller()
		if err := ctl.Reconcile(ctx); err != nil || len(w.NodeClaims()) != 3 {
			t.Fatalf("first pass: %v, %d nodeclaims, want 3", err, len(w.NodeClaims()))
		}
		fifteen := int64(15)
		w.mu.Lock()
		np.Spec.Replicas = &fifteen
		w.mu.Unlock()
		for range 3 {
			if err := ctl.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(w.NodeClaims()) != 10 || len(w.launched()) != 10 {
			t.Fatalf("%d nodeclaims (%d launched), want 10", len(w.NodeClaims()), len(w.launched()))
		}
	})

	// "handles concurrent reconciliation without exceeding NodePool limits": passes at once (the
	// static loop's and static drift's) launch under one lock: never more than the replicas.
	t.Run("concurrent passes", func(t *testing.T) {
		w := newWorld(withLimit(pool("s", 5), 10))
		ctl := w.controller()
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() { errs <- ctl.Reconcile(ctx) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(w.NodeClaims()) != 5 {
			t.Fatalf("%d nodeclaims, want 5", len(w.NodeClaims()))
		}
	})

	// "should handle large replica counts".
	t.Run("a thousand replicas", func(t *testing.T) {
		w := newWorld(pool("s", 1000))
		if err := w.controller().Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if len(w.NodeClaims()) != 1000 {
			t.Fatalf("%d nodeclaims, want 1000", len(w.NodeClaims()))
		}
	})

	// Deprovisioning "should terminate excess nodeclaims when current count exceeds desired replicas":
	// annotated overprovisioned, deleted, and not deleted again by the next pass.
	t.Run("excess deleted once", func(t *testing.T) {
		w := newWorld(pool("s", 2))
		for i := range 4 {
			w.addClaim(fmt.Sprintf("s-%d", i), "s", true, true)
		}
		ctl := w.controller()
		for range 2 {
			if err := ctl.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(w.deleted, []string{"s-0", "s-1"}) || !slices.Equal(w.active(), []string{"s-2", "s-3"}) {
			t.Fatalf("deleted %v, active %v", w.deleted, w.active())
		}
		for _, name := range w.deleted {
			if r := w.NodeClaim(name).Annotations[karpv1.AnnotationDisruptionReason]; r != ReasonOverprovisioned {
				t.Fatalf("%s: disruption reason %q", name, r)
			}
		}
		if len(w.launched()) != 0 {
			t.Fatalf("launched %d while scaling down", len(w.launched()))
		}
	})

	// "should return error when nodeclaim deletion fails": the error comes back and the NodeClaims
	// stay; the next pass deletes them.
	t.Run("deletion error", func(t *testing.T) {
		w := newWorld(pool("s", 1))
		for i := range 3 {
			w.addClaim(fmt.Sprintf("s-%d", i), "s", true, true)
		}
		w.deleteErr = errors.New("simulated error deleting nodeclaims")
		ctl := w.controller()
		if err := ctl.Reconcile(ctx); err == nil || !strings.Contains(err.Error(), "simulated error") {
			t.Fatalf("err %v", err)
		}
		if len(w.active()) != 3 {
			t.Fatalf("active %v, want all 3", w.active())
		}
		w.deleteErr = nil
		if err := ctl.Reconcile(ctx); err != nil || !slices.Equal(w.active(), []string{"s-2"}) {
			t.Fatalf("second pass: %v, active %v", err, w.active())
		}
	})

	// "should prioritize empty nodes (with only daemonset pods) for termination", with the pods read
	// from the view: nodes 0 and 2 carry a DaemonSet pod only, 1 and 3 a pod each.
	t.Run("empty nodes go first", func(t *testing.T) {
		w := newWorld(pool("s", 2))
		for i := range 4 {
			name := fmt.Sprintf("s-%d", i)
			w.addClaim(name, "s", true, true)
			p := pods("p" + name)[0]
			if i%2 == 0 {
				p = dsPod("d" + name)
				p.Namespace = "kube-system"
			}
			w.pods[name] = []*corev1.Pod{p}
		}
		if err := w.controller().Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.active(), []string{"s-1", "s-3"}) {
			t.Fatalf("active %v, want s-1 s-3", w.active())
		}
	})
}
