package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// snapshotBytes is the FSM's state in snapshot format.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// seeded is an FSM holding a little of everything: intents in each state,
// instances, a termination, reports.
func seeded(t testing.TB) *FSM {
	t.Helper()
	f := New()
	for i, e := range seedEntries() {
		if res := f.ApplyCommand(e, uint64(i+1)); res != nil {
			t.Fatalf("seed entry %d: %v", i, res)
		}
	}
	return f
}

func seedEntries() [][]byte {
	return [][]byte{
		MustEncode(PlanCommitType, plan("i1", "p1", "p2")),
		MustEncode(PlanCommitType, plan("i2", "p3")),
		MustEncode(PlanCommitType, plan("i3", "p4")),
		MustEncode(LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i1", Attempt: 1, At: t0}),
		MustEncode(LaunchResultType, launched("i1", 1, "i-1")),
		MustEncode(InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: InstanceReady, NodeName: "n1", At: t0}),
		MustEncode(LaunchAttemptStartType, LaunchAttemptStart{IntentID: "i2", Attempt: 1, At: t0}),
		MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "i-1/spot/1", InstanceID: "i-1", Kind: "spot", ReceivedAt: t0}}),
		MustEncode(TerminationIntentType, TerminationIntentCmd{ID: "term-i-1", InstanceID: "i-1", Reason: "interrupted", At: t0}),
	}
}

// TestMalformedEntriesAreRejected: every malformed entry is an error
// wrapping ErrInvalidCommand that names the index and type; the state is
// unchanged; the entry is counted and the hook told.
func TestMalformedEntriesAreRejected(t *testing.T) {
	long := strings.Repeat("x", MaxReportField+1)
	tests := []struct {
		name  string
		entry []byte
		want  string // in the error
	}{
		{"empty entry", nil, "empty entry"},
		{"unknown type", []byte{100, '{', '}'}, "(type-100)"},
		{"reserved type 11", []byte{11, '{', '}'}, "(type-11)"},
		{"type 0", []byte{0}, "(type-0)"},
		{"type byte only", []byte{byte(PlanCommitType)}, "(plan-commit)"},
		{"truncated json", []byte{byte(PlanCommitType), '{'}, "decoding *fsm.PlanCommit"},
		{"trailing data", append(MustEncode(IntentCancelType, IntentCancel{IntentID: "i3"}), 'x'), "(intent-cancel)"},
		{"wrong field type", append([]byte{byte(LaunchAttemptStartType)}, `{"intentID":"i2","attempt":"two"}`...), "decoding"},
		{"attempt overflows int", append([]byte{byte(LaunchAttemptStartType)}, `{"intentID":"i2","attempt":1e30}`...), "decoding"},
		{"bad time", append([]byte{byte(TerminationResultType)}, `{"id":"term-i-1","at":"yesterday"}`...), "decoding"},
		{"array for object", append([]byte{byte(InstanceStatusType)}, `[1,2]`...), "decoding"},
		{"deep nesting", append([]byte{byte(PlanCommitType)}, strings.Repeat("[", 20000)...), "decoding"},
		{"flagged but undecodable", []byte{byte(InterruptionReportType | IgnoreUnknownTypeFlag), '{'}, "(interruption-report+ignorable)"},
		{"plan commit: intent without pods, pool or nodeclaim", MustEncode(PlanCommitType, PlanCommit{Intents: []NewIntent{{ID: "x"}}}), "with 0 pods"},
		{"plan commit: one intent ID twice", MustEncode(PlanCommitType, PlanCommit{Intents: []NewIntent{
			{ID: "x", Pods: []string{"q1"}}, {ID: "x", Pods: []string{"q2"}}}}), "twice"},
		{"launch result: both halves", MustEncode(LaunchResultType, LaunchResult{IntentID: "i2", Attempt: 1,
			Launched: &Launched{InstanceID: "i-2"}, Failed: &Failed{}}), "exactly one"},
		{"launch result: neither half", MustEncode(LaunchResultType, LaunchResult{IntentID: "i2", Attempt: 1}), "exactly one"},
		{"launch result: no instance ID", MustEncode(LaunchResultType, LaunchResult{IntentID: "i2", Attempt: 1, Launched: &Launched{}}), "without instance ID"},
		{"instance status: unknown state", MustEncode(InstanceStatusType, InstanceStatus{InstanceID: "i-1", State: "flying"}), "flying"},
		{"report: no id", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{InstanceID: "i-1"}}), "needs id"},
		{"report: huge id", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: long, InstanceID: "i-1"}}), "id: 257 bytes"},
		{"report: huge node name", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "r", InstanceID: "i-1", NodeName: long}}), "nodeName"},
		{"report: control byte", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "r\n", InstanceID: "i-1"}}), "byte 0xa"},
		{"report: markup", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "r", InstanceID: "<i>"}}), "instanceID"},
		{"report: not UTF-8", MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "r", InstanceID: "i-1", Kind: "\xff"}}), "kind"},
		{"termination without id", MustEncode(TerminationIntentType, TerminationIntentCmd{InstanceID: "i-1"}), "without id"},
		{"prune without cutoff", MustEncode(PruneType, Prune{}), "without a cutoff"},
		{"prune: bad json", []byte{byte(PruneType | IgnoreUnknownTypeFlag), '"'}, "decoding *fsm.Prune"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := seeded(t)
			before := snapshotBytes(t, f)
			var hooked []string
			f.OnReject(func(index uint64, typ MessageType, err error) {
				hooked = append(hooked, fmt.Sprintf("%d %s %v", index, typ, err))
			})
			const index = 1000
			res := f.ApplyCommand(tc.entry, index)
			err, _ := res.(error)
			if !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("response %v, want an error wrapping ErrInvalidCommand", res)
			}
			if errors.Is(err, errPanicked) {
				t.Fatalf("apply panicked: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "raft entry 1000 (") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q: want the index, the type and %q", msg, tc.want)
			}
			if got := snapshotBytes(t, f); !bytes.Equal(before, got) {
				t.Fatalf("state changed by a rejected entry:\n%s\n---\n%s", before, got)
			}
			if f.Rejected() != 1 || len(hooked) != 1 || !strings.HasPrefix(hooked[0], "1000 ") {
				t.Fatalf("rejected %d, hook calls %q: want one", f.Rejected(), hooked)
			}
			// The replica keeps applying.
			if res := f.ApplyCommand(MustEncode(IntentCancelType, IntentCancel{IntentID: "i3", At: t0}), index+1); res != nil {
				t.Fatalf("valid command after a rejected one: %v", res)
			}
			assertRoundTrip(t, f)
		})
	}
}

