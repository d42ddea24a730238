package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/agent/config"
)

// fakeRunner records commands and fails those whose name is in fail.
type fakeRunner struct {
	cmds []string
	fail map[string]error
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.cmds = append(f.cmds, name+" "+strings.Join(args, " "))
	return nil, f.fail[name]
}

func TestExecutorRAID0Commands(t *testing.T) {
	root := t.TempDir()
	cfg := testCfg(func(c *config.Volumes) {
		c.MountRoot, c.UnitDir = root, filepath.Join(root, "units")
		c.InstanceStore = config.InstanceStore{Layout: config.LayoutRAID0, MountPath: "/mnt/is", RAIDName: "r0", BindDirs: []string{"/var/lib/kubelet"}}
	})
	disks := []Disk{
		{Name: "nvme1n1", Path: "/dev/nvme1n1", Dev: "259:1", Size: 1 << 30, Kind: KindInstanceStore, Serial: "A"},
		{Name: "nvme2n1", Path: "/dev/nvme2n1", Dev: "259:2", Size: 1 << 30, Kind: KindInstanceStore, Serial: "B"},
	}
	plan := PlanVolumes(PlanInput{Inventory: Inventory{Disks: disks}, Config: cfg, AllowFormat: true, NewUUID: seqUUID()})
	r := &fakeRunner{}
	j := &Journal{}
	ex := &Executor{Runner: r, JournalPath: filepath.Join(root, "state", JournalFile), Journal: j,
		Recheck: func(context.Context, string) (string, error) { return "", nil }, CheckFS: func(string, string) error { return nil }}
	if err := ex.Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mdadm --create /dev/md/r0 --run --level=0 --chunk=256 --homehost=any --name=r0 --raid-devices=2 /dev/nvme1n1 /dev/nvme2n1",
		"mkfs.xfs -q -m uuid=00000000-0000-4000-8000-000000000001 /dev/md/r0",
		"mount -t xfs -o defaults,noatime,nofail,x-systemd.device-timeout=10s /dev/md/r0 " + root + "/mnt/is",
		"mount --bind " + root + "/mnt/is/var_lib_kubelet " + root + "/var/lib/kubelet",
	}
	if strings.Join(r.cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(r.cmds, "\n"), strings.Join(want, "\n"))
	}
	saved, err := LoadJournal(ex.JournalPath)
	if err != nil || len(saved.Entries) != 1 || saved.Entries[0].Key != "md:r0" || saved.Entries[0].Phase != PhaseFormatted {
		t.Errorf("journal: %+v, %v", saved, err)
	}
	for _, u := range []string{"mnt-is.mount", "var-lib-kubelet.mount"} {
		if _, err := os.Stat(filepath.Join(root, "units", strings.TrimPrefix(strings.ReplaceAll(root, "/", "-"), "-")+"-"+u)); err != nil {
			t.Errorf("unit %s: %v", u, err)
		}
	}
}

func TestExecutorRefusesWhatAppearedSincePlanning(t *testing.T) {
	root := t.TempDir()
	cfg := testCfg(func(c *config.Volumes) { c.MountRoot, c.UnitDir = root, filepath.Join(root, "units") })
	inv := Inventory{Disks: []Disk{ebs("nvme1n1", "/dev/xvdb"), ebs("nvme2n1", "/dev/xvdc")}}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: cfg, AllowFormat: true, NewUUID: seqUUID(), Launch: firstBoot(inv, cfg)})
	r := &fakeRunner{}
	ex := &Executor{Runner: r, JournalPath: filepath.Join(root, "j.json"), CheckFS: func(string, string) error { return nil },
		Recheck: func(_ context.Context, p string) (string, error) {
			if p == "/dev/nvme1n1" {
				return "holds xfs (filesystem at 0)", nil
			}
			return "", nil
		}}
	err := ex.Apply(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), "refusing to format /dev/nvme1n1") {
		t.Fatalf("err = %v", err)
	}
	for _, c := range r.cmds {
		if strings.Contains(c, "nvme1n1") {
			t.Errorf("ran %q on the disk that gained a signature", c)
		}
	}
	if len(r.cmds) != 2 || !strings.HasPrefix(r.cmds[0], "mkfs.xfs") || !strings.HasSuffix(r.cmds[0], "/dev/nvme2n1") {
		t.Errorf("the other disk should still be formatted and mounted: %v", r.cmds)
	}
}

func TestExecutorMkfsFailureLeavesJournalFormatting(t *testing.T) {
	root := t.TempDir()
	cfg := testCfg(func(c *config.Volumes) { c.MountRoot, c.UnitDir = root, filepath.Join(root, "units") })
	inv := Inventory{Disks: []Disk{ebs("nvme1n1", "/dev/xvdb")}}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: cfg, AllowFormat: true, NewUUID: seqUUID(), Launch: firstBoot(inv, cfg)})
	r := &fakeRunner{fail: map[string]error{"mkfs.xfs": errors.New("exit status 1")}}
	ex := &Executor{Runner: r, JournalPath: filepath.Join(root, "j.json"), Recheck: func(context.Context, string) (string, error) { return "", nil }}
	if err := ex.Apply(context.Background(), plan); err == nil {
		t.Fatal("want an error")
	}
	if len(r.cmds) != 1 {
		t.Errorf("ran %v after mkfs failed", r.cmds)
	}
	j, _ := LoadJournal(ex.JournalPath)
	if len(j.Entries) != 1 || j.Entries[0].Phase != PhaseFormatting {
		t.Errorf("journal %+v", j)
	}
}

func TestExecutorInterruptedFormatThatDoesNotCheckCleanIsLeftAlone(t *testing.T) {
	root := t.TempDir()
	cfg := testCfg(func(c *config.Volumes) { c.MountRoot, c.UnitDir = root, filepath.Join(root, "units") })
	disk := ebs("nvme1n1", "/dev/xvdb", func(d *Disk) {
		d.VolumeID = "vol-1"
		d.Probe = ProbeResult{Signatures: []Signature{{Type: "xfs", Usage: UsageFilesystem, UUID: "u1"}}, NonZero: true}
	})
	journal := Journal{Entries: []JournalEntry{{Key: "vol-1", FSType: "xfs", UUID: "u1", Phase: PhaseFormatting}}}
	plan := PlanVolumes(PlanInput{Inventory: Inventory{Disks: []Disk{disk}}, Config: cfg, Journal: journal, AllowFormat: true, NewUUID: seqUUID(),
		Launch: &LaunchRecord{Version: LaunchRecordVersion, Disks: []LaunchDisk{{Key: "vol-1"}}}})
	r := &fakeRunner{fail: map[string]error{"xfs_repair": errors.New("exit status 1")}}
	ex := &Executor{Runner: r, JournalPath: filepath.Join(root, "j.json"), Journal: &journal}
	err := ex.Apply(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), "does not check clean; left alone") {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(r.cmds, ";") != "xfs_repair -n /dev/nvme1n1" {
		t.Errorf("commands %v: want only the check", r.cmds)
	}
	if journal.Entries[0].Phase != PhaseFormatting {
		t.Errorf("journal changed: %+v", journal)
	}
}
