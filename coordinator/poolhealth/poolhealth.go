// Package poolhealth keeps each NodePool's recent node registrations, as
// Karpenter's nodepoolhealth state does, for its NodeRegistrationHealthy
// condition: the lifecycle records each NodeClaim that registered or timed
// out, the nodeclass loop writes the condition from it. It lives in memory,
// per leadership term; a new leader starts from the condition as written.
package poolhealth

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// The window Karpenter judges: its last 4 registrations, unhealthy when at
// least half failed.
const (
	BufferSize     = 4
	thresholdFalse = 0.5
)

// Status is a pool's registration health.
type Status int

// Statuses.
const (
	// Unknown: nothing recorded since the pool or its class last changed.
	Unknown Status = iota
	Healthy
	Unhealthy
)

// Failure is why a NodeClaim did not register, for the condition.
type Failure struct {
	Reason, Message string
}

type tracker struct {
	outcomes []bool // the last BufferSize, oldest first
	last     Failure
}

func (t *tracker) status() Status {
	if len(t.outcomes) == 0 {
		return Unknown
	}
	failed := 0
	for _, ok := range t.outcomes {
		if !ok {
			failed++
		}
	}
	if float64(failed)/BufferSize >= thresholdFalse {
		return Unhealthy
	}
	return Healthy
}

func (t *tracker) add(ok bool) {
	t.outcomes = append(t.outcomes, ok)
	if n := len(t.outcomes); n > BufferSize {
		t.outcomes = t.outcomes[n-BufferSize:]
	}
}

// State is every pool's tracker, by NodePool UID. Safe for concurrent use;
// the zero value is not: use New.
type State struct {
	mu       sync.Mutex
	trackers map[types.UID]*tracker
}

// New returns an empty State.
func New() *State { return &State{trackers: map[types.UID]*tracker{}} }

func (s *State) get(uid types.UID) *tracker {
	t := s.trackers[uid]
	if t == nil {
		t = &tracker{}
		s.trackers[uid] = t
	}
	return t
}

// Registered records a NodeClaim of the pool that registered.
func (s *State) Registered(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(uid).add(true)
}

// Failed records a NodeClaim of the pool that did not launch or register
// in time, and why.
func (s *State) Failed(uid types.UID, why Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.get(uid)
	t.add(false)
	t.last = why
}

// Status is the pool's health and, when unhealthy, the last failure.
func (s *State) Status(uid types.UID) (Status, Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.get(uid)
	return t.status(), t.last
}

// Reset forgets the pool's registrations (its spec or its class's
// changed: Karpenter's condition goes Unknown).
func (s *State) Reset(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.trackers, uid)
}

// Hydrate seeds an empty tracker from the condition as written (a new
// leader, or Karpenter's before the switch): healthy as one success,
// unhealthy as enough failures, as Karpenter pre-hydrates its buffer.
func (s *State) Hydrate(uid types.UID, st Status, why Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.get(uid)
	if len(t.outcomes) > 0 {
		return
	}
	switch st {
	case Healthy:
		t.add(true)
	case Unhealthy:
		for range int(BufferSize * thresholdFalse) {
			t.add(false)
		}
		t.last = why
	}
}
