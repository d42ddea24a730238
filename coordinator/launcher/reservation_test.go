package launcher_test

import (
	"context"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/launcher"
)

// TestReservedLaunchWakesTheClasses: a launch into a capacity reservation
// calls OnReservedLaunch (the nodeclass loop re-lists the offerings, whose
// reservation has one instance less); other launches do not.
func TestReservedLaunchWakesTheClasses(t *testing.T) {
	for _, c := range []cloud.Candidate{
		{InstanceType: "m5.large", Zone: "a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1},
		{InstanceType: "m5.large", Zone: "a", CapacityType: karpv1.CapacityTypeReserved, Price: 1e-8, ReservationID: "cr-1"},
	} {
		h := newHarness(t)
		cmd := fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "r1", Pods: []string{"pod-r1"},
			Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "nc-r1", Candidates: []cloud.Candidate{c}}}}}}
		if res := h.f.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, cmd), 0); res != nil {
			t.Fatal(res)
		}
		woken := 0
		l := launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now, OnReservedLaunch: func() { woken++ }},
			launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f})
		if err := l.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[c.CapacityType == karpv1.CapacityTypeReserved]; woken != want {
			t.Errorf("%s launch woke the classes %d times, want %d", c.CapacityType, woken, want)
		}
	}
}