// TestIgnorableUnknownType: an unknown type with IgnoreUnknownTypeFlag is
// skipped silently, not rejected (a newer leader's optional command).
func TestIgnorableUnknownType(t *testing.T) {
	f := seeded(t)
	before := snapshotBytes(t, f)
	for _, e := range [][]byte{{byte(100 | IgnoreUnknownTypeFlag), '{', '}'}, {byte(100 | IgnoreUnknownTypeFlag)}, {byte(11 | IgnoreUnknownTypeFlag), 'x'}} {
		if res := f.ApplyCommand(e, 99); res != nil {
			t.Fatalf("ignorable unknown command %v returned %v", e, res)
		}
	}
	if !bytes.Equal(before, snapshotBytes(t, f)) || f.Rejected() != 0 {
		t.Fatalf("ignorable command changed state or was counted (%d)", f.Rejected())
	}
	// A known type with the flag is applied as usual.
	if res := f.ApplyCommand(MustEncode(PruneType|IgnoreUnknownTypeFlag, Prune{Cutoff: t0}), 100); res != nil {
		t.Fatalf("flagged known command: %v", res)
	}
}

// TestPreconditionErrorsAreNotRejections: a refused precondition (a stale
// attempt, an unknown ID) is a normal answer, not a malformed entry.
func TestPreconditionErrorsAreNotRejections(t *testing.T) {
	f := seeded(t)
	res := f.ApplyCommand(MustEncode(LaunchAttemptStartType, LaunchAttemptStart{IntentID: "nope", Attempt: 1}), 50)
	if err, _ := res.(error); !errors.Is(err, ErrUnknownIntent) || errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("response %v", res)
	}
	if f.Rejected() != 0 {
		t.Fatalf("precondition failure counted as rejected")
	}
}

