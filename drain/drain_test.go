package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/poll"
)

const nodeName = "ip-10-0-0-1"

func node() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "uid-node"}}
}

// recorded keeps the Events a Drainer records, each as
// "Kind/name/uid Reason: message".
type recorded struct {
	mu  sync.Mutex
	got []string
}

func (r *recorded) Event(obj runtime.Object, _, reason, message string) {
	m, _ := meta.Accessor(obj)
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s/%s/%s %s: %s", kind, m.GetName(), m.GetUID(), reason, message))
}

func (r *recorded) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (r *recorded) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (r *recorded) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemonSet(p *corev1.Pod) {
	t := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1", Controller: &t}}
}
func mirror(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{corekarp.AnnotationDoNotDisrupt: "true"}
}
func graceSeconds(s int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

// evictions is a reactor for create pods/eviction: it counts each pod's
// requests and their grace periods, answers the error refuse returns for
// the pod (called under mu; nil or a nil error: no refusal), else deletes
// the pod and answers 201.
type evictions struct {
	mu     sync.Mutex
	refuse func(pod string) error
	calls  map[string]int
	graces map[string]*int64
	client *fake.Clientset
}

func (e *evictions) react(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateAction)
	if !ok || a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := ca.GetObject().(*policyv1.Eviction)
	e.mu.Lock()
	e.calls[ev.Name]++
	if ev.DeleteOptions != nil {
		e.graces[ev.Name] = ev.DeleteOptions.GracePeriodSeconds
	}
	var err error
	if e.refuse != nil {
		err = e.refuse(ev.Name)
	}
	e.mu.Unlock()
	if err != nil {
		return true, nil, err
	}
	return true, nil, e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), ev.Name)
}

// reactEvictions answers c's evictions with an evictions reactor.
func reactEvictions(c *fake.Clientset, refuse func(pod string) error) *evictions {
	e := &evictions{refuse: refuse, calls: map[string]int{}, graces: map[string]*int64{}, client: c}
	c.PrependReactor("create", "pods", e.react)
	return e
}

// pdbBlocks refuses pod's eviction with 429 block[pod] times (for ever if
// < 0).
func pdbBlocks(block map[string]int) func(pod string) error {
	return func(pod string) error {
		n := block[pod]
		if n == 0 {
			return nil
		}
		if n > 0 {
			block[pod] = n - 1
		}
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	}
}

func setup(t *testing.T, block map[string]int, objs ...runtime.Object) (*fake.Clientset, *evictions) {
	c := fake.NewClientset(append([]runtime.Object{node()}, objs...)...)
	return c, reactEvictions(c, pdbBlocks(block))
}

func fastOpts() Options {
	return Options{RetryBase: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, PollInterval: 5 * time.Millisecond}
}

// obs counts outcomes by result, keeps them in order as "result/code" and
// the drained reasons of the pods evicted.
type obs struct {
	mu      sync.Mutex
	n       map[string]int
	seen    []string
	drained []string
}

func (o *obs) Eviction(r string, code int, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[r]++
	o.seen = append(o.seen, fmt.Sprintf("%s/%d", r, code))
	if r == ResultEvicted {
		o.drained = append(o.drained, reason)
	}
}

func (o *obs) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

