package fsm

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/cloud"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type step struct {
	typ     MessageType
	cmd     any
	wantErr error
}

func spec() LaunchSpec {
	return LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-abc", Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096}}}}
}

func plan(id string, pods ...string) PlanCommit {
	return PlanCommit{Intents: []NewIntent{{ID: id, Spec: spec(), Pods: pods}}, At: t0}
}

func launched(id string, n int, inst string) LaunchResult {
	return LaunchResult{IntentID: id, Attempt: n, At: t0, Launched: &Launched{InstanceID: inst, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: t0}}
}

// readyInstance: the intent i1 (for the pod p1) launched the instance i-1,
// Ready as the node n1.
func readyInstance() []step {
	return []step{
		{PlanCommitType, plan("i1", "p1"), nil},
		{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, nil},
		{LaunchResultType, launched("i1", 1, "i-1"), nil},
		{InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: InstanceReady, NodeName: "n1"}, nil},
	}
}

func run(t *testing.T, f *FSM, steps []step) {
	t.Helper()
	for i, s := range steps {
		res := f.ApplyCommand(MustEncode(s.typ, s.cmd), uint64(i+1))
		err, _ := res.(error)
		if s.wantErr == nil && err != nil {
			t.Fatalf("step %d (%T): unexpected error %v", i, s.cmd, err)
		}
		if s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("step %d (%T): got %v, want %v", i, s.cmd, err, s.wantErr)
		}
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		check func(t *testing.T, f *FSM)
	}{
		{
			name: "happy path",
			steps: []step{
				{PlanCommitType, plan("i1", "p2", "p1"), nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1, At: t0}, nil},
				{LaunchResultType, launched("i1", 1, "i-1"), nil},
				{LaunchResultType, launched("i1", 1, "i-1"), nil}, // retry: no-op
			},
			check: func(t *testing.T, f *FSM) {
				in, _ := f.Intent("i1")
				if in.State != IntentLaunched || in.InstanceID != "i-1" || in.Attempt != 1 {
					t.Fatalf("intent = %+v", in)
				}
				if in.Pods[0] != "p1" {
					t.Fatalf("pods not sorted: %v", in.Pods)
				}
				if inst, ok := f.Instance("i-1"); !ok || inst.IntentID != "i1" {
					t.Fatalf("instance = %+v, %v", inst, ok)
				}
				if got := f.NominatedPods(); got["p1"] != "i1" || got["p2"] != "i1" {
					t.Fatalf("nominated = %v", got)
				}
			},
		},
		{
			name: "attempt fencing and stale results",
			steps: []step{
				{PlanCommitType, plan("i1", "p1"), nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 2}, ErrAttemptOutOfOrder},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, ErrAttemptOutOfOrder},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 2}, nil},
				{LaunchResultType, launched("i1", 1, "i-old"), ErrStaleAttempt},
				{LaunchResultType, launched("i1", 2, "i-new"), nil},
				{LaunchResultType, launched("i1", 2, "i-other"), ErrStaleAttempt},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 3}, ErrAttemptOutOfOrder},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "nope", Attempt: 1}, ErrUnknownIntent},
			},
			check: func(t *testing.T, f *FSM) {
				in, _ := f.Intent("i1")
				if in.InstanceID != "i-new" || len(f.Instances()) != 1 {
					t.Fatalf("intent = %+v, instances = %v", in, f.Instances())
				}
			},
		},
		{
			name: "failures: retryable goes pending, final frees pods",
			steps: []step{
				{PlanCommitType, plan("i1", "p1"), nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, nil},
				{LaunchResultType, LaunchResult{IntentID: "i1", Attempt: 1, Failed: &Failed{Reason: "ice", Retryable: true}}, nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 2}, nil},
				{LaunchResultType, LaunchResult{IntentID: "i1", Attempt: 2, Failed: &Failed{Reason: "bad ami"}}, nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 3}, ErrAttemptOutOfOrder},
				{PlanCommitType, plan("i2", "p1"), nil},
				{LaunchResultType, LaunchResult{IntentID: "i2", Attempt: 0, Launched: &Launched{InstanceID: "x"}, Failed: &Failed{}}, ErrInvalidCommand},
			},
			check: func(t *testing.T, f *FSM) {
				if in, _ := f.Intent("i1"); in.State != IntentFailed || in.LastError != "bad ami" {
					t.Fatalf("intent = %+v", in)
				}
				if got := f.NominatedPods()["p1"]; got != "i2" {
					t.Fatalf("p1 nominated to %q", got)
				}
			},
		},
		{
			name: "plan commit refuses one pod twice; a re-planned pod moves",
			steps: []step{
				{PlanCommitType, plan("i1", "p1", "p2"), nil},
				{PlanCommitType, plan("i1", "p1", "p2"), nil}, // same decision again
				{PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "i4", Spec: spec(), Pods: []string{"p5"}}, {ID: "i5", Spec: spec(), Pods: []string{"p5"}}}}, ErrPodNominated},
				// Without pods an intent must be a static pool's launch (a pool and a nodeclaim).
				{PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "i6"}}}, ErrInvalidCommand},
				// p2's nomination went stale: it is planned again, with p3.
				{PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "i2", Spec: spec(), Pods: []string{"p3"}}, {ID: "i3", Spec: spec(), Pods: []string{"p2"}}}}, nil},
				// p1 too: i1 is left with no pod while pending, and is cancelled.
				{PlanCommitType, plan("i7", "p1"), nil},
			},
			check: func(t *testing.T, f *FSM) {
				if n := len(f.Intents()); n != 4 {
					t.Fatalf("%d intents, want 4 (i1 i2 i3 i7)", n)
				}
				nom := f.NominatedPods()
				if nom["p1"] != "i7" || nom["p2"] != "i3" || nom["p3"] != "i2" {
					t.Fatalf("nominations %v", nom)
				}
				if in, _ := f.Intent("i1"); in.State != IntentCancelled || len(in.Pods) != 0 {
					t.Fatalf("i1 = %+v, want cancelled with no pod", in)
				}
				if in, _ := f.Intent("i3"); in.State != IntentPending || !slices.Equal(in.Pods, []string{"p2"}) {
					t.Fatalf("i3 = %+v", in)
				}
			},
		},
		{
			name: "a launched intent keeps its other pods when one moves",
			steps: []step{
				{PlanCommitType, plan("i1", "p1", "p2"), nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, nil},
				{LaunchResultType, launched("i1", 1, "i-1"), nil},
				{PlanCommitType, plan("i2", "p2"), nil},
			},
			check: func(t *testing.T, f *FSM) {
				in, _ := f.Intent("i1")
				if in.State != IntentLaunched || !slices.Equal(in.Pods, []string{"p1"}) {
					t.Fatalf("i1 = %+v, want launched holding p1", in)
				}
				if got := f.NominatedPods()["p2"]; got != "i2" {
					t.Fatalf("p2 nominated to %q", got)
				}
			},
		},
		{
			name: "cancel only while pending",
			steps: []step{
				{PlanCommitType, plan("i1", "p1"), nil},
				{PlanCommitType, plan("i2", "p2"), nil},
				{IntentCancelType, IntentCancel{IntentID: "i1", Reason: "pods gone"}, nil},
				{IntentCancelType, IntentCancel{IntentID: "i1"}, nil},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1}, ErrAttemptOutOfOrder},
				{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i2", Attempt: 1}, nil},
				{IntentCancelType, IntentCancel{IntentID: "i2"}, ErrNotPending},
			},
			check: func(t *testing.T, f *FSM) {
				if _, ok := f.NominatedPods()["p1"]; ok {
					t.Fatal("cancelled intent still nominates p1")
				}
			},
		},
		{
			name: "instance lifecycle, termination, interruptions, agents",
			steps: append(readyInstance(), []step{
				{InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: InstanceRegistered}, ErrBackwardTransition},
				{InstanceStatusType, InstanceStatus{InstanceID: "i-9", State: InstanceReady}, ErrUnknownInstance},
				{InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: "flying"}, ErrInvalidCommand},
				{InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "i-1/spot/1", InstanceID: "i-1", Kind: "spot", ReceivedAt: t0}}, nil},
				{InterruptionHandledType, InterruptionHandled{ReportID: "i-1/spot/1", At: t0}, nil},
				// A retried report keeps the handled mark and first receipt.
				{InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "i-1/spot/1", InstanceID: "i-1", Kind: "spot", ReceivedAt: t0.Add(time.Minute)}}, nil},
				{InterruptionHandledType, InterruptionHandled{ReportID: "zzz"}, ErrUnknownReport},
				{TerminationIntentType, TerminationIntentCmd{ID: "t1", InstanceID: "i-1", Reason: "interrupted"}, nil},
				{TerminationIntentType, TerminationIntentCmd{ID: "t1", InstanceID: "i-1", Reason: "interrupted"}, nil},
				{TerminationResultType, TerminationResult{ID: "t1"}, nil},
				{TerminationResultType, TerminationResult{ID: "t2"}, ErrUnknownTermination},
				{InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: InstanceReady}, ErrBackwardTransition},
			}...),
			check: func(t *testing.T, f *FSM) {
				inst, _ := f.Instance("i-1")
				if inst.State != InstanceTerminated || inst.NodeName != "n1" {
					t.Fatalf("instance = %+v", inst)
				}
				r := f.Interruptions()[0]
				if !r.Handled || !r.ReceivedAt.Equal(t0) {
					t.Fatalf("report = %+v", r)
				}
				if f.Terminations()[0].State != TerminationDone {
					t.Fatalf("terminations = %+v", f.Terminations())
				}
			},
		},
		{
			name: "termination cancel restores the instance and frees the id",
			steps: append(readyInstance(), []step{
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-1", InstanceID: "i-1", Reason: "Drift"}, nil},
				{TerminationCancelType, TerminationCancel{ID: "term-i-1", Reason: "replacement failed"}, nil},
				{TerminationCancelType, TerminationCancel{ID: "term-i-1"}, nil},
				{TerminationCancelType, TerminationCancel{ID: "term-x"}, ErrUnknownTermination},
				// The same ID can be committed again, and then completed.
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-1", InstanceID: "i-1", Reason: "Emptiness"}, nil},
				{TerminationResultType, TerminationResult{ID: "term-i-1"}, nil},
				{TerminationCancelType, TerminationCancel{ID: "term-i-1"}, ErrTerminationNotPending},
			}...),
			check: func(t *testing.T, f *FSM) {
				inst, _ := f.Instance("i-1")
				if inst.State != InstanceTerminated {
					t.Fatalf("instance = %+v", inst)
				}
				ts := f.Terminations()
				if len(ts) != 1 || ts[0].Reason != "Emptiness" || ts[0].PriorState != InstanceReady {
					t.Fatalf("terminations = %+v", ts)
				}
			},
		},
		{
			name: "termination cancel while pending",
			steps: append(readyInstance(), []step{
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-1", InstanceID: "i-1", Reason: "Drift"}, nil},
				// The terminating instance's intent no longer holds p1: a
				// replacement may nominate it.
				{PlanCommitType, plan("r1", "p1"), nil},
				{PlanCommitType, plan("r2", "p2"), nil},
				{TerminationCancelType, TerminationCancel{ID: "term-i-1"}, nil},
			}...),
			check: func(t *testing.T, f *FSM) {
				inst, _ := f.Instance("i-1")
				if inst.State != InstanceReady || len(f.Terminations()) != 1 || f.Terminations()[0].State != TerminationCancelled {
					t.Fatalf("instance = %+v, terminations = %+v", inst, f.Terminations())
				}
				if got := f.NominatedPods(); got["p1"] != "r1" || got["p2"] != "r2" || len(got) != 2 {
					t.Fatalf("nominations after cancel = %v, want p1 kept by the replacement r1", got)
				}
			},
		},
		{
			// A node Karpenter launched and Joiner adopted has no instance
			// record: its disruption (drift, say) must still commit its
			// termination intent before acting, or it can never be
			// replaced (every attempt rolled back on ErrUnknownInstance).
			name: "termination of an adopted instance (no record)",
			steps: []step{
				{PlanCommitType, plan("i1", "p1"), nil},
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-karp", InstanceID: "i-karp", Reason: "Drift", At: t0}, nil},
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-karp", InstanceID: "i-karp", Reason: "Drift", At: t0}, nil},
				{TerminationCancelType, TerminationCancel{ID: "term-i-karp", Reason: "replacement failed"}, nil},
				{TerminationIntentType, TerminationIntentCmd{ID: "term-i-karp", InstanceID: "i-karp", Reason: "Drift", At: t0}, nil},
				{TerminationResultType, TerminationResult{ID: "term-i-karp", At: t0}, nil},
				{TerminationIntentType, TerminationIntentCmd{ID: "term-x", Reason: "Drift"}, ErrInvalidCommand},
			},
			check: func(t *testing.T, f *FSM) {
				ts := f.Terminations()
				if len(ts) != 1 || ts[0].InstanceID != "i-karp" || ts[0].State != TerminationDone || ts[0].PriorState != "" {
					t.Fatalf("terminations = %+v", ts)
				}
				if _, ok := f.Instance("i-karp"); ok || len(f.Instances()) != 0 {
					t.Fatalf("an instance record appeared: %+v", f.Instances())
				}
				if got := f.NominatedPods(); got["p1"] != "i1" || len(got) != 1 {
					t.Fatalf("nominations = %v, want p1 still nominated to i1", got)
				}
				// Pruned like any finished termination once old.
				if st := f.Prunable(t0.Add(time.Hour)); st.Terminations != 1 {
					t.Fatalf("prune plan = %+v, want the finished termination", st)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			run(t, f, tc.steps)
			tc.check(t, f)
			assertRoundTrip(t, f)
		})
	}
}

