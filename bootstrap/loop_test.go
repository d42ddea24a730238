package bootstrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/agent/volumes"
)

// requireLoop skips unless loop devices can be made and formatted here.
func requireLoop(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("loop-device test: skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("loop-device test: needs root (CI runs as root)")
	}
	for _, tool := range []string{"losetup", "mount", "umount", "mkfs.xfs", "blkid", "wipefs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("loop-device test: %s not installed (scripts/install-deps.sh installs it)", tool)
		}
	}
}

// newImage makes a sparse image file of 320 MiB (mkfs.xfs wants 300).
func newImage(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	return img
}

// attach attaches img as a loop device, detached at cleanup.
func attach(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("loop-device test: losetup: %v %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// unmountUnder unmounts everything below root, deepest first.
func unmountUnder(root string) {
	infos, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(root))
	for i := len(infos) - 1; i >= 0; i-- {
		exec.Command("umount", infos[i].Mountpoint).Run()
	}
}

func noIMDS(context.Context) ([]string, string, error) {
	return nil, "", errors.New("no IMDS in tests")
}

// TestRunOnLoopDevice runs the whole first boot (real discovery, probe,
// mkfs, units, mount, config) on a loop device, twice.
func TestRunOnLoopDevice(t *testing.T) {
	requireLoop(t)
	dev := attach(t, newImage(t))
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(root) })
	cfgPath := filepath.Join(root, "etc", "agent.json")
	opts := Options{
		Config: config.Config{Volumes: config.Volumes{Devices: []string{dev}, MountRoot: root,
			UnitDir: filepath.Join(root, "units"), StateDir: filepath.Join(root, "state")}},
		ConfigPath: cfgPath, SystemdRunning: func() bool { return false },
		Volumes: volumes.Options{LaunchMapping: noIMDS, KubeletCert: filepath.Join(root, "no-kubelet-cert")},
	}
	for i := 0; i < 2; i++ {
		var buf bytes.Buffer
		opts.Out = &buf
		if err := Run(context.Background(), opts); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, buf.String())
		}
		t.Logf("run %d:\n%s", i+1, buf.String())
	}
	if ok, err := mountinfo.Mounted(filepath.Join(root, "data1")); !ok || err != nil {
		t.Errorf("data1 not mounted: %v", err)
	}
	c, err := config.Load(cfgPath)
	if err != nil || len(c.Volumes.Devices) != 1 || c.Volumes.Devices[0] != dev {
		t.Errorf("agent config: %+v, %v", c, err)
	}
}

// countingRunner runs real commands and counts them by name.
type countingRunner struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *countingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[name]++
	r.mu.Unlock()
	return volumes.ExecRunner{}.Run(ctx, name, args...)
}

func (r *countingRunner) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// headTail hashes the first and last MiB of dev.
func headTail(t *testing.T, dev string) [32]byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Seek(0, 2)
	buf := make([]byte, 2<<20)
	f.ReadAt(buf[:1<<20], 0)
	f.ReadAt(buf[1<<20:], size-1<<20)
	return sha256.Sum256(buf)
}

