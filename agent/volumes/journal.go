package volumes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/joiner-dev/joiner/internal/atomicfile"
)

// Journal phases.
const (
	PhaseFormatting = "formatting" // written (fsync'd) before mkfs starts
	PhaseFormatted  = "formatted"  // written after mkfs succeeded (or a verify passed)
)

// JournalFile is the journal's name under the state directory.
const JournalFile = "volumes.json"

// JournalEntry records one filesystem this host created.
type JournalEntry struct {
	Key    string `json:"key"`    // volume ID, serial:<NVMe serial>, md:<name> or device path
	Device string `json:"device"` // path at format time
	FSType string `json:"fsType"`
	UUID   string `json:"uuid"` // the UUID handed to mkfs
	Phase  string `json:"phase"`
}

// Journal is the list of filesystems joiner made on this host. It is how a
// re-run tells its own filesystem (even one whose mkfs was interrupted) from
// data it must not touch.
type Journal struct {
	Entries []JournalEntry `json:"entries"`
}

// Get returns the entry for key.
func (j Journal) Get(key string) (JournalEntry, bool) {
	for _, e := range j.Entries {
		if e.Key == key {
			return e, true
		}
	}
	return JournalEntry{}, false
}

// Set adds or replaces the entry with e.Key.
func (j *Journal) Set(e JournalEntry) {
	for i := range j.Entries {
		if j.Entries[i].Key == e.Key {
			j.Entries[i] = e
			return
		}
	}
	j.Entries = append(j.Entries, e)
	sort.Slice(j.Entries, func(a, b int) bool { return j.Entries[a].Key < j.Entries[b].Key })
}

// LoadJournal reads the journal; a missing file is an empty journal.
func LoadJournal(path string) (Journal, error) {
	var j Journal
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return j, fmt.Errorf("reading volume journal: %w", err)
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, fmt.Errorf("parsing volume journal %s: %w", path, err)
	}
	return j, nil
}

// SaveJournal writes the journal atomically.
func SaveJournal(path string, j Journal) error { return saveJSON(path, "volume journal", j) }

// saveJSON writes v as indented JSON to path atomically (mode 0600); what
// names the file in errors.
func saveJSON(path, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving %s: %w", what, err)
	}
	return nil
}
