package kube

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// fanout pokes its subscribers' channels (buffer 1, never blocking).
type fanout struct {
	mu   sync.Mutex
	subs map[int]chan struct{}
	next int
}

func (f *fanout) subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	id := f.next
	f.next++
	f.subs[id] = ch
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

func (f *fanout) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// provisioningTriggers decides which cache events start a provisioning
// batch, as Karpenter's provisioner.trigger.pod and provisioner.trigger.node
// controllers do: an event of a provisionable pod or of a node with the
// karpenter.sh/disrupted taint, each object once per batch (Karpenter's
// batcher keeps the UIDs of its window and forgets them when the window
// closes: rearm), so a pod's further updates do not stretch the window,
// and the provisioner's resync passes every 10 s, as Karpenter requeues
// each such pod. Unlike
// Karpenter, a NodePool or EC2NodeClass that appears, changes its spec or
// becomes Ready or not, a Node that joins or turns Ready or not (pods
// nominated to it that did not fit are planned again at once, not at the
// next resync), and a NodeClaim that is being deleted (its pods need room
// elsewhere, and its termination waits for a pass that saw it) or gone (a
// launch that failed) trigger too: they are rare and pods wait for them.
// Every other event (pod status churn, node heartbeats, Joiner's own status
// writes) does not, so a busy cluster does not hold a batch open to its
// 10 s maximum.
type provisioningTriggers struct {
	out fanout

	mu sync.Mutex
	// on holds the pods and nodes that have triggered since the last
	// rearm and still qualify.
	on map[types.UID]struct{}
	// fired counts the triggers (for tests).
	fired int
}

// observe records whether the object uid qualifies now and triggers when
// it has just begun to.
func (t *provisioningTriggers) observe(uid types.UID, qualifies bool) {
	t.mu.Lock()
	_, was := t.on[uid]
	switch {
	case qualifies && !was:
		if t.on == nil {
			t.on = map[types.UID]struct{}{}
		}
		t.on[uid] = struct{}{}
		t.fired++
	case !qualifies:
		delete(t.on, uid)
	}
	t.mu.Unlock()
	if qualifies && !was {
		t.out.poke()
	}
}

// rearm forgets which objects triggered: their next event triggers again
// (the provisioner calls it as a batch closes, before its pass).
func (t *provisioningTriggers) rearm() {
	t.mu.Lock()
	clear(t.on)
	t.mu.Unlock()
}

// always triggers.
func (t *provisioningTriggers) always() {
	t.mu.Lock()
	t.fired++
	t.mu.Unlock()
	t.out.poke()
}

// handlers are the informers' event handlers that feed t.
func (t *provisioningTriggers) handlers() (pods, nodes, classes, nodeClaims cache.ResourceEventHandler) {
	uidOf := func(obj any) (types.UID, bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return "", false
		}
		return o.GetUID(), true
	}
	forget := func(obj any) {
		if uid, ok := uidOf(obj); ok {
			t.observe(uid, false)
		}
	}
	pods = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.pod(obj) },
		UpdateFunc: func(_, obj any) { t.pod(obj) },
		DeleteFunc: forget,
	}
	nodes = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			t.node(obj)
			t.always() // new capacity: nominations to it are settled
		},
		UpdateFunc: func(old, obj any) {
			t.node(obj)
			if nodeReady(old) != nodeReady(obj) {
				t.always()
			}
		},
		DeleteFunc: forget,
	}
	classes = cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.always() },
		UpdateFunc: func(old, obj any) {
			if classChanged(old, obj) {
				t.always()
			}
		},
	}
	nodeClaims = cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			if !deleting(old) && deleting(obj) {
				t.always() // its pods need room elsewhere; termination waits for a pass
			}
		},
		DeleteFunc: func(any) { t.always() },
	}
	return pods, nodes, classes, nodeClaims
}

func (t *provisioningTriggers) pod(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		t.observe(p.UID, podutil.Provisionable(p))
	}
}

func (t *provisioningTriggers) node(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		t.observe(n.UID, slices.ContainsFunc(n.Spec.Taints, func(c corev1.Taint) bool {
			return c.Key == karpv1.TaintDisruptedKey && c.Effect == corev1.TaintEffectNoSchedule
		}))
	}
}

// deleting: the object has a deletion timestamp.
func deleting(obj any) bool {
	o, ok := obj.(metav1.Object)
	return ok && o.GetDeletionTimestamp() != nil
}

// nodeReady is a Node's Ready condition status ("" for none).
func nodeReady(obj any) corev1.ConditionStatus {
	if n, ok := obj.(*corev1.Node); ok {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
	}
	return ""
}

// classChanged: a NodePool's or EC2NodeClass's spec changed (generation)
// or its Ready condition did.
func classChanged(old, obj any) bool {
	ready := func(o any) (int64, metav1.ConditionStatus, bool) {
		switch c := o.(type) {
		case *karpv1.NodePool:
			return c.Generation, conditionStatus(c.Status.Conditions, karpv1.ConditionReady), true
		case *awsv1.EC2NodeClass:
			return c.Generation, conditionStatus(c.Status.Conditions, awsv1.ConditionReady), true
		}
		return 0, "", false
	}
	og, os, ok1 := ready(old)
	ng, ns, ok2 := ready(obj)
	return !ok1 || !ok2 || og != ng || os != ns
}

func conditionStatus(conds []metav1.Condition, t string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
