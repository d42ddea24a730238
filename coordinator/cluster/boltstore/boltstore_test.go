package boltstore

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func entry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/3, Type: raft.LogCommand, Data: fmt.Appendf(nil, "command-%d", i),
		Extensions: []byte{byte(i)}, AppendedAt: time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.UTC).Add(time.Duration(i) * time.Second)}
}

// fixtureLogs is what testdata/raft-boltdb-v2.3.0.db.gz holds: entries 1..5
// stored by hashicorp/raft-boltdb v2.3.0, then entry 1 deleted; entry 1 a
// configuration, entry 2 a no-op without data.
func fixtureLogs() []*raft.Log {
	var logs []*raft.Log
	for i := uint64(1); i <= 5; i++ {
		logs = append(logs, entry(i))
	}
	logs[0].Type = raft.LogConfiguration
	logs[1].Data, logs[1].Type = nil, raft.LogNoop
	return logs[1:]
}

func checkLogs(t *testing.T, s *Store, want []*raft.Log) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil || first != want[0].Index {
		t.Fatalf("FirstIndex = %d, %v; want %d", first, err, want[0].Index)
	}
	last, err := s.LastIndex()
	if err != nil || last != want[len(want)-1].Index {
		t.Fatalf("LastIndex = %d, %v; want %d", last, err, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", w.Index, err)
		}
		if !got.AppendedAt.Equal(w.AppendedAt) {
			t.Errorf("log %d appended at %s, want %s", w.Index, got.AppendedAt, w.AppendedAt)
		}
		got.AppendedAt = w.AppendedAt
		if len(got.Data) == 0 && len(w.Data) == 0 {
			got.Data = w.Data
		}
		if !reflect.DeepEqual(&got, w) {
			t.Errorf("log %d = %+v, want %+v", w.Index, got, *w)
		}
	}
}

// TestReadsWhatRaftBoltDBWrote: a data dir of an earlier Joiner, whose raft
// store was hashicorp/raft-boltdb v2.3.0, opens with its log and stable
// values intact, and takes new entries.
func TestReadsWhatRaftBoltDBWrote(t *testing.T) {
	gz, err := os.ReadFile("testdata/raft-boltdb-v2.3.0.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var db bytes.Buffer
	if _, err := db.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "raft.db")
	if err := os.WriteFile(path, db.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	checkLogs(t, s, fixtureLogs())
	if err := s.GetLog(1, &raft.Log{}); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry 1: %v, want ErrLogNotFound", err)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm = %d, %v; want 7", term, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-b" {
		t.Fatalf("LastVoteCand = %q, %v; want node-b", v, err)
	}
	if err := s.StoreLog(entry(6)); err != nil {
		t.Fatal(err)
	}
	checkLogs(t, s, append(fixtureLogs(), entry(6)))
}

// TestKeepsItsLogAcrossReopen: what one Store wrote, the next one opened on
// the same file reads; DeleteRange is inclusive at both ends.
func TestKeepsItsLogAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 0 {
		t.Fatalf("empty store FirstIndex = %d, want 0", first)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("empty store LastIndex = %d, want 0", last)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ { // past 255: keys order as big-endian numbers
		logs = append(logs, entry(i))
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(291, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	checkLogs(t, s, logs[10:290])
	for _, i := range []uint64{10, 291, 1000} {
		if err := s.GetLog(i, &raft.Log{}); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
		}
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 42 {
		t.Fatalf("CurrentTerm = %d, %v; want 42", term, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || len(v) != 0 {
		t.Fatalf("LastVoteCand = %q, %v; want empty", v, err)
	}
}

// TestMissingKeySaysNotFound: raft tells a never-set key from a failure by
// the error text "not found".
func TestMissingKeySaysNotFound(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "raft.db"))
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key: %v, want \"not found\"", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key: %v, want \"not found\"", err)
	}
}
