package volumes

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/joiner-dev/joiner/internal/atomicfile"
)

// The block of the fstab that joiner owns. Lines outside it are never changed.
const (
	fstabBegin = "# BEGIN joiner data volumes (managed by joiner; edits here are overwritten)"
	fstabEnd   = "# END joiner data volumes"
)

// updateFstab sets the line for mount point where inside joiner's block of
// the fstab at path (creating the block, or the file, as needed) and reports
// whether the file changed. A mount point that already has a line outside
// the block is an error: joiner does not override the admin's entries.
func updateFstab(path, where, line string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	text := strings.TrimSuffix(string(b), "\n")
	var lines []string
	if text != "" {
		lines = strings.Split(text, "\n")
	}
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case fstabBegin:
			begin = i
		case fstabEnd:
			end = i
		}
	}
	if begin < 0 || end < begin {
		if begin >= 0 || end >= 0 {
			return false, fmt.Errorf("joiner's block is damaged (BEGIN at line %d, END at line %d); fix it by hand", begin+1, end+1)
		}
		lines = append(lines, fstabBegin, fstabEnd)
		begin, end = len(lines)-2, len(lines)-1
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if (i < begin || i > end) && len(f) >= 2 && !strings.HasPrefix(f[0], "#") && f[1] == where {
			return false, fmt.Errorf("line %d already mounts %s; not adding another", i+1, where)
		}
	}
	replaced := false
	for i := begin + 1; i < end; i++ {
		if f := strings.Fields(lines[i]); len(f) >= 2 && f[1] == where {
			lines[i], replaced = line, true
		}
	}
	if !replaced {
		lines = append(lines[:end], append([]string{line}, lines[end:]...)...)
	}
	return atomicfile.WriteIfChanged(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
