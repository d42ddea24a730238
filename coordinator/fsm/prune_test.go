package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	tOld    = t0                    // before the cutoff
	tCutoff = t0.Add(time.Hour)     // the prune's cutoff
	tNew    = t0.Add(2 * time.Hour) // after it
)

// launchedAt: intent id commits (at t0) and launches instance inst at at.
func launchedAt(id, inst string, at time.Time) []step {
	l := launched(id, 1, inst)
	l.At = at
	return []step{
		{PlanCommitType, plan(id, "pod-"+id), nil},
		{LaunchAttemptStartType, LaunchAttemptStart{IntentID: id, Attempt: 1, At: at}, nil},
		{LaunchResultType, l, nil},
	}
}

func failedAt(id string, retryable bool, at time.Time) []step {
	return []step{
		{PlanCommitType, plan(id, "pod-"+id), nil},
		{LaunchAttemptStartType, LaunchAttemptStart{IntentID: id, Attempt: 1, At: at}, nil},
		{LaunchResultType, LaunchResult{IntentID: id, Attempt: 1, Failed: &Failed{Reason: "no", Retryable: retryable}, At: at}, nil},
	}
}

func status(inst string, s InstanceState, at time.Time) step {
	return step{InstanceStatusType, InstanceStatus{InstanceID: inst, State: s, At: at}, nil}
}

func terminate(inst string, at time.Time) step {
	return step{TerminationIntentType, TerminationIntentCmd{ID: "term-" + inst, InstanceID: inst, Reason: "test", At: at}, nil}
}

func terminated(inst string, at time.Time) step {
	return step{TerminationResultType, TerminationResult{ID: "term-" + inst, At: at}, nil}
}

func report(id, inst string) step {
	return step{InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: id, InstanceID: inst, Kind: "spot", ReceivedAt: tOld}}, nil}
}

func handled(id string, at time.Time) step {
	return step{InterruptionHandledType, InterruptionHandled{ReportID: id, At: at}, nil}
}

func concat(parts ...[]step) []step { return slices.Concat(parts...) }

func ids[V any](vs []V, id func(V) string) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, id(v))
	}
	return out
}

