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
		if err != nil || len(deletes(c)) != 0 || !equal(res.Left, []string{"default/dnd"}) {
			t.Errorf("result %+v, err %v, deletions %v: want dnd left alone", res, err, deletes(c))
		}
	})
}
