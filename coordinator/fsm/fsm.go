package fsm

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
)

// applyFunc applies one decoded command to the tables. It returns nil or an
// error value (a violated precondition, state unchanged). It panics on a
// payload it cannot decode: the log is corrupt or from a newer version.
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

// FSM is the raft.FSM of the coordinator. Reads (Intents, Instances, ...)
// return copies and are safe from any goroutine.
type FSM struct {
	mu sync.RWMutex
	t  *tables
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM.
func New() *FSM { return &FSM{t: newTables()} }

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	return f.ApplyCommand(l.Data, l.Index)
}

// ApplyCommand applies a raw command at a raft index. Exposed so the
// command table can be tested without raft.
func (f *FSM) ApplyCommand(data []byte, index uint64) any {
	if len(data) == 0 {
		panic("fsm: empty log entry")
	}
	t := MessageType(data[0])
	ignoreUnknown := t&IgnoreUnknownTypeFlag != 0
	t &^= IgnoreUnknownTypeFlag
	fn, ok := registry[t]
	if !ok {
		if ignoreUnknown {
			return nil
		}
		panic(fmt.Sprintf("fsm: unknown command type %d at index %d", t, index))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn(f.t, data[1:], index)
}

// decode unmarshals a payload or panics: a command that was committed but
// cannot be decoded means the replicas can no longer agree.
func decode(buf []byte, v any, index uint64) {
	if err := json.Unmarshal(buf, v); err != nil {
		panic(fmt.Sprintf("fsm: decoding %T at index %d: %v", v, index, err))
	}
}

// Intent returns one launch intent.
func (f *FSM) Intent(id string) (LaunchIntent, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in, ok := f.t.intents[id]
	return in, ok
}

// Intents returns all launch intents sorted by ID.
func (f *FSM) Intents() []LaunchIntent {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.t.intents)
}

// Instance returns one instance.
func (f *FSM) Instance(id string) (Instance, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in, ok := f.t.instances[id]
	return in, ok
}

// Instances returns all instances sorted by ID.
func (f *FSM) Instances() []Instance {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.t.instances)
}

// Interruptions returns all interruption reports sorted by ID.
func (f *FSM) Interruptions() []InterruptionReport {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.t.interruptions)
}

// Interruption returns one interruption report.
func (f *FSM) Interruption(id string) (InterruptionReport, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.t.interruptions[id]
	return r, ok
}

// Terminations returns all termination intents sorted by ID.
func (f *FSM) Terminations() []TerminationIntent {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.t.terminations)
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
// swaps them in.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
	return nil
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
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]V, 0, len(keys))
	for _, k := range keys {
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
