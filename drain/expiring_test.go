package drain

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Karpenter's podDeleteTimeWithGracePeriod and the filter of its Drain:
// when each pod must be deleted to get its whole grace period before the
// node's termination time.
func TestExpiringDeletes(t *testing.T) {
	end := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pods := []corev1.Pod{
		*pod("short", graceSeconds(30)),
		*pod("long", graceSeconds(3600)), // longer than the whole grace period: at once
		*pod("no-grace"),                 // the API server always sets one; nothing to compute
		*pod("zero", graceSeconds(0)),
		*pod("ends-before", graceSeconds(600), deletedAt(end.Add(-time.Second))),
		*pod("ends-at", graceSeconds(600), deletedAt(end)),
		*pod("ends-after", graceSeconds(600), deletedAt(end.Add(time.Minute))), // Karpenter's forced eviction
	}
	var got []string
	for _, e := range expiringDeletes(pods, end) {
		got = append(got, e.pod.Name+"@"+e.at.Sub(end).String())
	}
	want := []string{"long@-1h0m0s", "ends-after@-10m0s", "short@-30s", "zero@0s"}
	if !slices.Equal(got, want) {
		t.Errorf("expiring deletes = %v, want %v", got, want)
	}
}

// deletes records the pod deletions a client is asked for, with their
// grace periods.
func deletes(c *fake.Clientset) map[string]int64 {
	out := map[string]int64{}
	for _, a := range c.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok || a.GetResource().Resource != "pods" || d.DeleteOptions.GracePeriodSeconds == nil {
			continue
		}
		out[d.Name] = *d.DeleteOptions.GracePeriodSeconds
	}
	return out
}

func TestDrainDeletesPodsForTheTerminationTime(t *testing.T) {
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	t.Run("past their delete time: at once, PDB and do-not-disrupt bypassed", func(t *testing.T) {
		c := fake.NewClientset(node(), pod("pinned", graceSeconds(600)), pod("dnd", graceSeconds(900), doNotDisrupt), pod("quick", graceSeconds(5)))
		// A PDB refuses pinned's eviction for as long as it exists.
		reactEvictions(c, func(name string) error {
			if _, err := c.Tracker().Get(podsGVR, "default", name); err != nil {
				return err
			}
			if name == "pinned" {
				return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
			}
			return nil
		})
		rec := &recorded{}
		opts := fastOpts()
		opts.KarpenterTermination, opts.Recorder = true, rec
		now := time.Now()
		opts.Now = func() time.Time { return now } // the grace is computed against this clock
		end := now.Add(20 * time.Second)
		res, err := New(c, zaptest.NewLogger(t), opts).Drain(context.Background(),
			Request{Node: nodeName, Reason: "expired", Deadline: end, TerminationTime: end, Evict: true})
		if err != nil {
			t.Fatalf("Drain: %v (result %+v)", err, res)
		}
		// dnd's delete comes first (the longest grace), so it is made
		// before pinned's ends the group and the drain.
		if got, want := deletes(c), map[string]int64{"pinned": 20, "dnd": 20}; !maps.Equal(got, want) {
			t.Errorf("deletions (pod: grace seconds) = %v, want %v", got, want)
		}
		var disrupted []string
		for _, ev := range rec.all() {
			if strings.Contains(ev, " Disrupted: ") {
				disrupted = append(disrupted, ev)
			}
		}
		if len(disrupted) != 2 || !strings.Contains(disrupted[0], "Pod/dnd/") ||
			!strings.Contains(disrupted[0], "The pod was granted 20 seconds of grace-period of its 900 terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.") {
			t.Errorf("Disrupted Events = %q, want dnd's then pinned's, in Karpenter's words", disrupted)
		}
	})
	t.Run("later: when the grace period still just fits", func(t *testing.T) {
		c := fake.NewClientset(node(), pod("pinned", graceSeconds(28)))
		reactEvictions(c, func(name string) error {
			if _, err := c.Tracker().Get(podsGVR, "default", name); err != nil {
				return err
			}
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		})
		opts := fastOpts()
		opts.KarpenterTermination = true
		end := time.Now().Add(30 * time.Second) // pinned is deleted about 2 s from now
		if _, err := New(c, zaptest.NewLogger(t), opts).Drain(context.Background(),
			Request{Node: nodeName, Reason: "expired", Deadline: end, TerminationTime: end, Evict: true}); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		if g, ok := deletes(c)["pinned"]; !ok || g < 1 || g > 28 {
			t.Errorf("pinned deleted with grace %d (made: %v), want 1..28 s", g, ok)
		}
	})
	t.Run("no termination time: nothing deleted", func(t *testing.T) {
		c := fake.NewClientset(node(), pod("dnd", graceSeconds(900), doNotDisrupt))
		reactEvictions(c, nil)
		opts := fastOpts()
		opts.KarpenterTermination = true
		res, err := New(c, zaptest.NewLogger(t), opts).Drain(context.Background(),
			Request{Node: nodeName, Reason: "expired", Deadline: time.Now().Add(20 * time.Second), Evict: true})
		if err != nil || len(deletes(c)) != 0 || !slices.Equal(res.Left, []string{"default/dnd"}) {
			t.Errorf("result %+v, err %v, deletions %v: want dnd left alone", res, err, deletes(c))
		}
	})
}

