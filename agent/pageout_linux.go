package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages asks the kernel to page out the executable's
// read-only mappings (code and read-only data). Package initialisation
// touches most of a large Go binary once, and the kernel's fault-around maps
// 64 KiB around every touched page, so a freshly started agent holds ~24 MiB
// of file-backed pages it never uses again; afterwards only the idle loop's
// working set comes back. The pages are clean and shared with the page
// cache: this costs nothing but a few minor faults. Linux >= 5.4
// (MADV_PAGEOUT); returns the bytes advised.
func releaseStartupPages() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("finding executable: %w", err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("reading mappings: %w", err)
	}
	total := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[5] != exe || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno != 0 {
			return total, fmt.Errorf("madvise(MADV_PAGEOUT) %s: %w", f[0], errno)
		}
		total += int(end - start)
	}
	return total, nil
}
