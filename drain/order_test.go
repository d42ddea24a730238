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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
)

// slowKubelet answers evictions as a live kubelet does, but slowly: the
// pod is marked terminating and goes only once the drain has read it
// twice more, so a drain that did not wait for a group would evict the
// next one while that group is still on the node. It records the order of
// the evictions and, at each, every pod of an earlier group (group) still
// there. Evictions of the pods in refuse get 429 for ever.
type slowKubelet struct {
	c      *fake.Clientset
	group  map[string]int // pod name -> its eviction group
	refuse []string

	mu         sync.Mutex
	order      []string
	readsLeft  map[string]int
	violations []string
}

func newSlowKubelet(c *fake.Clientset, group map[string]int, refuse []string) *slowKubelet {
	k := &slowKubelet{c: c, group: group, refuse: refuse, readsLeft: map[string]int{}}
	c.PrependReactor("create", "pods", k.evict)
	c.PrependReactor("get", "pods", k.get)
	return k
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

func (k *slowKubelet) evict(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateAction)
	if !ok || a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	name := ca.GetObject().(*policyv1.Eviction).Name
	if slices.Contains(k.refuse, name) {
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.order = append(k.order, name)
	if g, ok := k.group[name]; ok {
		for other, og := range k.group {
			if og >= g {
				continue
			}
			if _, err := k.c.Tracker().Get(podsGVR, a.GetNamespace(), other); err == nil {
				k.violations = append(k.violations, fmt.Sprintf("%s (group %d) evicted while %s (group %d) is on the node", name, g, other, og))
			}
		}
	}
	obj, err := k.c.Tracker().Get(podsGVR, a.GetNamespace(), name)
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	t := metav1.NewTime(time.Now().Add(30 * time.Second))
	p.DeletionTimestamp = &t
	k.readsLeft[name] = 2
	return true, nil, k.c.Tracker().Update(podsGVR, p, a.GetNamespace())
}

// get counts the drain's reads of a terminating pod and removes it at the
// last (the read then finds it gone).
func (k *slowKubelet) get(a k8stesting.Action) (bool, runtime.Object, error) {
	name := a.(k8stesting.GetAction).GetName()
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.readsLeft[name]
	if !ok {
		return false, nil, nil
	}
	if n--; n > 0 {
		k.readsLeft[name] = n
		return false, nil, nil
	}
	delete(k.readsLeft, name)
	return false, nil, k.c.Tracker().Delete(podsGVR, a.GetNamespace(), name)
}

func (k *slowKubelet) result() (order, violations []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.order), slices.Clone(k.violations)
}

func priority(class string) podOpt {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = class }
}

func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

// ownedByNode: a static pod's mirror as Karpenter's IsOwnedByNode sees it
// (an owner reference to its Node, no mirror annotation).
func ownedByNode(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: "uid-node"})
}

func tolerates(t corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}

