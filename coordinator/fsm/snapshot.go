package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// Snapshot stream format (deterministic): a JSON header line, then records
// of {table byte, uvarint length, JSON value}, each table's records sorted
// by key, tables in a fixed order, then the end byte.
const snapshotVersion = 1

type snapshotHeader struct {
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
}

type tableType byte

const (
	tableIntents       tableType = 1
	tableInstances     tableType = 2
	tableInterruptions tableType = 3
	tableTerminations  tableType = 4
	tableAgents        tableType = 5 // read and ignored: no longer written
	tableEnd           tableType = 255
)

type snapshot struct{ t *tables }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.t); err != nil {
		sink.Cancel()
		return fmt.Errorf("persisting fsm snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

func writeSnapshot(w io.Writer, t *tables) error {
	bw := bufio.NewWriter(w)
	hdr, _ := json.Marshal(snapshotHeader{Version: snapshotVersion, Index: t.index})
	bw.Write(hdr)
	bw.WriteByte('\n')
	if err := writeTable(bw, tableIntents, t.intents); err != nil {
		return err
	}
	if err := writeTable(bw, tableInstances, t.instances); err != nil {
		return err
	}
	if err := writeTable(bw, tableInterruptions, t.interruptions); err != nil {
		return err
	}
	if err := writeTable(bw, tableTerminations, t.terminations); err != nil {
		return err
	}
	bw.WriteByte(byte(tableEnd))
	return bw.Flush()
}

func writeTable[V any](w *bufio.Writer, tt tableType, m map[string]V) error {
	var lenBuf [binary.MaxVarintLen64]byte
	for _, v := range sortedValues(m) {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding table %d record: %w", tt, err)
		}
		w.WriteByte(byte(tt))
		n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
		w.Write(lenBuf[:n])
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func readSnapshot(r io.Reader) (*tables, error) {
	br := bufio.NewReader(r)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("reading header: %w", err)
	}
	var hdr snapshotHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return nil, fmt.Errorf("decoding header: %w", err)
	}
	if hdr.Version != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d: want %d", hdr.Version, snapshotVersion)
	}
	t := newTables()
	t.index = hdr.Index
	for {
		tb, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("reading record type: %w", err)
		}
		if tableType(tb) == tableEnd {
			break
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, fmt.Errorf("reading record length: %w", err)
		}
		if n > 64<<20 {
			return nil, fmt.Errorf("record of %d bytes: too large", n)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("reading record: %w", err)
		}
		switch tableType(tb) {
		case tableIntents:
			err = restoreInto(buf, t.intents, func(v LaunchIntent) string { return v.ID })
		case tableInstances:
			err = restoreInto(buf, t.instances, func(v Instance) string { return v.ID })
		case tableInterruptions:
			err = restoreInto(buf, t.interruptions, func(v InterruptionReport) string { return v.ID })
		case tableTerminations:
			err = restoreInto(buf, t.terminations, func(v TerminationIntent) string { return v.ID })
		case tableAgents:
			// Agent identities are no longer kept; older snapshots may
			// hold the (always empty) table.
		default:
			err = fmt.Errorf("unknown table %d", tb)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after end of snapshot")
	}
	t.reindexPods()
	t.reindexReports()
	return t, nil
}

func restoreInto[V any](buf []byte, m map[string]V, key func(V) string) error {
	var v V
	if err := json.Unmarshal(buf, &v); err != nil {
		return fmt.Errorf("decoding %T: %w", v, err)
	}
	m[key(v)] = v
	return nil
}
