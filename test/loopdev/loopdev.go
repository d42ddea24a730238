// Package loopdev gives tests real block devices: sparse image files
// attached as loop devices, released (unmounted, md arrays stopped,
// detached) at cleanup, and the probes the disk-safety tests check them
// with. The tests need root and the tools scripts/install-deps.sh
// installs; they skip with a message otherwise. Test code only.
package loopdev

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Require skips t unless loop devices can be made here and losetup, mount,
// umount, blkid, wipefs and the given tools are installed.
func Require(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("loop-device test: skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("loop-device test: needs root (CI runs as root)")
	}
	for _, tool := range append([]string{"losetup", "mount", "umount", "blkid", "wipefs"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("loop-device test: %s not installed (scripts/install-deps.sh installs it)", tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("loop-device test: no /dev/loop-control in this environment")
	}
}

// Run runs a command, failing t with its output when it fails.
func Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Image makes a sparse image file of sizeMiB in a temp dir (mkfs.xfs
// wants 300 MiB or more).
func Image(t *testing.T, sizeMiB int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, sizeMiB<<20); err != nil {
		t.Fatal(err)
	}
	return img
}

// Attach attaches img as a loop device. Cleanup unmounts anything on it,
// stops md arrays holding it, then detaches it.
func Attach(t *testing.T, img string) string {
	t.Helper()
	dev := strings.TrimSpace(Run(t, "losetup", "-f", "--show", img))
	t.Cleanup(func() { release(t, dev) })
	return dev
}

// New attaches a fresh sparse image of sizeMiB.
func New(t *testing.T, sizeMiB int64) string {
	t.Helper()
	return Attach(t, Image(t, sizeMiB))
}

func release(t *testing.T, dev string) {
	holders, _ := os.ReadDir(filepath.Join("/sys/block", filepath.Base(dev), "holders"))
	for _, h := range holders {
		hdev := "/dev/" + h.Name()
		unmountDev(t, hdev)
		if out, err := exec.Command("mdadm", "--stop", hdev).CombinedOutput(); err != nil {
			t.Logf("cleanup: mdadm --stop %s: %v %s", hdev, err, out)
		}
	}
	unmountDev(t, dev)
	if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
		t.Logf("cleanup: losetup -d %s: %v %s", dev, err, out)
	}
}

// Num is the major:minor of a device node.
func Num(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)), nil
}

// MountedAt lists where dev (anything with its major:minor) is mounted.
func MountedAt(t *testing.T, dev string) []string {
	t.Helper()
	num, err := Num(dev)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, i := range infos {
		if fmt.Sprintf("%d:%d", i.Major, i.Minor) == num {
			at = append(at, i.Mountpoint)
		}
	}
	return at
}

func unmountDev(t *testing.T, dev string) {
	if _, err := Num(dev); err != nil {
		return
	}
	at := MountedAt(t, dev)
	for i := len(at) - 1; i >= 0; i-- {
		umount(t, at[i])
	}
}

// UnmountUnder unmounts everything below root, deepest first.
func UnmountUnder(t *testing.T, root string) {
	infos, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(root))
	for i := len(infos) - 1; i >= 0; i-- {
		umount(t, infos[i].Mountpoint)
	}
}

func umount(t *testing.T, at string) {
	if out, err := exec.Command("umount", at).CombinedOutput(); err != nil {
		t.Logf("cleanup: umount %s: %v %s", at, err, out)
	}
}

// Size is dev's size in bytes.
func Size(t *testing.T, dev string) int64 {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Seek(0, 2)
	return n
}

// HeadTailSum hashes the first and last MiB of dev: any signature or
// metadata a format writes lands in one of them.
func HeadTailSum(t *testing.T, dev string) [32]byte {
	t.Helper()
	size := Size(t, dev)
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 2<<20)
	f.ReadAt(buf[:1<<20], 0)
	f.ReadAt(buf[1<<20:], size-1<<20)
	return sha256.Sum256(buf)
}

// UUID is the filesystem UUID blkid reads from dev ("" when none).
func UUID(dev string) string {
	out, _ := exec.Command("blkid", "-p", "-s", "UUID", "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// CountingRunner runs real commands and counts them by name; it has the
// shape of the agent's command runner.
type CountingRunner struct {
	mu    sync.Mutex
	calls map[string]int
}

// Run runs name with args and returns its combined output.
func (r *CountingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[name]++
	r.mu.Unlock()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Count is how many times name ran.
func (r *CountingRunner) Count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// String lists the counts by command name.
func (r *CountingRunner) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.calls)
}
