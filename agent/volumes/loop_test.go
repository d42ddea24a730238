package volumes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap/zaptest"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/test/loopdev"
)

// These tests format and mount real loop devices. They need root and the
// tools from scripts/install-deps.sh; they skip with a message otherwise.
// Everything mounts under a temp dir; the real /data* is never touched.

// testConfig returns a config whose mounts, units and journal all live in a
// temp dir, unmounted at cleanup.
func testConfig(t *testing.T, devices ...string) config.Volumes {
	root := t.TempDir()
	t.Cleanup(func() { loopdev.UnmountUnder(t, root) })
	c := config.Config{Volumes: config.Volumes{
		Devices:   devices,
		MountRoot: root,
		UnitDir:   filepath.Join(root, "units"),
		StateDir:  filepath.Join(root, "state"),
	}}.WithDefaults()
	return c.Volumes
}

func setup(t *testing.T, cfg config.Volumes, allowFormat bool) (Plan, *loopdev.CountingRunner) {
	t.Helper()
	r := &loopdev.CountingRunner{}
	plan, err := Setup(context.Background(), Options{Config: cfg, AllowFormat: allowFormat, RecordLaunch: allowFormat, Runner: r, Log: zaptest.NewLogger(t),
		KubeletCert: noKubelet(t)})
	if err != nil {
		t.Fatalf("Setup: %v\nplan: %+v", err, plan.Volumes)
	}
	return plan, r
}

// noKubelet is a kubelet certificate path that does not exist, so a host
// that runs the tests and is itself a node does not look like a node that
// joined a cluster before.
func noKubelet(t *testing.T) string { return filepath.Join(t.TempDir(), "kubelet-client-current.pem") }

func target(cfg config.Volumes, i int) string {
	return filepath.Join(cfg.MountRoot, fmt.Sprintf("%s%d", cfg.MountPrefix, i))
}

// mountDev returns the major:minor mounted at target, or "".
func mountDev(t *testing.T, target string) string {
	infos, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", infos[0].Major, infos[0].Minor)
}

func mountsUnder(t *testing.T, root string) string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(root))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, i := range infos {
		fmt.Fprintf(&b, "%d:%d %s %s %s %s\n", i.Major, i.Minor, i.Root, i.Mountpoint, i.FSType, i.Source)
	}
	return b.String()
}

type fileState struct {
	content string
	mtime   int64
}

func unitFiles(t *testing.T, dir string) map[string]fileState {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileState{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		info, _ := e.Info()
		out[e.Name()] = fileState{string(b), info.ModTime().UnixNano()}
	}
	return out
}

// blkidUUID is the filesystem UUID on dev; t fails when there is none.
func blkidUUID(t *testing.T, dev string) string {
	t.Helper()
	u := loopdev.UUID(dev)
	if u == "" {
		t.Fatalf("no filesystem UUID on %s", dev)
	}
	return u
}

