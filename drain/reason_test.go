package drain

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestDrainedReason: Karpenter labels the pods it drains with its
// NodeClaim's DisruptionReason condition, which only voluntary disruption
// sets (Empty, Drifted, Underutilized); every other drain is "Forceful
// Termination".
func TestDrainedReason(t *testing.T) {
	for _, tc := range []struct{ reason, want string }{
		{"Empty", "Empty"},
		{"Drifted", "Drifted"},
		{"Underutilized", "Underutilized"},
		{"Expired", ReasonForceful}, // expiration is no disruption method of Karpenter's
		{"interrupted", ReasonForceful},
		{"deleted", ReasonForceful},
		{"spot-interruption", ReasonForceful},
		{"empty", ReasonForceful}, // condition reasons are case-sensitive
		{"", ReasonForceful},
	} {
		if got := DrainedReason(tc.reason); got != tc.want {
			t.Errorf("DrainedReason(%q) = %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// TestObserverDrainedReason: the Observer gets, with each eviction, the
// drained reason of the request: its EvictionReason (the NodeClaim's
// disruption reason), else its Reason.
func TestObserverDrainedReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"disruption reason", Request{Reason: "Drifted", EvictionReason: "Drifted"}, "Drifted"},
		{"eviction reason first", Request{Reason: "deleted", EvictionReason: "Underutilized"}, "Underutilized"},
		{"forceful", Request{Reason: "interrupted", EvictionReason: "interrupted"}, ReasonForceful},
		{"agent notice", Request{Reason: "spot-interruption"}, ReasonForceful},
		{"reason alone", Request{Reason: "Empty"}, "Empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := setup(t, nil, pod("web-1"), pod("web-2"))
			o := &obs{n: map[string]int{}}
			opts := fastOpts()
			opts.Observer = o
			req := tc.req
			req.Node, req.Deadline, req.Evict = nodeName, time.Now().Add(10*time.Second), true
			if _, err := New(c, zaptest.NewLogger(t), opts).Drain(context.Background(), req); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			if want := []string{tc.want, tc.want}; !slices.Equal(o.drained, want) {
				t.Errorf("drained reasons %v, want %v", o.drained, want)
			}
		})
	}
}