// TestDrainOrder: with KarpenterTermination the drain evicts in
// Karpenter's four groups (non-critical, non-critical DaemonSet, critical,
// critical DaemonSet), each once the previous one is gone; a do-not-disrupt
// pod holds the groups after its own; pods tolerating
// karpenter.sh/disrupted:NoSchedule are skipped. Without it (the agent's)
// DaemonSet pods are skipped and the rest evicted, tolerating pods too.
func TestDrainOrder(t *testing.T) {
	const (
		nodeCritical    = "system-node-critical"
		clusterCritical = "system-cluster-critical"
	)
	tolDisrupted := tolerates(corev1.Toleration{Key: corekarp.TaintDisruptedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	tolEverything := tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists})
	tolOther := tolerates(corev1.Toleration{Key: "example.com/other", Operator: corev1.TolerationOpExists})
	tolNoExecute := tolerates(corev1.Toleration{Key: corekarp.TaintDisruptedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	// Names sort against the groups' order, so a drain evicting in list
	// order would start with the last group.
	everyGroup := func() []*corev1.Pod {
		return []*corev1.Pod{
			pod("a-critical-ds", daemonSet, priority(nodeCritical)),
			pod("b-critical", priority(clusterCritical)), pod("c-critical", priority(nodeCritical)),
			pod("d-ds", daemonSet), pod("e-ds", daemonSet, priority("high")),
			pod("f-app"), pod("g-app"), pod("h-app"),
			pod("static", mirror),
		}
	}
	tests := []struct {
		name      string
		karpenter bool
		pods      []*corev1.Pod
		refuse    []string
		// group: each pod the drain may evict, by its Karpenter group.
		group                                                   map[string]int
		wantEvicted, wantSkipped, wantLeft, wantHeld, wantStuck []string
		wantErr                                                 error
	}{
		{
			name: "karpenter groups", karpenter: true, pods: everyGroup(),
			group:       map[string]int{"f-app": 0, "g-app": 0, "h-app": 0, "d-ds": 1, "e-ds": 1, "b-critical": 2, "c-critical": 2, "a-critical-ds": 3},
			wantEvicted: []string{"a-critical-ds", "b-critical", "c-critical", "d-ds", "e-ds", "f-app", "g-app", "h-app"},
			wantSkipped: []string{"static"},
		},
		{
			name: "karpenter groups, first ones empty", karpenter: true,
			pods:        []*corev1.Pod{pod("a-critical-ds", daemonSet, priority(clusterCritical)), pod("b-critical", priority(nodeCritical))},
			group:       map[string]int{"b-critical": 2, "a-critical-ds": 3},
			wantEvicted: []string{"a-critical-ds", "b-critical"},
		},
		{
			name: "agent: DaemonSet pods skipped", pods: everyGroup(),
			wantEvicted: []string{"b-critical", "c-critical", "f-app", "g-app", "h-app"},
			wantSkipped: []string{"a-critical-ds", "d-ds", "e-ds", "static"},
		},
		{
			name: "karpenter: pods tolerating karpenter.sh/disrupted skipped", karpenter: true,
			pods: []*corev1.Pod{pod("tol-disrupted", tolDisrupted), pod("tol-everything", tolEverything), pod("tol-ds", daemonSet, tolEverything),
				pod("tol-other", tolOther), pod("tol-noexecute", tolNoExecute)},
			group:       map[string]int{"tol-other": 0, "tol-noexecute": 0},
			wantEvicted: []string{"tol-noexecute", "tol-other"},
			wantSkipped: []string{"tol-disrupted", "tol-ds", "tol-everything"},
		},
		{
			name:        "agent: tolerating pods evicted",
			pods:        []*corev1.Pod{pod("tol-disrupted", tolDisrupted), pod("tol-everything", tolEverything), pod("tol-ds", daemonSet, tolEverything)},
			wantEvicted: []string{"tol-disrupted", "tol-everything"},
			wantSkipped: []string{"tol-ds"},
		},
		{
			name: "karpenter: a do-not-disrupt pod holds the later groups", karpenter: true,
			pods:        []*corev1.Pod{pod("app"), pod("dnd", doNotDisrupt), pod("ds", daemonSet), pod("critical", priority(nodeCritical))},
			group:       map[string]int{"app": 0},
			wantEvicted: []string{"app"}, wantLeft: []string{"dnd"}, wantHeld: []string{"critical", "ds"},
		},
		{
			name: "karpenter: a critical do-not-disrupt pod holds critical DaemonSet pods", karpenter: true,
			pods: []*corev1.Pod{pod("app"), pod("ds", daemonSet), pod("critical", priority(nodeCritical)),
				pod("critical-dnd", doNotDisrupt, priority(clusterCritical)), pod("critical-ds", daemonSet, priority(nodeCritical))},
			group:       map[string]int{"app": 0, "ds": 1, "critical": 2},
			wantEvicted: []string{"app", "critical", "ds"}, wantLeft: []string{"critical-dnd"}, wantHeld: []string{"critical-ds"},
		},
		{
			name:        "agent: a do-not-disrupt pod holds nothing",
			pods:        []*corev1.Pod{pod("app"), pod("dnd", doNotDisrupt), pod("critical", priority(nodeCritical))},
			wantEvicted: []string{"app", "critical"}, wantLeft: []string{"dnd"},
		},
		{
			// Karpenter's "tolerate karpenter disruption taint with equal
			// operator" and "evict pods that tolerate the
			// node.kubernetes.io/unschedulable taint": only a toleration
			// matching karpenter.sh/disrupted:NoSchedule (empty value)
			// keeps a pod; the cordon's own taint does not count.
			name: "karpenter: toleration operators and the unschedulable taint", karpenter: true,
			pods: []*corev1.Pod{
				pod("tol-equal", tolerates(corev1.Toleration{Key: corekarp.TaintDisruptedKey, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
				pod("tol-key-any-effect", tolerates(corev1.Toleration{Key: corekarp.TaintDisruptedKey, Operator: corev1.TolerationOpExists})),
				pod("tol-equal-other-value", tolerates(corev1.Toleration{Key: corekarp.TaintDisruptedKey, Operator: corev1.TolerationOpEqual, Value: "true",
					Effect: corev1.TaintEffectNoSchedule})),
				pod("tol-unschedulable", tolerates(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists,
					Effect: corev1.TaintEffectNoSchedule})),
			},
			group:       map[string]int{"tol-equal-other-value": 0, "tol-unschedulable": 0},
			wantEvicted: []string{"tol-equal-other-value", "tol-unschedulable"},
			wantSkipped: []string{"tol-equal", "tol-key-any-effect"},
		},
		{
			// Karpenter's "delete nodes with terminal pods" and "not evict
			// static pods": neither is waited for, in any group; a pod
			// without an owner is evicted like any other.
			name: "karpenter: terminal and static pods skipped in every group", karpenter: true,
			pods: []*corev1.Pod{
				pod("done", phase(corev1.PodSucceeded)), pod("failed", phase(corev1.PodFailed)),
				pod("failed-critical-ds", daemonSet, priority(nodeCritical), phase(corev1.PodFailed)),
				pod("static-critical", ownedByNode, priority(nodeCritical)), pod("mirror", mirror),
				pod("ownerless"), pod("ds", daemonSet),
			},
			group:       map[string]int{"ownerless": 0, "ds": 1},
			wantEvicted: []string{"ds", "ownerless"},
			wantSkipped: []string{"done", "failed", "failed-critical-ds", "mirror", "static-critical"},
		},
		{
			// Karpenter's IsDoNotDisruptActive: a value neither "true" nor a
			// duration is ignored, so the pod neither stays nor holds.
			name: "karpenter: an unreadable do-not-disrupt holds nothing", karpenter: true,
			pods: []*corev1.Pod{pod("app", func(p *corev1.Pod) { p.Annotations = map[string]string{corekarp.AnnotationDoNotDisrupt: "forever"} }),
				pod("ds", daemonSet)},
			group:       map[string]int{"app": 0, "ds": 1},
			wantEvicted: []string{"app", "ds"},
		},
		{
			name: "karpenter: a group not gone at the deadline keeps the later ones", karpenter: true,
			pods:   []*corev1.Pod{pod("pinned"), pod("ds", daemonSet), pod("critical", priority(nodeCritical))},
			refuse: []string{"pinned"}, group: map[string]int{"pinned": 0, "ds": 1, "critical": 2},
			wantStuck: []string{"critical", "ds", "pinned"}, wantErr: ErrDeadline,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{node()}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			c := fake.NewClientset(objs...)
			k := newSlowKubelet(c, tt.group, tt.refuse)
			opts := fastOpts()
			opts.KarpenterTermination = tt.karpenter
			d := New(c, zaptest.NewLogger(t), opts)
			deadline := time.Now().Add(time.Minute)
			if tt.wantErr != nil {
				deadline = time.Now().Add(time.Second) // a refused pod never goes
			}
			res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "expired", Deadline: deadline, Evict: true})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Drain: %v, want %v", err, tt.wantErr)
			}
			for _, f := range []struct {
				what      string
				got, want []string
			}{
				{"evicted", res.Evicted, tt.wantEvicted}, {"skipped", res.Skipped, tt.wantSkipped},
				{"left", res.Left, tt.wantLeft}, {"held", res.Held, tt.wantHeld}, {"stuck", res.Stuck, tt.wantStuck},
			} {
				if want := qualified(f.want); !slices.Equal(f.got, want) {
					t.Errorf("%s %v, want %v", f.what, f.got, want)
				}
			}
			order, violations := k.result()
			if len(violations) > 0 {
				t.Errorf("evicted out of Karpenter's order %v:\n%s", order, strings.Join(violations, "\n"))
			}
			evicted := slices.Clone(order)
			slices.Sort(evicted)
			if !slices.Equal(evicted, tt.wantEvicted) {
				t.Errorf("eviction requests for %v, want one each for %v", evicted, tt.wantEvicted)
			}
			for i := 1; i < len(order) && tt.karpenter; i++ {
				if tt.group[order[i]] < tt.group[order[i-1]] {
					t.Errorf("evictions %v: %s (group %d) after %s (group %d)", order, order[i], tt.group[order[i]], order[i-1], tt.group[order[i-1]])
				}
			}
		})
	}
}

// qualified is the names as a Result lists them (namespace/name).
func qualified(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "default/" + n
	}
	return out
}