func TestDrainEvictsSkipsAndLeaves(t *testing.T) {
	c, e := setup(t, map[string]int{"web-1": 3},
		pod("web-1"), pod("web-2"), pod("web-3"), pod("ds-1", daemonSet), pod("static-1", mirror), pod("dnd-1", doNotDisrupt),
		pod("done-1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
	o := &obs{n: map[string]int{}}
	rec := &recorded{}
	opts := fastOpts()
	opts.Observer, opts.Recorder = o, rec
	d := New(c, zaptest.NewLogger(t), opts)
	res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Message: "spot ITN", Deadline: time.Now().Add(10 * time.Second), Evict: true})
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if got, want := res.Evicted, []string{"default/web-1", "default/web-2", "default/web-3"}; !slices.Equal(got, want) {
		t.Errorf("evicted %v, want %v", got, want)
	}
	if got, want := res.Skipped, []string{"default/done-1", "default/ds-1", "default/static-1"}; !slices.Equal(got, want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
	if got, want := res.Left, []string{"default/dnd-1"}; !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	if e.calls["web-1"] != 4 {
		t.Errorf("web-1 eviction calls = %d, want 4 (3 x 429 then 201)", e.calls["web-1"])
	}
	for _, p := range []string{"ds-1", "static-1", "dnd-1", "done-1"} {
		if e.calls[p] != 0 {
			t.Errorf("%s: %d evictions, want none", p, e.calls[p])
		}
		if _, err := c.CoreV1().Pods("default").Get(context.Background(), p, metav1.GetOptions{}); err != nil {
			t.Errorf("%s should still exist: %v", p, err)
		}
	}
	if o.n[ResultBlocked] != 3 || o.n[ResultEvicted] != 3 {
		t.Errorf("observer = %v, want 3 blocked and 3 evicted", o.n)
	}
	n, _ := c.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if !n.Spec.Unschedulable {
		t.Error("node not cordoned")
	}
	for _, want := range Taints("spot-interruption") {
		if !hasTaint(n.Spec.Taints, want) {
			t.Errorf("node lacks taint %v (has %v)", want, n.Spec.Taints)
		}
	}
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionType {
			cond = &n.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Reason != "Drained" || cond.Status != corev1.ConditionTrue {
		t.Errorf("condition = %+v, want %s True Drained", cond, ConditionType)
	}
	// Events reference the Node by UID (kubectl describe node finds them)
	// and the evicted pods; a PDB's refusal is Karpenter's FailedDraining.
	got := rec.all()
	for _, want := range []string{
		"Node/ip-10-0-0-1/uid-node Cordoned: Cordoned (spot-interruption): spot ITN",
		"Node/ip-10-0-0-1/uid-node Draining: Draining before ",
		"Node/ip-10-0-0-1/uid-node FailedDraining: Failed to drain node, evicting pod violates a PDB (Pod=default/web-1)",
		"Pod/web-1/uid-web-1 Evicted: Evicted pod: spot-interruption",
		"Pod/web-2/uid-web-2 Evicted: Evicted pod: spot-interruption",
		"Pod/web-3/uid-web-3 Evicted: Evicted pod: spot-interruption",
		"Node/ip-10-0-0-1/uid-node Drained: Drained: 3 evicted, 3 skipped",
	} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no Event %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(got), func(g string) bool { return !strings.Contains(g, " FailedDraining: ") })); n != 1 {
		t.Errorf("%d FailedDraining Events for one blocked pod, want 1:\n%s", n, strings.Join(got, "\n"))
	}
	// A second drain is harmless: nothing left to evict, node unchanged.
	if _, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(5 * time.Second), Evict: true}); err != nil {
		t.Fatalf("second Drain: %v", err)
	}
	n2, _ := c.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if len(n2.Spec.Taints) != 2 {
		t.Errorf("taints after second drain = %v, want 2", n2.Spec.Taints)
	}
}

func TestDrainDeadlineNamesStuckPods(t *testing.T) {
	c, _ := setup(t, map[string]int{"pinned": -1}, pod("pinned"), pod("free"))
	d := New(c, zaptest.NewLogger(t), fastOpts())
	// Long enough for the free pod's eviction on a loaded machine; the
	// pinned pod is blocked for ever.
	res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(3 * time.Second), Evict: true})
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if !slices.Equal(res.Stuck, []string{"default/pinned"}) || !slices.Equal(res.Evicted, []string{"default/free"}) {
		t.Errorf("result = %+v", res)
	}
}

func TestDrainForceAfter(t *testing.T) {
	c, e := setup(t, map[string]int{"pinned": -1}, pod("pinned"))
	o := &obs{n: map[string]int{}}
	opts := fastOpts()
	opts.ForceAfter = 100 * time.Millisecond
	opts.Observer = o
	d := New(c, zaptest.NewLogger(t), opts)
	res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(10 * time.Second), Evict: true})
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if !slices.Equal(res.Evicted, []string{"default/pinned"}) || o.n[ResultDeleted] != 1 || e.calls["pinned"] == 0 {
		t.Errorf("result %+v, observer %v: want pinned deleted after blocked evictions", res, o.n)
	}
}