func TestLoopBlankDisksFormattedAndMountedInMappingOrder(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs", "xfs_repair")
	l := []string{loopdev.New(t, 320), loopdev.New(t, 320), loopdev.New(t, 320)}
	// Mapping order deliberately differs from attach order.
	order := []string{l[2], l[0], l[1]}
	cfg := testConfig(t, order...)
	plan, r := setup(t, cfg, true)
	if got := r.Count("mkfs.xfs"); got != 3 {
		t.Fatalf("mkfs.xfs ran %d times, want 3; plan %+v", got, plan.Volumes)
	}
	for i, dev := range order {
		num, _ := loopdev.Num(dev)
		tgt := target(cfg, i+1)
		if got := mountDev(t, tgt); got != num {
			t.Errorf("%s: mounted device %q, want %s (%s)", tgt, got, num, dev)
		}
		if err := os.WriteFile(filepath.Join(tgt, "keep"), []byte(dev), 0o644); err != nil {
			t.Fatal(err)
		}
		unitName := strings.TrimPrefix(strings.ReplaceAll(tgt, "/", "-"), "-") + ".mount"
		b, err := os.ReadFile(filepath.Join(cfg.UnitDir, unitName))
		if err != nil {
			t.Fatalf("unit for %s: %v", tgt, err)
		}
		if want := "What=/dev/disk/by-uuid/" + blkidUUID(t, dev) + "\n"; !strings.Contains(string(b), want) {
			t.Errorf("unit %s lacks %q:\n%s", unitName, want, b)
		}
		if !strings.Contains(string(b), "nofail,x-systemd.device-timeout=10s") {
			t.Errorf("unit %s lacks nofail and device timeout:\n%s", unitName, b)
		}
	}

	var files []string
	for name := range unitFiles(t, cfg.UnitDir) {
		files = append(files, filepath.Join(cfg.UnitDir, name))
	}
	verifyUnits(t, cfg.UnitDir, files)

	// Run again: nothing changes.
	units, mounts := unitFiles(t, cfg.UnitDir), mountsUnder(t, cfg.MountRoot)
	_, r = setup(t, cfg, true)
	if n := r.Count("mkfs.xfs") + r.Count("mount") + r.Count("mdadm"); n != 0 {
		t.Errorf("second run ran mkfs/mount/mdadm %d times, want 0 (%v)", n, r)
	}
	if got := unitFiles(t, cfg.UnitDir); fmt.Sprint(got) != fmt.Sprint(units) {
		t.Errorf("unit files changed on re-run:\n%v\n%v", units, got)
	}
	if got := mountsUnder(t, cfg.MountRoot); got != mounts {
		t.Errorf("mounts changed on re-run:\n%s\n%s", mounts, got)
	}

	// "Reboot": unmount everything; the agent's re-check (formatting off)
	// mounts them again, does not format, and the files are still there.
	loopdev.UnmountUnder(t, cfg.MountRoot)
	r = &loopdev.CountingRunner{}
	rp, err := Recheck(context.Background(), Options{Config: cfg, Runner: r, Log: zaptest.NewLogger(t), KubeletCert: noKubelet(t)}, nil)
	if err != nil {
		t.Fatalf("Recheck: %v", err)
	}
	if r.Count("mkfs.xfs") != 0 {
		t.Errorf("re-check formatted")
	}
	for i, dev := range order {
		b, err := os.ReadFile(filepath.Join(target(cfg, i+1), "keep"))
		if err != nil || string(b) != dev {
			t.Errorf("after re-check, %s/keep = %q, %v; want %q", target(cfg, i+1), b, err, dev)
		}
		if rp.Volumes[i].State != StateReady {
			t.Errorf("re-check status %+v", rp.Volumes[i])
		}
	}
	if got := mountsUnder(t, cfg.MountRoot); got != mounts {
		t.Errorf("mounts after re-check differ:\n%s\n%s", mounts, got)
	}
}