// TestPrune: a Prune removes exactly the finished records older than its
// cutoff, never anything in flight, and Prunable predicts it.
func TestPrune(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		// What remains after the prune (sorted IDs).
		intents, instances, terminations, reports []string
		// Pods still nominated after the prune.
		nominated []string
	}{
		{
			name: "handled reports before the cutoff go; unhandled and recent ones stay",
			steps: []step{
				report("r-old", "i-a"), handled("r-old", tOld),
				report("r-new", "i-a"), handled("r-new", tNew),
				report("r-open", "i-b"),
			},
			intents: []string{}, instances: []string{}, terminations: []string{}, reports: []string{"r-new", "r-open"},
			nominated: []string{},
		},
		{
			name: "failed and cancelled intents go; pending, launching and recent ones stay",
			steps: concat(
				[]step{{PlanCommitType, plan("pending", "pod-pending"), nil}},
				[]step{{PlanCommitType, plan("launching", "pod-launching"), nil},
					{LaunchAttemptStartType, LaunchAttemptStart{IntentID: "launching", Attempt: 1, At: tOld}, nil}},
				failedAt("failed-old", false, tOld),
				failedAt("failed-new", false, tNew),
				failedAt("retrying", true, tOld), // pending again
				[]step{{PlanCommitType, plan("cancelled-old", "pod-cancelled-old"), nil},
					{IntentCancelType, IntentCancel{IntentID: "cancelled-old", At: tOld}, nil}},
			),
			intents:   []string{"failed-new", "launching", "pending", "retrying"},
			instances: []string{}, terminations: []string{}, reports: []string{},
			nominated: []string{"pod-launching", "pod-pending", "pod-retrying"},
		},
		{
			name: "a launched intent goes with its instance once the instance is gone",
			steps: concat(
				launchedAt("live", "i-live", tOld), []step{status("i-live", InstanceReady, tOld)},
				launchedAt("gone", "i-gone", tOld), []step{terminate("i-gone", tOld), terminated("i-gone", tOld)},
				launchedAt("lost", "i-lost", tOld), []step{status("i-lost", InstanceLost, tOld)},
				launchedAt("recent", "i-recent", tOld), []step{status("i-recent", InstanceLost, tNew)},
			),
			intents:      []string{"live", "recent"},
			instances:    []string{"i-live", "i-recent"},
			terminations: []string{}, reports: []string{},
			nominated: []string{"pod-live", "pod-recent"},
		},
		{
			name: "a pending termination holds its gone instance and intent",
			steps: concat(
				launchedAt("lost", "i-lost", tOld), []step{status("i-lost", InstanceLost, tOld), terminate("i-lost", tOld)},
				launchedAt("draining", "i-draining", tOld), []step{terminate("i-draining", tOld)},
			),
			intents:      []string{"draining", "lost"},
			instances:    []string{"i-draining", "i-lost"},
			terminations: []string{"term-i-draining", "term-i-lost"}, reports: []string{},
			nominated: []string{},
		},
		{
			name: "a cancelled termination of a live instance stays: it released the intent's pods",
			steps: concat(
				launchedAt("back", "i-back", tOld), []step{status("i-back", InstanceReady, tOld), terminate("i-back", tOld),
					{TerminationCancelType, TerminationCancel{ID: "term-i-back", At: tOld}, nil}},
			),
			intents: []string{"back"}, instances: []string{"i-back"}, terminations: []string{"term-i-back"}, reports: []string{},
			nominated: []string{},
		},
		{
			name: "an intent changed after the cutoff keeps its instance and termination",
			steps: concat(
				launchedAt("moved", "i-moved", tOld),
				[]step{{PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "n", Spec: spec(), Pods: []string{"pod-moved"}}}, At: tNew}, nil}},
				[]step{terminate("i-moved", tOld), terminated("i-moved", tOld)},
			),
			intents: []string{"moved", "n"}, instances: []string{"i-moved"}, terminations: []string{"term-i-moved"}, reports: []string{},
			nominated: []string{"pod-moved"},
		},
		{
			name: "a termination finished after the cutoff outlives its instance",
			steps: concat(
				launchedAt("a", "i-a", tOld), []step{status("i-a", InstanceLost, tOld), terminate("i-a", tOld),
					{TerminationCancelType, TerminationCancel{ID: "term-i-a", At: tNew}, nil}},
			),
			intents: []string{}, instances: []string{}, terminations: []string{"term-i-a"}, reports: []string{},
			nominated: []string{},
		},
		{
			name: "a finished termination whose instance is no longer recorded goes",
			steps: concat(
				launchedAt("a", "i-a", tOld), []step{status("i-a", InstanceLost, tOld), terminate("i-a", tOld),
					{TerminationCancelType, TerminationCancel{ID: "term-i-a", At: tOld.Add(30 * time.Minute)}, nil},
					// An earlier prune took the intent and instance, not the termination.
					{PruneType, Prune{Cutoff: tOld.Add(15 * time.Minute)}, nil}},
			),
			intents: []string{}, instances: []string{}, terminations: []string{}, reports: []string{},
			nominated: []string{},
		},
		{
			name: "nothing finished: nothing goes",
			steps: concat(
				launchedAt("a", "i-a", tNew), []step{report("r", "i-a")},
			),
			intents: []string{"a"}, instances: []string{"i-a"}, terminations: []string{}, reports: []string{"r"},
			nominated: []string{"pod-a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			run(t, f, tc.steps)
			stats := f.Prunable(tCutoff)
			nIntents, nInst, nTerm, nRep := len(f.Intents()), len(f.Instances()), len(f.Terminations()), len(f.Interruptions())
			lastBefore := f.LastIndex()

			index := uint64(len(tc.steps) + 1)
			if res := f.ApplyCommand(MustEncode(PruneType|IgnoreUnknownTypeFlag, Prune{Cutoff: tCutoff}), index); res != nil {
				t.Fatalf("prune: %v", res)
			}
			got := map[string][]string{
				"intents":      ids(f.Intents(), func(v LaunchIntent) string { return v.ID }),
				"instances":    ids(f.Instances(), func(v Instance) string { return v.ID }),
				"terminations": ids(f.Terminations(), func(v TerminationIntent) string { return v.ID }),
				"reports":      ids(f.Interruptions(), func(v InterruptionReport) string { return v.ID }),
				"nominated":    slices.Sorted(maps.Keys(f.NominatedPods())),
			}
			want := map[string][]string{"intents": tc.intents, "instances": tc.instances, "terminations": tc.terminations,
				"reports": tc.reports, "nominated": tc.nominated}
			for table := range want {
				if !slices.Equal(got[table], want[table]) {
					t.Errorf("%s after prune: %q, want %q", table, got[table], want[table])
				}
			}
			removed := PruneStats{Intents: nIntents - len(f.Intents()), Instances: nInst - len(f.Instances()),
				Terminations: nTerm - len(f.Terminations()), Reports: nRep - len(f.Interruptions())}
			if stats != removed {
				t.Errorf("Prunable said %+v, the prune removed %+v", stats, removed)
			}
			if wantIndex := map[bool]uint64{true: lastBefore, false: index}[removed.Total() == 0]; f.LastIndex() != wantIndex {
				t.Errorf("last index %d, want %d", f.LastIndex(), wantIndex)
			}
			// A second prune with the same cutoff finds nothing.
			if s := f.Prunable(tCutoff); s.Total() != 0 {
				t.Errorf("prunable after the prune: %+v", s)
			}
			assertRoundTrip(t, f)
		})
	}
}