// TestEvictionGrace: the node agent's evictions ask for the pod's own
// grace period capped by the time left before the interruption's deadline;
// Karpenter's termination asks for none (the pod's own, however long and
// however near the drain's deadline: the terminationGracePeriod is kept by
// deleting expiring pods).
func TestEvictionGrace(t *testing.T) {
	twenty := int64(20)
	for _, tc := range []struct {
		name      string
		karpenter bool
		want      map[string]*int64 // pod: grace asked (nil: none)
	}{
		{name: "agent: capped by the deadline", want: map[string]*int64{"slow": &twenty, "quick": nil, "long": &twenty}},
		{name: "karpenter termination: none", karpenter: true, want: map[string]*int64{"slow": nil, "quick": nil, "long": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := setup(t, nil, pod("slow", graceSeconds(600)), pod("quick", graceSeconds(5)), pod("long", graceSeconds(7200)))
			opts := fastOpts()
			now := time.Now()
			opts.Now = func() time.Time { return now } // the grace is computed against this clock
			opts.KarpenterTermination = tc.karpenter
			d := New(c, zaptest.NewLogger(t), opts)
			if _, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: now.Add(20 * time.Second), Evict: true}); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := e.graces[name]; (got == nil) != (want == nil) || (got != nil && *got != *want) {
					t.Errorf("%s pod grace = %s, want %s", name, graceText(got), graceText(want))
				}
			}
		})
	}
}

func graceText(g *int64) string {
	if g == nil {
		return "none"
	}
	return fmt.Sprint(*g)
}

// TestParallelismBoundsCallsNotPods: pods a disruption budget blocks for
// ever, more than Parallelism, keep no other pod of their group from its
// eviction: a slot is held only for an API call.
func TestParallelismBoundsCallsNotPods(t *testing.T) {
	block := map[string]int{}
	var objs []runtime.Object
	for i := range 48 {
		name := fmt.Sprintf("pinned-%02d", i)
		block[name] = -1
		objs = append(objs, pod(name))
	}
	var free []string
	for i := range 16 {
		free = append(free, fmt.Sprintf("free-%02d", i))
		objs = append(objs, pod(free[i]))
	}
	c, e := setup(t, block, objs...)
	rec := &recorded{}
	opts := fastOpts()
	opts.RetryBase, opts.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	opts.Parallelism, opts.KarpenterTermination, opts.Recorder = 32, true, rec
	d := New(c, zaptest.NewLogger(t), opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() {
		res, _ := d.Drain(ctx, Request{Node: nodeName, Reason: "Drifted", Deadline: time.Now().Add(time.Hour), Evict: true})
		done <- res
	}()
	evicted := func() int {
		n := 0
		for _, ev := range rec.all() {
			if strings.Contains(ev, " Evicted: ") {
				n++
			}
		}
		return n
	}
	poll.Until(t, 30*time.Second, 10*time.Millisecond, "the free pods' evictions", func() bool { return evicted() == len(free) })
	cancel()
	res := <-done
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range free {
		if e.calls[name] != 1 {
			t.Errorf("%s: %d eviction requests, want 1", name, e.calls[name])
		}
	}
	if len(res.Stuck) != 48 {
		t.Errorf("stuck %d pods, want the 48 pinned ones", len(res.Stuck))
	}
	failed := 0
	for _, ev := range rec.all() {
		if strings.Contains(ev, " FailedDraining: Failed to drain node, evicting pod violates a PDB (Pod=default/pinned-") {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d FailedDraining Events, want one per drain: %q", failed, rec.all())
	}
}

func TestDrainTaintOnlyAndDryRun(t *testing.T) {
	c, e := setup(t, nil, pod("web-1"))
	d := New(c, zaptest.NewLogger(t), fastOpts())
	if _, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "rebalance-recommendation", Deadline: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	n, _ := c.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if !n.Spec.Unschedulable || !hasTaint(n.Spec.Taints, Taints("rebalance-recommendation")[1]) || e.calls["web-1"] != 0 {
		t.Errorf("taint-only: node %+v, evictions %v", n.Spec, e.calls)
	}

	c2, e2 := setup(t, nil, pod("web-1"))
	opts := fastOpts()
	opts.DryRun = true
	d2 := New(c2, zaptest.NewLogger(t), opts)
	c2.ClearActions()
	if _, err := d2.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(time.Minute), Evict: true}); err != nil {
		t.Fatal(err)
	}
	for _, a := range c2.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("dry-run made a %s %s", v, a.GetResource().Resource)
		}
	}
	if e2.calls["web-1"] != 0 {
		t.Error("dry-run evicted a pod")
	}
}