func TestLoopAgentRecheckDoesNotFormatBlankDisks(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs")
	dev := loopdev.New(t, 320)
	cfg := testConfig(t, dev)
	r := &loopdev.CountingRunner{}
	plan, err := Recheck(context.Background(), Options{Config: cfg, Runner: r, Log: zaptest.NewLogger(t), KubeletCert: noKubelet(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Count("mkfs.xfs") != 0 || len(plan.Volumes) != 1 || plan.Volumes[0].State != StateBlank {
		t.Errorf("re-check: mkfs %d, volumes %+v; want no format and state blank", r.Count("mkfs.xfs"), plan.Volumes)
	}
}

// preparer plants data on a device the way a real tool would.
type preparer struct {
	name  string
	tools []string
	// prep plants it and reports whether a real tool wrote it (false: only
	// the magic was written, which libblkid may not accept).
	prep func(t *testing.T, dev string) bool
}

func writeAt(t *testing.T, dev string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

var preparers = []preparer{
	{"ext4 with a file", []string{"mkfs.ext4"}, func(t *testing.T, dev string) bool {
		loopdev.Run(t, "mkfs.ext4", "-q", "-F", dev)
		mnt := t.TempDir()
		loopdev.Run(t, "mount", dev, mnt)
		if err := os.WriteFile(filepath.Join(mnt, "precious"), []byte("do not lose me"), 0o644); err != nil {
			t.Fatal(err)
		}
		loopdev.Run(t, "umount", mnt)
		return true
	}},
	{"xfs", []string{"mkfs.xfs"}, func(t *testing.T, dev string) bool { loopdev.Run(t, "mkfs.xfs", "-q", "-f", dev); return true }},
	{"gpt", []string{"sgdisk"}, func(t *testing.T, dev string) bool { loopdev.Run(t, "sgdisk", "-o", dev); return true }},
	{"gpt backup header only", []string{"sgdisk"}, func(t *testing.T, dev string) bool {
		loopdev.Run(t, "sgdisk", "-o", dev)
		writeAt(t, dev, 0, make([]byte, 34*512)) // wipe the protective MBR and the primary header
		return true
	}},
	{"dos", []string{"sfdisk"}, func(t *testing.T, dev string) bool {
		cmd := exec.Command("sfdisk", "--no-reread", "--no-tell-kernel", dev)
		cmd.Stdin = strings.NewReader("label: dos\n,\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v %s", err, out)
		}
		return true
	}},
	{"LVM PV", []string{"pvcreate"}, func(t *testing.T, dev string) bool {
		loopdev.Run(t, "pvcreate", "-ff", "-y", "--devices", dev, dev)
		return true
	}},
	{"mdraid member", nil, func(t *testing.T, dev string) bool {
		if _, err := os.Stat("/proc/mdstat"); err == nil {
			if _, err := exec.LookPath("mdadm"); err == nil {
				// A real RAID1 member superblock; --stop right away.
				out, err := exec.Command("mdadm", "--create", "/dev/md/joiner-test-member", "--run", "--level=1", "--raid-devices=2", dev, "missing").CombinedOutput()
				if err == nil {
					loopdev.Run(t, "mdadm", "--stop", "/dev/md/joiner-test-member")
					return true
				}
				t.Logf("mdadm --create failed (%v %s); planting the superblock magic instead", err, out)
			}
		}
		// No md driver: write a v1.2 superblock magic (what mdadm writes at 4 KiB).
		writeAt(t, dev, 4096, le32(mdMagic))
		return false
	}},
	{"swap", []string{"mkswap"}, func(t *testing.T, dev string) bool { loopdev.Run(t, "mkswap", dev); return true }},
	{"LUKS", nil, func(t *testing.T, dev string) bool {
		if _, err := exec.LookPath("cryptsetup"); err == nil {
			key := filepath.Join(t.TempDir(), "key")
			os.WriteFile(key, []byte("test-passphrase"), 0o600)
			out, err := exec.Command("cryptsetup", "luksFormat", "--batch-mode", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", key, dev).CombinedOutput()
			if err == nil {
				return true
			}
			t.Logf("cryptsetup luksFormat failed (%v %s); writing the LUKS magic instead", err, out)
		}
		writeAt(t, dev, 0, []byte("LUKS\xba\xbe\x00\x02"))
		return false
	}},
	{"unknown data", nil, func(t *testing.T, dev string) bool {
		writeAt(t, dev, 200<<10, []byte("some bytes no probe knows"))
		return false
	}},
}

func TestLoopNeverFormatsDisksWithSignatures(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs")
	var devs []string
	sums := map[string][32]byte{}
	names := map[string]string{}
	for _, p := range preparers {
		missing := ""
		for _, tool := range p.tools {
			if _, err := exec.LookPath(tool); err != nil {
				missing = tool
			}
		}
		if missing != "" {
			t.Logf("%s: %s not installed; case skipped", p.name, missing)
			continue
		}
		dev := loopdev.New(t, 320)
		real := p.prep(t, dev)
		settle(t, dev)
		// Both layers see it on their own (the zero rule covers "unknown data").
		f, err := os.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Probe(f, loopdev.Size(t, dev))
		f.Close()
		if err != nil || (res.Blank() && p.name != "unknown data") || !res.NonZero {
			t.Errorf("%s: pure probe: %+v, %v", p.name, res, err)
		}
		ext, err := CrossCheck(ExecRunner{})(context.Background(), dev)
		if err != nil || (len(ext) == 0 && real) {
			t.Errorf("%s: blkid/wipefs: %v, %v", p.name, ext, err)
		}
		t.Logf("%s: blkid/wipefs: %v", p.name, ext)
		devs = append(devs, dev)
		sums[dev] = loopdev.HeadTailSum(t, dev)
		names[dev] = p.name
	}
	blank := loopdev.New(t, 320)
	devs = append(devs, blank)
	cfg := testConfig(t, devs...)
	r := &loopdev.CountingRunner{}
	plan, err := Setup(context.Background(), Options{Config: cfg, AllowFormat: true, RecordLaunch: true, Runner: r, Log: zaptest.NewLogger(t), KubeletCert: noKubelet(t)})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if r.Count("mkfs.xfs") != 1 {
		t.Errorf("mkfs.xfs ran %d times, want 1 (only the blank disk)", r.Count("mkfs.xfs"))
	}
	for i, dev := range devs {
		v := plan.Volumes[i]
		if dev == blank {
			if v.State != StateReady || mountDev(t, target(cfg, i+1)) == "" {
				t.Errorf("blank disk: %+v, not mounted", v)
			}
			continue
		}
		if v.State != StateHandsOff {
			t.Errorf("%s (%s): state %q (%s), want hands-off", names[dev], dev, v.State, v.Reason)
		}
		if mountDev(t, target(cfg, i+1)) != "" {
			t.Errorf("%s: mounted", names[dev])
		}
		if loopdev.HeadTailSum(t, dev) != sums[dev] {
			t.Errorf("%s (%s): first/last MiB changed", names[dev], dev)
		}
		t.Logf("%s: %s", names[dev], v.Reason)
	}
	// The ext4 disk's file is still there.
	mnt := t.TempDir()
	loopdev.Run(t, "mount", "-o", "ro", devs[0], mnt)
	defer loopdev.Run(t, "umount", mnt)
	if b, err := os.ReadFile(filepath.Join(mnt, "precious")); err != nil || string(b) != "do not lose me" {
		t.Errorf("ext4 file: %q, %v", b, err)
	}
}

// crashEnv names the env var that makes TestLoopCrashHelper run Setup and
// SIGKILL itself right after mkfs.
const crashEnv = "JOINER_VOLUMES_CRASH_CONFIG"

func TestLoopCrashHelper(t *testing.T) {
	raw := os.Getenv(crashEnv)
	if raw == "" {
		t.Skip("helper for TestLoopCrashAfterMkfsRecovers (runs only in its child process)")
	}
	var cfg config.Volumes
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	o := Options{Config: cfg, AllowFormat: true, RecordLaunch: true, KubeletCert: filepath.Join(cfg.StateDir, "no-kubelet-cert")}
	o.afterFormat = func(Action) { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	_, err := Setup(context.Background(), o)
	t.Fatalf("Setup returned (%v) instead of being killed after mkfs", err)
}

func TestLoopCrashAfterMkfsRecovers(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs", "xfs_repair")
	dev := loopdev.New(t, 320)
	cfg := testConfig(t, dev)
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(raw))
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v\n%s", err, out)
	}
	j, err := LoadJournal(JournalPath(cfg))
	if err != nil || len(j.Entries) != 1 || j.Entries[0].Phase != PhaseFormatting {
		t.Fatalf("journal after crash: %+v, %v; want one entry in phase formatting", j, err)
	}
	uuid := blkidUUID(t, dev)
	if uuid != j.Entries[0].UUID {
		t.Fatalf("disk UUID %q, journal %q", uuid, j.Entries[0].UUID)
	}
	if mountDev(t, target(cfg, 1)) != "" {
		t.Fatal("mounted after the crash; the crash came too late")
	}
	plan, r := setup(t, cfg, true)
	if r.Count("mkfs.xfs") != 0 || r.Count("xfs_repair") != 1 {
		t.Errorf("recovery ran mkfs.xfs %d times, xfs_repair %d times; want 0 and 1", r.Count("mkfs.xfs"), r.Count("xfs_repair"))
	}
	num, _ := loopdev.Num(dev)
	if mountDev(t, target(cfg, 1)) != num {
		t.Errorf("not mounted after recovery: %+v", plan.Volumes)
	}
	if got := blkidUUID(t, dev); got != uuid {
		t.Errorf("UUID changed from %s to %s: the disk was formatted again", uuid, got)
	}
	if j, _ := LoadJournal(JournalPath(cfg)); j.Entries[0].Phase != PhaseFormatted {
		t.Errorf("journal after recovery: %+v", j)
	}
}

func TestLoopRAID0WithBindMounts(t *testing.T) {
	loopdev.Require(t, "mdadm", "mkfs.xfs")
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		_ = exec.Command("modprobe", "md_mod").Run() // CI kernels ship md as a module
	}
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		t.Skip("RAID0 test: the md driver is not available in this kernel (no /proc/mdstat)")
	}
	a, b := loopdev.New(t, 200), loopdev.New(t, 200)
	cfg := testConfig(t)
	cfg.InstanceStore = config.InstanceStore{Layout: config.LayoutRAID0, MountPath: "/mnt/instance-store",
		RAIDName: "joiner-test-raid0", Devices: []string{a, b}, BindDirs: []string{"/var/lib/kubelet"}}
	t.Cleanup(func() { exec.Command("mdadm", "--stop", "/dev/md/joiner-test-raid0").Run() })
	plan, r := setup(t, cfg, true)
	if r.Count("mdadm") != 1 || r.Count("mkfs.xfs") != 1 {
		t.Errorf("mdadm %d, mkfs.xfs %d; want 1 and 1", r.Count("mdadm"), r.Count("mkfs.xfs"))
	}
	mp := filepath.Join(cfg.MountRoot, "/mnt/instance-store")
	if mountDev(t, mp) == "" {
		t.Fatalf("RAID0 not mounted at %s: %+v", mp, plan.Volumes)
	}
	kubelet := filepath.Join(cfg.MountRoot, "/var/lib/kubelet")
	os.WriteFile(filepath.Join(kubelet, "x"), []byte("x"), 0o644)
	if _, err := os.Stat(filepath.Join(mp, "var_lib_kubelet", "x")); err != nil {
		t.Errorf("bind mount does not land on the instance store: %v", err)
	}
	_, r = setup(t, cfg, true)
	if r.Count("mdadm")+r.Count("mkfs.xfs")+r.Count("mount") != 0 {
		t.Errorf("second run: %v", r)
	}
}

func TestUnitFilesPassSystemdAnalyzeVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	cfg := config.Config{Volumes: config.Volumes{UnitDir: t.TempDir(),
		InstanceStore: config.InstanceStore{Layout: config.LayoutRAID0, BindDirs: []string{"/var/lib/kubelet", "/var/log/pods"}}}}.WithDefaults().Volumes
	n := 0
	inv := Inventory{Disks: []Disk{
		{Name: "nvme1n1", Path: "/dev/nvme1n1", Dev: "259:1", Size: 1 << 30, Kind: KindEBS, MappingName: "/dev/xvdb"},
		{Name: "nvme2n1", Path: "/dev/nvme2n1", Dev: "259:2", Size: 1 << 30, Kind: KindInstanceStore, Serial: "AWS1"},
		{Name: "nvme3n1", Path: "/dev/nvme3n1", Dev: "259:3", Size: 1 << 30, Kind: KindInstanceStore, Serial: "AWS2"},
	}}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: cfg, AllowFormat: true, NewUUID: func() string { n++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) },
		Launch: firstBoot(inv, cfg)})
	var files []string
	for _, a := range plan.Actions {
		if a.Op == OpWriteUnit {
			if err := os.WriteFile(a.Unit.Path, a.Unit.Content(), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, a.Unit.Path)
		}
	}
	if len(files) != 4 {
		t.Fatalf("want 4 units (data1, instance store, 2 binds), got %v", files)
	}
	verifyUnits(t, cfg.UnitDir, files)
}

