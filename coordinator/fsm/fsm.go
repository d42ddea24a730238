package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// applyFunc applies one decoded command to the tables. It returns nil or an
// error value: a violated precondition, or a malformed command (wrapping
// ErrInvalidCommand); either way the tables are unchanged. It never panics
// on input: a payload it cannot decode is an ErrInvalidCommand too.
type applyFunc func(t *tables, buf []byte, index uint64) any

var registry = map[MessageType]applyFunc{}

// registerCommand binds a message type to its apply function (Consul's
// pattern). Duplicates are a programming error.
func registerCommand(t MessageType, fn applyFunc) {
	if _, ok := registry[t]; ok {
		panic(fmt.Sprintf("fsm: command type %d registered twice", t))
	}
	registry[t] = fn
}

// RejectHook is told about every entry the FSM rejects as invalid: its raft
// index, its type byte (0 for an empty entry) and the error returned.
type RejectHook func(index uint64, t MessageType, err error)

// FSM is the raft.FSM of the coordinator. Reads (Intents, Instances, ...)
// return copies and are safe from any goroutine.
type FSM struct {
	mu sync.RWMutex
	t  *tables
	// onReject is guarded by mu; rejected is not replicated state.
	onReject RejectHook
	rejected atomic.Uint64
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM.
func New() *FSM { return &FSM{t: newTables()} }

// OnReject sets the hook told about rejected entries (nil: none). The hook
// runs on raft's apply goroutine after the entry, outside the FSM's lock;
// it must not block. The FSM itself logs nothing.
func (f *FSM) OnReject(h RejectHook) {
	f.mu.Lock()
	f.onReject = h
	f.mu.Unlock()
}

// Rejected is how many entries this replica has rejected as invalid
// (ErrInvalidCommand) since it started, replayed ones included. It is a
// process counter, not replicated state.
func (f *FSM) Rejected() uint64 { return f.rejected.Load() }

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	return f.ApplyCommand(l.Data, l.Index)
}

// ApplyCommand applies a raw command at a raft index. Exposed so the
// command table can be tested without raft. A malformed entry (empty, an
// unknown type without IgnoreUnknownTypeFlag, an undecodable payload,
// invalid fields) returns an error wrapping ErrInvalidCommand that names
// the index and type, leaves the state unchanged and is counted: a poison
// entry must not stop (or crash-loop) the replicas.
func (f *FSM) ApplyCommand(data []byte, index uint64) any {
	var t MessageType
	res := func() any {
		if len(data) == 0 {
			return fmt.Errorf("%w: empty entry", ErrInvalidCommand)
		}
		t = MessageType(data[0])
		fn, ok := registry[t&^IgnoreUnknownTypeFlag]
		if !ok {
			if t&IgnoreUnknownTypeFlag != 0 {
				return nil
			}
			return fmt.Errorf("%w: unknown command type", ErrInvalidCommand)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return safeApply(fn, f.t, data[1:], index)
	}()
	err, _ := res.(error)
	if !errors.Is(err, ErrInvalidCommand) {
		return res
	}
	err = fmt.Errorf("raft entry %d (%s): %w", index, t, err)
	f.rejected.Add(1)
	f.mu.RLock()
	hook := f.onReject
	f.mu.RUnlock()
	if hook != nil {
		hook(index, t, err)
	}
	return err
}

// errPanicked marks a panic recovered in an apply function or while
// reading a snapshot. That is a bug (no input should reach one), but a
// rejection keeps every replica serving, identically, where a panic would
// crash-loop them all on the same entry.
var errPanicked = errors.New("panic recovered")

func safeApply(fn applyFunc, t *tables, buf []byte, index uint64) (res any) {
	defer func() {
		if p := recover(); p != nil {
			res = fmt.Errorf("%w: %w: %v", ErrInvalidCommand, errPanicked, p)
		}
	}()
	return fn(t, buf, index)
}

// decode unmarshals a payload; an error wraps ErrInvalidCommand.
func decode(buf []byte, v any) error {
	if err := json.Unmarshal(buf, v); err != nil {
		return fmt.Errorf("%w: decoding %T: %v", ErrInvalidCommand, v, err)
	}
	return nil
}

// Intent returns one launch intent.
func (f *FSM) Intent(id string) (LaunchIntent, bool) { return lookup(f, intentsOf, id) }

// Intents returns all launch intents sorted by ID.
func (f *FSM) Intents() []LaunchIntent { return all(f, intentsOf) }

// Instance returns one instance.
func (f *FSM) Instance(id string) (Instance, bool) { return lookup(f, instancesOf, id) }

// Instances returns all instances sorted by ID.
func (f *FSM) Instances() []Instance { return all(f, instancesOf) }

// Interruptions returns all interruption reports sorted by ID.
func (f *FSM) Interruptions() []InterruptionReport { return all(f, interruptionsOf) }

// Interruption returns one interruption report.
func (f *FSM) Interruption(id string) (InterruptionReport, bool) {
	return lookup(f, interruptionsOf, id)
}

// Terminations returns all termination intents sorted by ID.
func (f *FSM) Terminations() []TerminationIntent { return all(f, terminationsOf) }

// The tables the readers above read, by ID.
func intentsOf(t *tables) map[string]LaunchIntent             { return t.intents }
func instancesOf(t *tables) map[string]Instance               { return t.instances }
func interruptionsOf(t *tables) map[string]InterruptionReport { return t.interruptions }
func terminationsOf(t *tables) map[string]TerminationIntent   { return t.terminations }

// lookup reads the entry id of a table under the read lock.
func lookup[V any](f *FSM, table func(*tables) map[string]V, id string) (V, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := table(f.t)[id]
	return v, ok
}

// all copies a table's entries, sorted by ID, under the read lock.
func all[V any](f *FSM, table func(*tables) map[string]V) []V {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(table(f.t))
}

// NominatedPods returns pod -> intent ID for every pod a live intent holds;
// an intent whose instance has a termination intent holds none (its pods
// need a new home).
// The planner treats these as in-flight capacity and does not plan them again.
func (f *FSM) NominatedPods() map[string]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]string, len(f.t.podIntent))
	for k, v := range f.t.podIntent {
		out[k] = v
	}
	return out
}

// Prunable reports what a Prune with this cutoff would remove now.
func (f *FSM) Prunable(cutoff time.Time) PruneStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return planPrune(f.t, cutoff).stats()
}

// LastIndex is the raft index of the last applied change to any table.
func (f *FSM) LastIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.t.index
}

// Snapshot implements raft.FSM: it captures a copy of the tables (small:
// maps of values whose slices are never mutated in place); Persist does
// the I/O.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{t: f.t.clone()}, nil
}

// Restore implements raft.FSM: it reads a whole snapshot into new tables and
// swaps them in. A corrupt snapshot is an error (never a panic) and leaves
// the current state in place.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, err := safeRead(rc)
	if err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
	return nil
}

// safeRead reads a snapshot; a corrupt one is an error, never a panic (the
// current tables stay in place).
func safeRead(r io.Reader) (t *tables, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return readSnapshot(r)
}

// WriteTo writes the current state in snapshot format (for tests and
// `joiner status`-style dumps). The output is deterministic.
func (f *FSM) WriteTo(w io.Writer) (int64, error) {
	f.mu.RLock()
	t := f.t.clone()
	f.mu.RUnlock()
	cw := &countingWriter{w: w}
	err := writeSnapshot(cw, t)
	return cw.n, err
}

func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