// gracefulDeletes makes c delete pods as an API server does with a
// kubelet: a deletion with a grace period only sets the deletionTimestamp
// (clk's now plus the grace), and the pod stays until its containers stop
// (here: for ever).
func gracefulDeletes(c *fake.Clientset, clk *fakeClock) {
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		if d.DeleteOptions.GracePeriodSeconds == nil || *d.DeleteOptions.GracePeriodSeconds == 0 {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(podsGVR, d.Namespace, d.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		if p.DeletionTimestamp == nil {
			at := metav1.NewTime(clk.Now().Add(time.Duration(*d.DeleteOptions.GracePeriodSeconds) * time.Second))
			p.DeletionTimestamp = &at
		}
		return true, nil, c.Tracker().Update(podsGVR, p, d.Namespace)
	})
}

// TestExpiringPodsDeletedOnTheDrainThatFindsThemDue: pods that only wait
// (do-not-disrupt, and a critical pod it holds) leave nothing to evict, so
// each drain returns at once; the drain that starts once a pod's grace
// period no longer fits before the termination time deletes it before it
// returns, with the time left as grace (at least 1 s), and each drain says
// when the next deletion is due.
func TestExpiringPodsDeletedOnTheDrainThatFindsThemDue(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 11, 0, 0, 0, time.UTC)
	end := t0.Add(time.Hour)
	c := fake.NewClientset(node(), pod("dnd", graceSeconds(600), doNotDisrupt),
		pod("critical", graceSeconds(60), priority("system-node-critical")))
	reactEvictions(c, nil)
	clk := &fakeClock{now: t0}
	gracefulDeletes(c, clk)
	opts := fastOpts()
	opts.KarpenterTermination, opts.Now = true, clk.Now
	d := New(c, zaptest.NewLogger(t), opts)
	for _, pass := range []struct {
		at      time.Time
		deleted map[string]int64 // all deletions so far (pod: grace seconds)
		next    time.Time
	}{
		{at: t0, deleted: map[string]int64{}, next: end.Add(-600 * time.Second)},
		{at: end.Add(-601 * time.Second), deleted: map[string]int64{}, next: end.Add(-600 * time.Second)},
		{at: end.Add(-590 * time.Second), deleted: map[string]int64{"dnd": 590}, next: end.Add(-60 * time.Second)},
		{at: end.Add(-61 * time.Second), deleted: map[string]int64{"dnd": 590}, next: end.Add(-60 * time.Second)},
		{at: end.Add(-500 * time.Millisecond), deleted: map[string]int64{"dnd": 590, "critical": 1}},
	} {
		clk.set(pass.at)
		res, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "expired", Deadline: time.Now().Add(time.Minute),
			TerminationTime: end, Evict: true})
		if err != nil {
			t.Fatalf("drain at %s: %v", pass.at, err)
		}
		if got := deletes(c); !maps.Equal(got, pass.deleted) {
			t.Errorf("drain at %s: deletions (pod: grace seconds) %v, want %v", pass.at, got, pass.deleted)
		}
		if !res.NextDelete.Equal(pass.next) {
			t.Errorf("drain at %s: next deletion at %s, want %s", pass.at, res.NextDelete, pass.next)
		}
	}
}

// A deletion the drain's end cuts off is still to do: it is not counted
// as made, so the drain says when it is due (Result.NextDelete).
func TestExpiringDeleteCutOffStaysDue(t *testing.T) {
	c := fake.NewClientset(pod("a", graceSeconds(30)), pod("b", graceSeconds(30)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteActionImpl).Name == "b" {
			cancel() // the drain ends while this call is out
			return true, nil, context.Canceled
		}
		return false, nil, nil
	})
	now := time.Now()
	opts := fastOpts()
	opts.Now = func() time.Time { return now }
	d := New(c, zaptest.NewLogger(t), opts)
	end := now.Add(10 * time.Second)
	due := []expiring{{pod: pod("a", graceSeconds(30)), at: now}, {pod: pod("b", graceSeconds(30)), at: now}}
	done, deleted := d.deleteExpiring(ctx, zaptest.NewLogger(t), Request{Node: nodeName, TerminationTime: end}, due)
	if done != 1 || len(deleted) != 1 {
		t.Errorf("deleteExpiring = %d done, %d deleted; want 1 and 1 (b's delete was cut off)", done, len(deleted))
	}
}