// verifyUnits runs systemd-analyze verify on files (units in dir) and fails
// on a non-zero exit or any complaint naming one of them.
func verifyUnits(t *testing.T, dir string, files []string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: units not verified")
		return
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--man=no"}, files...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	err := cmd.Run()
	t.Logf("systemd-analyze verify %d units: %v; output: %q", len(files), err, stderr.String())
	for _, f := range files {
		if strings.Contains(stderr.String(), filepath.Base(f)) {
			t.Errorf("systemd-analyze verify complains about %s:\n%s", filepath.Base(f), stderr.String())
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, stderr.String())
	}
}

// settle waits for udev (where it runs) to finish with dev, then stops any
// md array that udev's incremental assembly built on it, so the test sees
// the signature itself rather than a holder.
func settle(t *testing.T, dev string) {
	if _, err := exec.LookPath("udevadm"); err == nil {
		_ = exec.Command("udevadm", "settle", "--timeout=30").Run()
	}
	holders, _ := os.ReadDir(filepath.Join("/sys/block", filepath.Base(dev), "holders"))
	for _, h := range holders {
		if strings.HasPrefix(h.Name(), "md") {
			if out, err := exec.Command("mdadm", "--stop", "/dev/"+h.Name()).CombinedOutput(); err != nil {
				t.Logf("mdadm --stop /dev/%s: %v %s", h.Name(), err, out)
			}
		}
	}
}