func TestCordonDrainReasonOutranksTaintOnly(t *testing.T) {
	c, _ := setup(t, nil)
	d := New(c, zaptest.NewLogger(t), fastOpts())
	ctx := context.Background()
	dl := time.Now().Add(time.Minute)
	reason := func() string {
		n, _ := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		for _, tt := range n.Spec.Taints {
			if tt.Key == TaintInterruptionKey {
				return tt.Value
			}
		}
		return ""
	}
	_ = d.Cordon(ctx, Request{Node: nodeName, Reason: "rebalance-recommendation", Deadline: dl})
	_ = d.Cordon(ctx, Request{Node: nodeName, Reason: "spot-interruption", Deadline: dl, Evict: true})
	if r := reason(); r != "spot-interruption" {
		t.Errorf("reason after spot = %q", r)
	}
	_ = d.Cordon(ctx, Request{Node: nodeName, Reason: "rebalance-recommendation", Deadline: dl})
	if r := reason(); r != "spot-interruption" {
		t.Errorf("a taint-only reason replaced a drain's: %q", r)
	}
}

// TestAdvisoryCordonIsNotDisrupted: an advisory request (a rebalance
// recommendation under the taint policy) cordons without
// karpenter.sh/disrupted, which would tell the coordinator the node is
// going away when nothing takes it away; a later drain adds it.
func TestAdvisoryCordonIsNotDisrupted(t *testing.T) {
	c, _ := setup(t, nil)
	d := New(c, zaptest.NewLogger(t), fastOpts())
	ctx := context.Background()
	dl := time.Now().Add(time.Minute)
	disrupted := func() (bool, bool) {
		n, _ := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		for _, tt := range n.Spec.Taints {
			if tt.Key == corekarp.TaintDisruptedKey {
				return true, n.Spec.Unschedulable
			}
		}
		return false, n.Spec.Unschedulable
	}
	if err := d.Cordon(ctx, Request{Node: nodeName, Reason: "rebalance-recommendation", Deadline: dl, Advisory: true}); err != nil {
		t.Fatal(err)
	}
	if tainted, cordoned := disrupted(); tainted || !cordoned {
		t.Fatalf("advisory: disrupted taint %v, cordoned %v; want no taint, cordoned", tainted, cordoned)
	}
	if err := d.Cordon(ctx, Request{Node: nodeName, Reason: "spot-interruption", Deadline: dl, Evict: true}); err != nil {
		t.Fatal(err)
	}
	if tainted, _ := disrupted(); !tainted {
		t.Fatal("a drain after the advisory cordon did not add karpenter.sh/disrupted")
	}
}

// TestDrainWatchesTheCache: with Options.Pod (the coordinator's informer
// cache) an evicted pod is watched there until it is gone, and read from
// the API server once, to confirm it is gone, not one GET per poll.
func TestDrainWatchesTheCache(t *testing.T) {
	c, _ := setup(t, nil, pod("a"), pod("b"))
	var mu sync.Mutex
	reads := map[string]int{}
	opts := fastOpts()
	opts.Pod = func(namespace, name string) *corev1.Pod {
		mu.Lock()
		defer mu.Unlock()
		reads[name]++
		if reads[name] < 3 { // still there for two polls
			return pod(name)
		}
		return nil
	}
	d := New(c, zaptest.NewLogger(t), opts)
	res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "test", Deadline: time.Now().Add(time.Minute), Evict: true})
	if err != nil || len(res.Evicted) != 2 {
		t.Fatalf("drain: %v, evicted %v", err, res.Evicted)
	}
	gets := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
			gets++
		}
	}
	if gets != 2 {
		t.Fatalf("%d pod reads from the API server, want 2 (one per pod, confirming it gone)", gets)
	}
	if reads["a"] < 3 || reads["b"] < 3 {
		t.Fatalf("cache reads %v, want each pod watched until gone", reads)
	}
}