// assertRoundTrip checks snapshot -> restore -> snapshot is byte-identical
// and that derived indexes are rebuilt.
func assertRoundTrip(t *testing.T, f *FSM) {
	t.Helper()
	var a bytes.Buffer
	if _, err := f.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(io.NopCloser(bytes.NewReader(a.Bytes()))); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := g.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("snapshot round trip differs:\n%s\n---\n%s", a.Bytes(), b.Bytes())
	}
	if !maps.Equal(f.NominatedPods(), g.NominatedPods()) || f.LastIndex() != g.LastIndex() {
		t.Fatalf("restored index differs: %v vs %v", f.NominatedPods(), g.NominatedPods())
	}
	if !maps.EqualFunc(f.t.unhandled, g.t.unhandled, maps.Equal) {
		t.Fatalf("restored unhandled-report index differs: %v vs %v", f.t.unhandled, g.t.unhandled)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	for name, in := range map[string]string{
		"empty":       "",
		"bad version": `{"version":9}` + "\n\xff",
		"bad table":   `{"version":1}` + "\n\x07\x02{}\xff",
		"truncated":   `{"version":1}` + "\n\x01\x10{}",
		"no end":      `{"version":1}` + "\n",
		"trailing":    `{"version":1}` + "\n\xffx",
	} {
		if err := New().Restore(io.NopCloser(bytes.NewReader([]byte(in)))); err == nil {
			t.Errorf("%s: restore succeeded", name)
		}
	}
}

func TestEncodeDeterministic(t *testing.T) {
	s := spec()
	s.Labels = map[string]string{"b": "2", "a": "1", "c": "3"}
	c := PlanCommit{Intents: []NewIntent{{ID: "i", Spec: s, Pods: []string{"p"}}}, At: t0}
	first := MustEncode(PlanCommitType, c)
	for range 20 {
		if !bytes.Equal(first, MustEncode(PlanCommitType, c)) {
			t.Fatal("encoding not deterministic")
		}
	}
}