func TestLoopFstabPersistence(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	dev := loopdev.New(t, 64)
	cfg := testConfig(t, dev)
	cfg.Persist, cfg.FstabPath, cfg.FSType = config.PersistFstab, filepath.Join(cfg.MountRoot, "fstab"), "ext4"
	os.WriteFile(cfg.FstabPath, []byte("UUID=keep / ext4 defaults 0 1\n"), 0o644)
	_, r := setup(t, cfg, true)
	if r.Count("mkfs.ext4") != 1 {
		t.Fatalf("mkfs.ext4 ran %d times", r.Count("mkfs.ext4"))
	}
	num, _ := loopdev.Num(dev)
	if mountDev(t, target(cfg, 1)) != num {
		t.Fatal("not mounted")
	}
	b, _ := os.ReadFile(cfg.FstabPath)
	want := "UUID=" + blkidUUID(t, dev) + " " + target(cfg, 1) + " ext4 defaults,noatime,nofail,x-systemd.device-timeout=10s 0 2\n"
	if !strings.HasPrefix(string(b), "UUID=keep / ext4 defaults 0 1\n") || !strings.Contains(string(b), want) {
		t.Errorf("fstab:\n%s\nwant a line %q", b, want)
	}
	if ents, _ := os.ReadDir(cfg.UnitDir); len(ents) != 0 {
		t.Errorf("units written in fstab mode: %v", ents)
	}
	_, r = setup(t, cfg, true)
	if after, _ := os.ReadFile(cfg.FstabPath); string(after) != string(b) || r.Count("mkfs.ext4")+r.Count("mount") != 0 {
		t.Errorf("second run changed something: %v\n%s", r, after)
	}
}