func blkidUUID(t *testing.T, dev string) string {
	out, _ := exec.Command("blkid", "-p", "-s", "UUID", "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// mountedDev says whether dev (or anything with its major:minor) is mounted.
func mountedDev(t *testing.T, dev string) []string {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, i := range infos {
		if uint32(i.Major) == unix.Major(st.Rdev) && uint32(i.Minor) == unix.Minor(st.Rdev) {
			at = append(at, i.Mountpoint)
		}
	}
	return at
}

// TestRunLeavesForeignDiskAloneAcrossReboot is issue 17's data case on real
// loop devices posing as Nitro EBS volumes (NVMe serial = volume ID): the
// first boot records and formats the launch volume; then a blank volume is
// attached (as the EBS CSI driver would) and the machine "reboots" (every
// mount gone, bootstrap runs again). The foreign volume is listed as a data
// volume and blank, yet stays untouched; the launch volume is mounted again,
// not reformatted, its file intact.
func TestRunLeavesForeignDiskAloneAcrossReboot(t *testing.T) {
	requireLoop(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(root) })
	launch := attach(t, newImage(t))
	foreignImg := newImage(t)
	// The foreign volume is listed from the start through a link that
	// exists only once it is attached, as /dev/xvdba would; the test never
	// lets bootstrap pick disks by itself (it would see the host's).
	foreignLink := filepath.Join(root, "dev", "xvdba")
	os.MkdirAll(filepath.Dir(foreignLink), 0o755)

	type identity struct{ serial, mapping string }
	ids := map[string]identity{filepath.Base(launch): {"vol01111111111111111", "/dev/xvdb"}}
	disc := &volumes.Discoverer{Identify: func(d *volumes.Disk) {
		if id, ok := ids[d.Name]; ok {
			d.Kind, d.Model, d.Serial, d.MappingName = volumes.KindEBS, "Amazon Elastic Block Store", id.serial, id.mapping
			d.VolumeID = "vol-" + strings.TrimPrefix(id.serial, "vol")
		}
	}}
	imdsCalls := 0
	mappings := []string{"sdb"}
	cfgPath := filepath.Join(root, "etc", "agent.json")
	boot := func(n int) (*countingRunner, string) {
		t.Helper()
		r := &countingRunner{}
		var out bytes.Buffer
		err := Run(context.Background(), Options{
			Config: config.Config{Volumes: config.Volumes{Devices: []string{launch, foreignLink}, MountRoot: root,
				UnitDir: filepath.Join(root, "units"), StateDir: filepath.Join(root, "state")}},
			ConfigPath: cfgPath, SystemdRunning: func() bool { return false }, Out: &out,
			Volumes: volumes.Options{Runner: r, Discoverer: disc, KubeletCert: filepath.Join(root, "no-kubelet-cert"),
				LaunchMapping: func(context.Context) ([]string, string, error) { imdsCalls++; return mappings, "", nil }},
		})
		t.Logf("boot %d:\n%s", n, out.String())
		if err != nil {
			t.Fatalf("boot %d: %v", n, err)
		}
		return r, out.String()
	}
	data1 := filepath.Join(root, "data1")
	statePath := filepath.Join(root, "state", volumes.LaunchFile)

	// Boot 1: only the launch volume is there.
	if r, _ := boot(1); r.count("mkfs.xfs") != 1 {
		t.Fatalf("boot 1 ran mkfs.xfs %d times, want 1", r.count("mkfs.xfs"))
	}
	uuid := blkidUUID(t, launch)
	if err := os.WriteFile(filepath.Join(data1, "keep"), []byte("launch data"), 0o644); err != nil {
		t.Fatalf("data1 not usable: %v", err)
	}
	rec, err := volumes.LoadLaunchRecord(statePath)
	if err != nil || rec == nil || !rec.SetupComplete || rec.Source != volumes.SourceIMDS || len(rec.Disks) != 1 || rec.Disks[0].Key != "vol-01111111111111111" {
		t.Fatalf("launch record after boot 1: %+v, %v", rec, err)
	}
	recBytes, _ := os.ReadFile(statePath)

	// A CSI volume gets attached; after a stop/start IMDS would list it too.
	foreign := attach(t, foreignImg)
	ids[filepath.Base(foreign)] = identity{"vol02222222222222222", "/dev/xvdba"}
	if err := os.Symlink(foreign, foreignLink); err != nil {
		t.Fatal(err)
	}
	mappings = []string{"sdb", "xvdba"}
	foreignSum := headTail(t, foreign)

	// Reboot: every mount is gone; bootstrap runs again.
	unmountUnder(root)
	r, out := boot(2)
	if n := r.count("mkfs.xfs") + r.count("mkfs.ext4") + r.count("mdadm"); n != 0 {
		t.Errorf("boot 2 ran mkfs/mdadm %d times (%v), want 0", n, r.calls)
	}
	if want := fmt.Sprintf("%s (volume vol-02222222222222222, serial vol02222222222222222, mapping /dev/xvdba) is blank but was not attached by Joiner at launch", foreign); !strings.Contains(out, want) {
		t.Errorf("boot 2 output does not say %q", want)
	}
	if headTail(t, foreign) != foreignSum || blkidUUID(t, foreign) != "" {
		t.Errorf("the foreign volume was written to (blkid UUID %q)", blkidUUID(t, foreign))
	}
	if at := mountedDev(t, foreign); len(at) != 0 {
		t.Errorf("the foreign volume is mounted at %v", at)
	}
	if got := blkidUUID(t, launch); got != uuid {
		t.Errorf("launch volume UUID %s -> %s: reformatted", uuid, got)
	}
	if b, err := os.ReadFile(filepath.Join(data1, "keep")); err != nil || string(b) != "launch data" {
		t.Errorf("after the reboot data1/keep = %q, %v", b, err)
	}
	if after, _ := os.ReadFile(statePath); !bytes.Equal(after, recBytes) {
		t.Errorf("launch record changed on reboot:\n%s\n%s", recBytes, after)
	}
	if imdsCalls != 1 {
		t.Errorf("IMDS asked %d times, want once (first boot)", imdsCalls)
	}
}
