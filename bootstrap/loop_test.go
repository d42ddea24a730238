package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/agent/volumes"
	"github.com/joiner-dev/joiner/test/loopdev"
)

func noIMDS(context.Context) ([]string, string, error) {
	return nil, "", errors.New("no IMDS in tests")
}

// TestRunOnLoopDevice runs the whole first boot (real discovery, probe,
// mkfs, units, mount, config) on a loop device, twice.
func TestRunOnLoopDevice(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs")
	dev := loopdev.New(t, 320)
	root := t.TempDir()
	t.Cleanup(func() { loopdev.UnmountUnder(t, root) })
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

// TestRunLeavesForeignDiskAloneAcrossReboot is issue 17's data case on real
// loop devices posing as Nitro EBS volumes (NVMe serial = volume ID): the
// first boot records and formats the launch volume; then a blank volume is
// attached (as the EBS CSI driver would) and the machine "reboots" (every
// mount gone, bootstrap runs again). The foreign volume is listed as a data
// volume and blank, yet stays untouched; the launch volume is mounted again,
// not reformatted, its file intact.
func TestRunLeavesForeignDiskAloneAcrossReboot(t *testing.T) {
	loopdev.Require(t, "mkfs.xfs")
	root := t.TempDir()
	t.Cleanup(func() { loopdev.UnmountUnder(t, root) })
	launch := loopdev.New(t, 320)
	foreignImg := loopdev.Image(t, 320)
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
	boot := func(n int) (*loopdev.CountingRunner, string) {
		t.Helper()
		r := &loopdev.CountingRunner{}
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
	if r, _ := boot(1); r.Count("mkfs.xfs") != 1 {
		t.Fatalf("boot 1 ran mkfs.xfs %d times, want 1", r.Count("mkfs.xfs"))
	}
	uuid := loopdev.UUID(launch)
	if err := os.WriteFile(filepath.Join(data1, "keep"), []byte("launch data"), 0o644); err != nil {
		t.Fatalf("data1 not usable: %v", err)
	}
	rec, err := volumes.LoadLaunchRecord(statePath)
	if err != nil || rec == nil || !rec.SetupComplete || rec.Source != volumes.SourceIMDS || len(rec.Disks) != 1 || rec.Disks[0].Key != "vol-01111111111111111" {
		t.Fatalf("launch record after boot 1: %+v, %v", rec, err)
	}
	recBytes, _ := os.ReadFile(statePath)

	// A CSI volume gets attached; after a stop/start IMDS would list it too.
	foreign := loopdev.Attach(t, foreignImg)
	ids[filepath.Base(foreign)] = identity{"vol02222222222222222", "/dev/xvdba"}
	if err := os.Symlink(foreign, foreignLink); err != nil {
		t.Fatal(err)
	}
	mappings = []string{"sdb", "xvdba"}
	foreignSum := loopdev.HeadTailSum(t, foreign)

	// Reboot: every mount is gone; bootstrap runs again.
	loopdev.UnmountUnder(t, root)
	r, out := boot(2)
	if n := r.Count("mkfs.xfs") + r.Count("mkfs.ext4") + r.Count("mdadm"); n != 0 {
		t.Errorf("boot 2 ran mkfs/mdadm %d times (%v), want 0", n, r)
	}
	if want := fmt.Sprintf("%s (volume vol-02222222222222222, serial vol02222222222222222, mapping /dev/xvdba) is blank but was not attached by Joiner at launch", foreign); !strings.Contains(out, want) {
		t.Errorf("boot 2 output does not say %q", want)
	}
	if loopdev.HeadTailSum(t, foreign) != foreignSum || loopdev.UUID(foreign) != "" {
		t.Errorf("the foreign volume was written to (blkid UUID %q)", loopdev.UUID(foreign))
	}
	if at := loopdev.MountedAt(t, foreign); len(at) != 0 {
		t.Errorf("the foreign volume is mounted at %v", at)
	}
	if got := loopdev.UUID(launch); got != uuid {
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
