package fsm

import "testing"

// A static pool's launch (spec.replicas) nominates no pods: the intent is
// committed and launched like any other, and a plan that re-plans pods
// leaves it alone.
func TestStaticIntentWithoutPods(t *testing.T) {
	f := New()
	run(t, f, []step{
		{PlanCommitType, plan("static"), nil},
		{PlanCommitType, plan("dynamic", "p1"), nil},
		{PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "again", Spec: spec(), Pods: []string{"p1"}}}, At: t0}, nil},
		{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "static", Attempt: 1, At: t0}, nil},
		{LaunchResultType, launched("static", 1, "i-1"), nil},
	})
	in, ok := f.Intent("static")
	if !ok || in.State != IntentLaunched || len(in.Pods) != 0 {
		t.Fatalf("static intent %+v", in)
	}
	if in, _ := f.Intent("dynamic"); in.State != IntentCancelled {
		t.Fatalf("dynamic intent left without pods: %s, want cancelled", in.State)
	}
}
