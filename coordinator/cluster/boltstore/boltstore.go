// Package boltstore is raft's log and stable store in one bbolt file.
//
// It reads and writes the layout hashicorp/raft-boltdb/v2 uses (bucket
// "logs": big-endian index -> msgpack raft.Log; bucket "conf": key ->
// value), so a data dir written by an earlier Joiner (which used that
// library) opens unchanged. It replaces raft-boltdb because that package
// also links the old github.com/boltdb/bolt (for its v1 migration helper)
// and armon/go-metrics.
package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

var (
	bucketLogs = []byte("logs")
	bucketConf = []byte("conf")
)

// ErrKeyNotFound is Get's answer for a key never set. raft recognises a
// missing key by this exact text.
var ErrKeyNotFound = errors.New("not found")

// openTimeout bounds the wait for the file lock another process holds.
const openTimeout = 30 * time.Second

// Store implements raft.LogStore and raft.StableStore.
type Store struct {
	db *bbolt.DB
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens (or creates) the store at path.
func Open(path string) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: openTimeout})
	if err != nil {
		return nil, fmt.Errorf("opening raft store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketConf} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialising raft store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// FirstIndex is the lowest index stored, 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	return s.edge(func(c *bbolt.Cursor) []byte { k, _ := c.First(); return k })
}

// LastIndex is the highest index stored, 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	return s.edge(func(c *bbolt.Cursor) []byte { k, _ := c.Last(); return k })
}

func (s *Store) edge(pick func(*bbolt.Cursor) []byte) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if k := pick(tx.Bucket(bucketLogs).Cursor()); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog reads the entry at idx into log (raft.ErrLogNotFound if absent).
func (s *Store) GetLog(idx uint64, log *raft.Log) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(key(idx))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := codec.NewDecoderBytes(v, &codec.MsgpackHandle{}).Decode(log); err != nil {
			return fmt.Errorf("decoding raft log %d: %w", idx, err)
		}
		return nil
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries in one transaction.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	// Times are written the way raft-boltdb does by default (not msgpack's
	// timestamp extension), so either library reads what the other wrote.
	h := &codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			var buf bytes.Buffer
			if err := codec.NewEncoder(&buf, h).Encode(l); err != nil {
				return fmt.Errorf("encoding raft log %d: %w", l.Index, err)
			}
			if err := b.Put(key(l.Index), buf.Bytes()); err != nil {
				return fmt.Errorf("storing raft log %d: %w", l.Index, err)
			}
		}
		return nil
	})
}

// DeleteRange deletes the entries from minIdx to maxIdx, both included.
func (s *Store) DeleteRange(minIdx, maxIdx uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(key(minIdx)); k != nil && binary.BigEndian.Uint64(k) <= maxIdx; k, _ = c.Next() {
			keys = append(keys, k)
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("deleting raft log %d: %w", binary.BigEndian.Uint64(k), err)
			}
		}
		return nil
	})
}

// Set stores a stable value.
func (s *Store) Set(k, v []byte) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketConf).Put(k, v) })
}

// Get reads a stable value (ErrKeyNotFound if never set).
func (s *Store) Get(k []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketConf).Get(k)
		if v == nil {
			return ErrKeyNotFound
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// SetUint64 stores a stable number.
func (s *Store) SetUint64(k []byte, v uint64) error { return s.Set(k, key(v)) }

// GetUint64 reads a stable number (ErrKeyNotFound if never set).
func (s *Store) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable key %s: %d bytes, want 8", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }
