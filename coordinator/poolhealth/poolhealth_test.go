package poolhealth

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// Karpenter's nodepoolhealth tracker: the last 4 outcomes, unhealthy once
// half of them failed.
func TestStatus(t *testing.T) {
	const pool = types.UID("pool")
	for _, tc := range []struct {
		name     string
		outcomes []bool
		want     Status
	}{
		{"nothing yet", nil, Unknown},
		{"one success", []bool{true}, Healthy},
		{"one failure of one", []bool{false}, Healthy}, // 1/4 of the window
		{"two failures", []bool{false, false}, Unhealthy},
		{"two of four failed", []bool{true, false, true, false}, Unhealthy},
		{"the oldest failures leave the window", []bool{false, false, true, true, true}, Healthy},
		{"three successes then two failures", []bool{true, true, true, false, false}, Unhealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			for _, ok := range tc.outcomes {
				if ok {
					s.Registered(pool)
				} else {
					s.Failed(pool, Failure{Reason: "RegistrationFailed"})
				}
			}
			if got, _ := s.Status(pool); got != tc.want {
				t.Errorf("status %v, want %v", got, tc.want)
			}
		})
	}
}

// A new leader seeds its record from the condition as written; a reset
// forgets; hydration never overwrites what was recorded.
func TestHydrateAndReset(t *testing.T) {
	const pool = types.UID("pool")
	s := New()
	s.Hydrate(pool, Unhealthy, Failure{Reason: "LaunchFailed", Message: "no capacity"})
	if st, why := s.Status(pool); st != Unhealthy || why.Reason != "LaunchFailed" {
		t.Fatalf("hydrated as %v %+v, want unhealthy LaunchFailed", st, why)
	}
	// As Karpenter's buffer: three successes are needed to be healthy again.
	for i := range 3 {
		if st, _ := s.Status(pool); st != Unhealthy {
			t.Fatalf("healthy after %d successes", i)
		}
		s.Registered(pool)
	}
	if st, _ := s.Status(pool); st != Healthy {
		t.Fatal("still unhealthy after three successes")
	}
	s.Hydrate(pool, Unhealthy, Failure{})
	if st, _ := s.Status(pool); st != Healthy {
		t.Fatal("hydration overwrote the record")
	}
	s.Reset(pool)
	if st, _ := s.Status(pool); st != Unknown {
		t.Fatal("reset kept the record")
	}
}
