package drain

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
)

// fakeClock is a drain clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// deletedAt marks a pod terminating since at (its deletionTimestamp: the
// deletion's time plus its grace period).
func deletedAt(at time.Time) podOpt {
	return func(p *corev1.Pod) {
		t := metav1.NewTime(at)
		p.DeletionTimestamp = &t
		p.Finalizers = []string{"example.com/kubelet-is-dead"}
	}
}

// deadKubelet answers c's evictions the way an API server does for a node
// whose kubelet is gone: the pod gets a deletionTimestamp (now + its grace)
// and stays. It counts the evictions per pod.
func deadKubelet(c *fake.Clientset, clk *fakeClock) map[string]int {
	var mu sync.Mutex
	calls := map[string]int{}
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		mu.Lock()
		calls[ev.Name]++
		mu.Unlock()
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		obj, err := c.Tracker().Get(gvr, a.GetNamespace(), ev.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		t := metav1.NewTime(clk.Now().Add(30 * time.Second))
		p.DeletionTimestamp = &t
		return true, nil, c.Tracker().Update(gvr, p, a.GetNamespace())
	})
	return calls
}

// TestDrainIgnoresPodsStuckTerminating: as Karpenter's IsDrainable, a pod
// whose deletionTimestamp is more than a minute past (its kubelet is gone)
// is neither evicted nor waited for, whether it was so when the drain
// listed the pods or became so while the drain waited for it; a pod
// terminating for less is still waited for.
func TestDrainIgnoresPodsStuckTerminating(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name string
		pods []runtime.Object
		// later: the clock moves to t0+later once the drain has read a
		// pod back (0: it stays at t0).
		later  time.Duration
		window time.Duration // the drain's deadline from now
		// deadKubelet: evicted pods get a deletionTimestamp and stay.
		deadKubelet                     bool
		wantErr                         error
		wantEvicted, wantSkipped, stuck []string
		evictions                       map[string]int
	}{{
		name:        "stuck when listed: not evicted, not waited for",
		pods:        []runtime.Object{pod("gone", deletedAt(t0.Add(-61*time.Second))), pod("web")},
		window:      30 * time.Second,
		wantEvicted: []string{"default/web"}, wantSkipped: []string{"default/gone"},
		evictions: map[string]int{"web": 1},
	}, {
		name:        "stuck do-not-disrupt pod: not left either",
		pods:        []runtime.Object{pod("dnd", doNotDisrupt, deletedAt(t0.Add(-2*time.Minute)))},
		window:      30 * time.Second,
		wantSkipped: []string{"default/dnd"},
	}, {
		name:        "terminating when listed, stuck while waited for",
		pods:        []runtime.Object{pod("slow", deletedAt(t0.Add(30*time.Second)))},
		later:       2 * time.Minute,
		window:      30 * time.Second,
		wantEvicted: []string{"default/slow"},
	}, {
		name:        "evicted, then stuck: one eviction, the drain ends",
		pods:        []runtime.Object{pod("web")},
		later:       2 * time.Minute,
		window:      30 * time.Second,
		deadKubelet: true,
		wantEvicted: []string{"default/web"},
		evictions:   map[string]int{"web": 1},
	}, {
		name:    "terminating for less than a minute: waited for until the deadline",
		pods:    []runtime.Object{pod("slow", deletedAt(t0.Add(-59*time.Second)))},
		window:  300 * time.Millisecond,
		wantErr: ErrDeadline, stuck: []string{"default/slow"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(append([]runtime.Object{node()}, tc.pods...)...)
			clk := &fakeClock{now: t0}
			var calls map[string]int
			if tc.deadKubelet {
				calls = deadKubelet(c, clk)
			} else {
				calls = reactEvictions(c, nil).calls
			}
			if tc.later > 0 {
				c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					clk.set(t0.Add(tc.later))
					return false, nil, nil
				})
			}
			opts := fastOpts()
			opts.Now = clk.Now
			d := New(c, zaptest.NewLogger(t), opts)
			res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(tc.window), Evict: true})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Drain: %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(res.Evicted, tc.wantEvicted) || !slices.Equal(res.Skipped, tc.wantSkipped) || !slices.Equal(res.Stuck, tc.stuck) || len(res.Left) > 0 {
				t.Errorf("result %+v, want evicted %v, skipped %v, stuck %v", res, tc.wantEvicted, tc.wantSkipped, tc.stuck)
			}
			for p, n := range calls {
				if n != tc.evictions[p] {
					t.Errorf("%s: %d evictions, want %d", p, n, tc.evictions[p])
				}
			}
			for p, n := range tc.evictions {
				if calls[p] != n {
					t.Errorf("%s: %d evictions, want %d", p, calls[p], n)
				}
			}
		})
	}
}

// TestDrainDoNotDisruptDurations: karpenter.sh/do-not-disrupt protects a
// pod when "true" or a positive duration not yet elapsed since the pod
// started (Karpenter's IsDoNotDisruptActive); a pod without a start time
// is protected; any other value is as if the annotation were absent.
func TestDrainDoNotDisruptDurations(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name, value string
		started     time.Duration // before t0; 0: no start time
		left        bool
	}{
		{"true", "true", time.Hour, true},
		{"duration not elapsed", "5m", 4 * time.Minute, true},
		{"duration elapsed", "5m", 6 * time.Minute, false},
		{"duration, no start time", "1h", 0, true},
		{"compound duration", "1h30m", 80 * time.Minute, true},
		{"false", "false", time.Minute, false},
		{"not a duration", "forever", time.Minute, false},
		{"zero", "0s", time.Minute, false},
		{"negative", "-5m", time.Minute, false},
		{"no unit", "300", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("app", func(p *corev1.Pod) {
				p.Annotations = map[string]string{corekarp.AnnotationDoNotDisrupt: tc.value}
				if tc.started > 0 {
					st := metav1.NewTime(t0.Add(-tc.started))
					p.Status.StartTime = &st
				}
			})
			c, e := setup(t, nil, p)
			opts := fastOpts()
			opts.Now = func() time.Time { return t0 }
			d := New(c, zaptest.NewLogger(t), opts)
			res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(time.Minute), Evict: true})
			if err != nil {
				t.Fatalf("Drain: %v", err)
			}
			want := Result{Evicted: []string{"default/app"}}
			if tc.left {
				want = Result{Left: []string{"default/app"}}
			}
			if !slices.Equal(res.Left, want.Left) || !slices.Equal(res.Evicted, want.Evicted) {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if got := e.calls["app"]; got != len(want.Evicted) {
				t.Errorf("%d evictions, want %d", got, len(want.Evicted))
			}
		})
	}
}
