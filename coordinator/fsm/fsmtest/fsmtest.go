// Package fsmtest holds test helpers for code that writes to the coordinator
// FSM through a Proposer.
package fsmtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Direct is a Proposer that applies commands straight to an FSM, as a
// one-node raft log would: each proposal gets the next index and its
// response is the FSM's (nil or an error value). Safe for concurrent use.
type Direct struct {
	f *fsm.FSM

	mu    sync.Mutex
	index uint64
	types []fsm.MessageType
}

// New returns a Direct that applies to f.
func New(f *fsm.FSM) *Direct { return &Direct{f: f} }

// Propose applies cmd to the FSM at the next index.
func (d *Direct) Propose(_ context.Context, cmd []byte) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.index++
	if len(cmd) > 0 {
		d.types = append(d.types, fsm.MessageType(cmd[0]))
	}
	return d.f.ApplyCommand(cmd, d.index), nil
}

// Count is the number of commands proposed so far.
func (d *Direct) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int(d.index)
}

// Types lists the message types proposed so far, in order.
func (d *Direct) Types() []fsm.MessageType {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]fsm.MessageType(nil), d.types...)
}

// MustPropose encodes and proposes one command and fails tb if the FSM
// rejects it.
func (d *Direct) MustPropose(tb testing.TB, t fsm.MessageType, cmd any) {
	tb.Helper()
	if r, _ := d.Propose(context.Background(), fsm.MustEncode(t, cmd)); r != nil {
		tb.Fatalf("fsm command %d: %v", t, r)
	}
}

// LaunchCommands are what a successful first launch attempt of intentID
// commits: the attempt starts, then the instance l is launched.
func LaunchCommands(intentID string, l fsm.Launched, at time.Time) [][]byte {
	return [][]byte{
		fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: intentID, Attempt: 1, At: at}),
		fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: intentID, Attempt: 1, At: at, Launched: &l}),
	}
}

// MustLaunch proposes LaunchCommands and fails tb if the FSM rejects them.
func (d *Direct) MustLaunch(tb testing.TB, intentID string, l fsm.Launched, at time.Time) {
	tb.Helper()
	for _, cmd := range LaunchCommands(intentID, l, at) {
		if r, _ := d.Propose(context.Background(), cmd); r != nil {
			tb.Fatalf("launching intent %s: %v", intentID, r)
		}
	}
}

// MustPlanAndLaunch commits a plan of one intent for the NodeClaim of spec
// (holding pods), then its launch as l.
func (d *Direct) MustPlanAndLaunch(tb testing.TB, intentID string, spec cloud.LaunchSpec, pods []string, l fsm.Launched, at time.Time) {
	tb.Helper()
	d.MustPropose(tb, fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: intentID, Spec: fsm.LaunchSpec{LaunchSpec: spec}, Pods: pods}}, At: at})
	d.MustLaunch(tb, intentID, l, at)
}