// forged is a report an attacker might post: the largest fields allowed.
func forged(id, inst string) InterruptionReport {
	pad := func(s string) string { return s + strings.Repeat("x", MaxReportField-len(s)) }
	return InterruptionReport{ID: pad(id), InstanceID: pad(inst), NodeName: pad("node-"), Kind: pad("spot-"),
		NoticeTime: t0, Deadline: t0, ReceivedAt: t0}
}

// TestReportFloodIsBounded: floods of forged and repeated reports (10 000
// per phase) leave the number of stored reports and the snapshot size
// bounded; the per-instance cap keeps an instance's newest reports; a
// refusal is ErrTooManyReports with the state unchanged.
func TestReportFloodIsBounded(t *testing.T) {
	const flood = 10_000
	f := seeded(t)
	index := uint64(100)
	apply := func(r InterruptionReport) error {
		index++
		err, _ := f.ApplyCommand(MustEncode(InterruptionReportType, InterruptionReportCmd{Report: r}), index).(error)
		return err
	}
	baseline := len(snapshotBytes(t, f))
	worst := worstReportRecord(t)
	bound := baseline + MaxReports*worst

	// Phase 1: distinct forged instances. The table fills, then refuses.
	refused := 0
	for i := range flood {
		err := apply(forged(fmt.Sprintf("r1-%d", i), fmt.Sprintf("i-%d", i)))
		switch {
		case errors.Is(err, ErrTooManyReports):
			refused++
		case err != nil:
			t.Fatalf("report %d: %v", i, err)
		}
	}
	afterDistinct := snapshotBytes(t, f)
	if n := len(f.Interruptions()); n != MaxReports || refused != flood-(MaxReports-1) {
		t.Fatalf("%d reports stored, %d refused; want %d stored", n, refused, MaxReports)
	}
	if len(afterDistinct) > bound {
		t.Fatalf("snapshot %d bytes, bound %d", len(afterDistinct), bound)
	}
	// A refusal changes nothing.
	if err := apply(forged("r1-extra", "i-extra")); !errors.Is(err, ErrTooManyReports) {
		t.Fatalf("report over the limit: %v", err)
	}
	if !slices.Equal(afterDistinct, snapshotBytes(t, f)) {
		t.Fatal("a refused report changed the state")
	}

	// Phase 2: the handler marks them handled; a new flood evicts the
	// oldest handled reports instead of growing the table.
	for _, r := range f.Interruptions() {
		index++
		if res := f.ApplyCommand(MustEncode(InterruptionHandledType, InterruptionHandled{ReportID: r.ID, At: tOld}), index); res != nil {
			t.Fatal(res)
		}
	}
	for i := range flood / 5 {
		if err := apply(forged(fmt.Sprintf("r2-%d", i), fmt.Sprintf("j-%d", i))); err != nil {
			t.Fatalf("report %d over handled ones: %v", i, err)
		}
	}
	if n := len(f.Interruptions()); n != MaxReports {
		t.Fatalf("%d reports stored after evicting handled ones, want %d", n, MaxReports)
	}
	if n := len(snapshotBytes(t, f)); n > bound {
		t.Fatalf("snapshot %d bytes, bound %d", n, bound)
	}

	// Phase 3: one instance, many notices: it keeps its newest ones.
	for i := range flood {
		if err := apply(forged(fmt.Sprintf("r3-%05d", i), "i-victim")); err != nil {
			t.Fatalf("report %d on one instance: %v", i, err)
		}
	}
	var victim []string
	for _, r := range f.Interruptions() {
		if strings.HasPrefix(r.InstanceID, "i-victim") {
			victim = append(victim, r.ID[:len("r3-00000")])
		}
	}
	want := []string{}
	for i := flood - MaxUnhandledReportsPerInstance; i < flood; i++ {
		want = append(want, fmt.Sprintf("r3-%05d", i))
	}
	if !slices.Equal(victim, want) {
		t.Fatalf("one instance's reports kept: %q, want its newest %q", victim, want)
	}

	// Phase 4: duplicates (agent retries) change nothing.
	before := snapshotBytes(t, f)
	last := f.Interruptions()[len(f.Interruptions())-1]
	for range flood {
		if err := apply(last); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(before, snapshotBytes(t, f)) {
		t.Fatal("repeated reports changed the state")
	}
	if n := len(f.Interruptions()); n > MaxReports {
		t.Fatalf("%d reports stored", n)
	}
	flooded := len(before)

	// The prune removes every report handled before the cutoff.
	index++
	if res := f.ApplyCommand(MustEncode(PruneType, Prune{Cutoff: tCutoff}), index); res != nil {
		t.Fatal(res)
	}
	for _, r := range f.Interruptions() {
		if r.Handled {
			t.Fatalf("handled report %s survived the prune", r.ID)
		}
	}
	assertRoundTrip(t, f)
	t.Logf("snapshot bytes: %d before the floods, %d after 10 000 distinct forged reports (%d stored, %d refused), "+
		"%d after four floods (%d stored), %d after the prune (%d stored); bound %d (worst record %d bytes)",
		baseline, len(afterDistinct), MaxReports, refused, flooded, MaxReports, len(snapshotBytes(t, f)), len(f.Interruptions()), bound, worst)
}

// worstReportRecord is the size of the largest report record a snapshot
// can hold: every string field full, every time at its longest, the
// largest index, plus the record's type byte and length.
func worstReportRecord(t *testing.T) int {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("", -(11*3600+59*60)))
	r := forged("id-", "i-")
	r.NoticeTime, r.Deadline, r.ReceivedAt, r.HandledAt = at, at, at, at
	r.Handled, r.ModifyIndex = true, math.MaxUint64
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return 1 + binary.MaxVarintLen64 + len(b)
}