func TestRestoreCorruptSnapshotKeepsState(t *testing.T) {
	f := seeded(t)
	good := snapshotBytes(t, f)
	for name, in := range map[string][]byte{
		"truncated":       good[:len(good)/2],
		"flipped length":  flip(good, bytes.IndexByte(good, '\n')+2),
		"record not JSON": []byte(`{"version":1}` + "\n\x01\x03abc\xff"),
		"huge length":     []byte(`{"version":1}` + "\n\x01\xff\xff\xff\xff\x0f"),
		"wrong value":     []byte(`{"version":1}` + "\n\x02\x08{\"id\":1}\xff"),
		"null header":     []byte("null\n\xff"),
	} {
		if err := f.Restore(io.NopCloser(bytes.NewReader(in))); err == nil {
			t.Errorf("%s: restore succeeded", name)
		}
		if !bytes.Equal(good, snapshotBytes(t, f)) {
			t.Fatalf("%s: a failed restore changed the state", name)
		}
	}
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0xff
	return out
}

// FuzzApplyCommand: applying any bytes, as one entry or several (split at
// NUL, which no encoded command contains), to a populated FSM never panics
// (a recovered panic counts as one); an entry that returns an error leaves
// the state byte-identical; whatever is accepted survives a snapshot round
// trip. Seeds: every command type, valid and mutated, and garbage.
func FuzzApplyCommand(f *testing.F) {
	valid := append(seedEntries(),
		MustEncode(LaunchResultType, LaunchResult{IntentID: "i2", Attempt: 1, Failed: &Failed{Reason: "ice", Retryable: true}, At: t0}),
		MustEncode(LaunchResultType, launched("i2", 1, "i-2")),
		MustEncode(IntentCancelType, IntentCancel{IntentID: "i3", Reason: "gone", At: t0}),
		MustEncode(InterruptionHandledType, InterruptionHandled{ReportID: "i-1/spot/1", At: t0}),
		MustEncode(TerminationResultType, TerminationResult{ID: "term-i-1", At: t0}),
		MustEncode(TerminationCancelType, TerminationCancel{ID: "term-i-1", At: t0}),
		MustEncode(PruneType|IgnoreUnknownTypeFlag, Prune{Cutoff: t0.Add(time.Hour)}),
		MustEncode(InterruptionReportType, InterruptionReportCmd{Report: InterruptionReport{ID: "i-1/reb/2", InstanceID: "i-1", Kind: "rebalance",
			NoticeTime: t0, Deadline: t0.Add(time.Minute)}}),
	)
	for _, e := range valid {
		f.Add(e)
		f.Add(e[:len(e)/2])
		f.Add(append([]byte{e[0] | byte(IgnoreUnknownTypeFlag)}, e[1:]...))
	}
	f.Add(bytes.Join(valid, []byte{0}))
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{11, 'n', 'u', 'l', 'l'})
	f.Add([]byte{byte(PlanCommitType), 'n', 'u', 'l', 'l'})
	f.Add(append([]byte{byte(PlanCommitType)}, `{"intents":[{"id":"n","pods":["p1","p1"]}]}`...))
	f.Add(append([]byte{byte(PlanCommitType)}, `{"intents":[{"id":"n","pods":["p9"],"spec":{"requests":{"cpu":"1e1000000"}}}]}`...))

	f.Fuzz(func(t *testing.T, data []byte) {
		m := seeded(t)
		entries := bytes.Split(data, []byte{0})
		if len(entries) > 16 {
			entries = entries[:16]
		}
		index := uint64(len(seedEntries()))
		for _, e := range entries {
			index++
			before := snapshotBytes(t, m)
			res := m.ApplyCommand(e, index)
			err, isErr := res.(error)
			if res != nil && !isErr {
				t.Fatalf("entry %q: response %v is neither nil nor an error", e, res)
			}
			if errors.Is(err, errPanicked) {
				t.Fatalf("entry %q: %v", e, err)
			}
			if err != nil && !bytes.Equal(before, snapshotBytes(t, m)) {
				t.Fatalf("entry %q: error %v, and the state changed", e, err)
			}
		}
		assertRoundTrip(t, m)
	})
}
