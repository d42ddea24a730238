package termination

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/observe"
)

var claimsGR = schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}

// fakeClaims is an API server for NodeClaims: deletion with finalizers sets
// the deletion timestamp; removing the last finalizer of a deleting claim
// removes it. It also serves as the cache (claims and, from kube, nodes).
type fakeClaims struct {
	mu     sync.Mutex
	items  map[string]*karpv1.NodeClaim
	rv     int
	now    func() time.Time
	kube   kubernetes.Interface
	failOn string // the call that fails (once)
}

func newFakeClaims(kube kubernetes.Interface, now func() time.Time, ncs ...*karpv1.NodeClaim) *fakeClaims {
	f := &fakeClaims{items: map[string]*karpv1.NodeClaim{}, now: now, kube: kube}
	for _, nc := range ncs {
		f.items[nc.Name] = nc.DeepCopy()
	}
	return f
}

func (f *fakeClaims) fail(call string) error {
	if f.failOn == call {
		f.failOn = ""
		return fmt.Errorf("injected %s failure", call)
	}
	return nil
}

func (f *fakeClaims) GetNodeClaim(_ context.Context, name string) (*karpv1.NodeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nc, ok := f.items[name]
	if !ok {
		return nil, fmt.Errorf("getting nodeclaim %s: %w", name, apierrors.NewNotFound(claimsGR, name))
	}
	return nc.DeepCopy(), nil
}

func (f *fakeClaims) UpdateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return f.update("update", nc, func(cur, next *karpv1.NodeClaim) {
		next.ObjectMeta = *nc.ObjectMeta.DeepCopy()
		next.DeletionTimestamp = cur.DeletionTimestamp
	})
}

func (f *fakeClaims) UpdateNodeClaimStatus(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return f.update("status", nc, func(_, next *karpv1.NodeClaim) { next.Status = *nc.Status.DeepCopy() })
}

// update applies change to a copy of the stored claim, as the API server
// does: NotFound, Conflict on a stale resourceVersion, a new version, and
// removal when a deleting object loses its last finalizer.
func (f *fakeClaims) update(verb string, nc *karpv1.NodeClaim, change func(cur, next *karpv1.NodeClaim)) (*karpv1.NodeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail(verb); err != nil {
		return nil, err
	}
	cur, ok := f.items[nc.Name]
	if !ok {
		return nil, apierrors.NewNotFound(claimsGR, nc.Name)
	}
	if cur.ResourceVersion != nc.ResourceVersion {
		return nil, apierrors.NewConflict(claimsGR, nc.Name, fmt.Errorf("stale"))
	}
	next := cur.DeepCopy()
	change(cur, next)
	f.rv++
	next.ResourceVersion = strconv.Itoa(f.rv)
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		delete(f.items, nc.Name)
		return next, nil
	}
	f.items[nc.Name] = next
	return next.DeepCopy(), nil
}

func (f *fakeClaims) DeleteNodeClaim(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.items[name]
	if !ok {
		return nil
	}
	if len(cur.Finalizers) == 0 {
		delete(f.items, name)
		return nil
	}
	if cur.DeletionTimestamp == nil {
		cur.DeletionTimestamp = &metav1.Time{Time: f.now()}
		f.rv++
		cur.ResourceVersion = strconv.Itoa(f.rv)
	}
	return nil
}

func (f *fakeClaims) NodeClaims() []*karpv1.NodeClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fixture.Sorted(f.items)
}

func (f *fakeClaims) NodeClaimByProviderID(id string) *karpv1.NodeClaim {
	for _, nc := range f.NodeClaims() {
		if id != "" && nc.Status.ProviderID == id {
			return nc
		}
	}
	return nil
}

func (f *fakeClaims) Nodes() []*corev1.Node {
	l, err := f.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	var out []*corev1.Node
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out
}

func (f *fakeClaims) NodeByProviderID(id string) *corev1.Node {
	for _, n := range f.Nodes() {
		if id != "" && n.Spec.ProviderID == id {
			return n
		}
	}
	return nil
}

func (f *fakeClaims) Changes() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

func (f *fakeClaims) get(name string) *karpv1.NodeClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	if nc, ok := f.items[name]; ok {
		return nc.DeepCopy()
	}
	return nil
}

// fakeDrainer taints through the client like agent/drain and records calls;
// Drain blocks while gate is set and not closed.
type fakeDrainer struct {
	kube kubernetes.Interface
	gate chan struct{}
	err  error
	left []string  // do-not-disrupt pods the drain leaves
	next time.Time // the drain's Result.NextDelete

	mu       sync.Mutex
	cordons  []drain.Request
	drains   []drain.Request
	inFlight int
	maxSeen  int
}

func (d *fakeDrainer) Cordon(ctx context.Context, req drain.Request) error {
	d.mu.Lock()
	d.cordons = append(d.cordons, req)
	d.mu.Unlock()
	n, err := d.kube.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = append(n.Spec.Taints, drain.Taints(req.Reason)...)
	n.Spec.Unschedulable = true
	_, err = d.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

func (d *fakeDrainer) Drain(ctx context.Context, req drain.Request) (drain.Result, error) {
	d.mu.Lock()
	d.drains = append(d.drains, req)
	d.inFlight++
	d.maxSeen = max(d.maxSeen, d.inFlight)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inFlight--
		d.mu.Unlock()
	}()
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return drain.Result{}, ctx.Err()
		}
	}
	if d.err != nil {
		return drain.Result{}, d.err
	}
	n, err := d.kube.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
	if err == nil {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: drain.ConditionType, Status: corev1.ConditionTrue, Reason: "Drained"})
		_, _ = d.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	}
	return drain.Result{Evicted: []string{"default/web-1"}, Left: d.left, NextDelete: d.next}, nil
}

// fakeCloud records the instances terminated, and fails with err while it
// is set; a terminated instance is in state after when that is set
// ("gone": not found).
type fakeCloud struct {
	observe.Terminations
	err   error
	after string
	// lost: the cloud knows no instance at all, terminated or not (an
	// instance gone behind the cluster's back).
	lost bool
}

func (c *fakeCloud) Get(ctx context.Context, id string) (cloud.Instance, error) {
	if c.lost {
		return cloud.Instance{}, fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
	}
	inst, err := c.Terminations.Get(ctx, id)
	if inst.State == "terminated" && c.after != "" {
		if c.after == "gone" {
			return cloud.Instance{}, fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
		}
		inst.State = c.after
	}
	return inst, err
}

func (c *fakeCloud) Terminate(ctx context.Context, id string) error {
	if c.err != nil {
		return c.err
	}
	return c.Terminations.Terminate(ctx, id)
}

func (c *fakeCloud) calls() []string { return c.IDs() }
