package bootstrap

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/joiner-dev/joiner/agent/config"
)

// TestRunOnLoopDevice runs the whole first boot (real discovery, probe,
// mkfs, units, mount, config) on a loop device, twice.
func TestRunOnLoopDevice(t *testing.T) {
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
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("loop-device test: losetup: %v %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	root := t.TempDir()
	t.Cleanup(func() {
		infos, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(root))
		for i := len(infos) - 1; i >= 0; i-- {
			exec.Command("umount", infos[i].Mountpoint).Run()
		}
	})
	cfgPath := filepath.Join(root, "etc", "agent.json")
	opts := Options{
		Config: config.Config{Volumes: config.Volumes{Devices: []string{dev}, MountRoot: root,
			UnitDir: filepath.Join(root, "units"), StateDir: filepath.Join(root, "state")}},
		ConfigPath: cfgPath, SystemdRunning: func() bool { return false },
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
