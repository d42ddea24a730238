package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap/zaptest"

	"github.com/joiner-dev/joiner/agent/config"
)

// firstBoot is the record bootstrap makes at a first boot with the launch
// mapping unknown: every candidate present.
func firstBoot(inv Inventory, cfg config.Volumes) *LaunchRecord {
	return DecideLaunch(LaunchInput{Inventory: inv, Config: cfg, MayRecord: true}).Record
}

// nv is an EBS volume on Nitro: serial vol0..., volume ID vol-0...
func nv(name, mapping, serial string, mod ...func(*Disk)) Disk {
	return ebs(name, mapping, append([]func(*Disk){func(d *Disk) {
		d.Serial, d.VolumeID = serial, "vol-"+strings.TrimPrefix(serial, "vol")
	}}, mod...)...)
}

func withFS(uuid string) func(*Disk) {
	return func(d *Disk) {
		d.Probe = ProbeResult{Signatures: []Signature{{Type: "xfs", Usage: UsageFilesystem, UUID: uuid}}, NonZero: true}
	}
}

func rec(complete bool, keys ...string) *LaunchRecord {
	r := &LaunchRecord{Version: LaunchRecordVersion, Source: SourceFirstBoot, SetupComplete: complete}
	for _, k := range keys {
		r.Disks = append(r.Disks, LaunchDisk{Key: k})
	}
	return r
}

func TestLaunchIdentity(t *testing.T) {
	var (
		launch1 = nv("nvme1n1", "/dev/xvdb", "vol0aaa")
		launch2 = nv("nvme2n1", "/dev/xvdc", "vol0bbb")
		csi     = nv("nvme3n1", "/dev/xvdba", "vol0ccc") // a CSI driver's device name
		ours1   = nv("nvme1n1", "/dev/xvdb", "vol0aaa", withFS("u1"))
		ours2   = nv("nvme2n1", "/dev/xvdc", "vol0bbb", withFS("u2"))
		store   = func(name, serial string) Disk {
			return Disk{Name: name, Path: "/dev/" + name, Dev: "259:" + name[4:5], Size: 1 << 30, Kind: KindInstanceStore, Serial: serial, Model: modelInstanceStore}
		}
		j1  = Journal{Entries: []JournalEntry{{Key: "vol-0aaa", FSType: "xfs", UUID: "u1", Phase: PhaseFormatted}}}
		j2  = Journal{Entries: []JournalEntry{{Key: "vol-0bbb", FSType: "xfs", UUID: "u2", Phase: PhaseFormatted}}}
		imd = func(m ...string) LaunchFacts { return LaunchFacts{Mappings: m} }
	)
	for _, tc := range []struct {
		name    string
		disks   []Disk
		journal Journal
		record  *LaunchRecord
		facts   LaunchFacts
		cfg     func(*config.Volumes)
		agent   bool // the agent's re-check with formatOnAgentStart: may not record
		// the decision
		source   string // "" = no record to plan with
		write    bool
		complete bool
		keys     []string
		// the plan
		states  []string
		ops     string
		ignored []string // devices
		says    []string // substrings of some status reason or note
	}{
		{
			name:   "first boot, IMDS lists the launch volumes: only they are recorded and formatted",
			disks:  []Disk{csi, launch2, launch1},
			facts:  imd("sdb", "xvdc"),
			source: SourceIMDS, write: true, keys: []string{"vol-0aaa", "vol-0bbb"},
			states: []string{"ready", "ready"},
			ops: "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1\n" +
				"format /data2 /dev/nvme2n1\nwrite-unit /data2 \nmount /data2 /dev/nvme2n1",
			ignored: []string{"/dev/nvme3n1"},
			says: []string{"/dev/nvme3n1 (volume vol-0ccc, serial vol0ccc, mapping /dev/xvdba) is not in the instance's launch block-device mapping [sdb xvdc]",
				"/dev/nvme3n1 (volume vol-0ccc, serial vol0ccc, mapping /dev/xvdba) was not attached by Joiner at launch"},
		},
		{
			name:   "first boot, launch mapping unknown (no IMDS in the sandbox): the volumes present are recorded",
			disks:  []Disk{launch1},
			facts:  LaunchFacts{MappingsErr: "dial tcp 169.254.169.254:80: socket: address family not supported"},
			source: SourceFirstBoot, write: true, keys: []string{"vol-0aaa"},
			states: []string{"ready"},
			ops:    "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
			says:   []string{"launch block-device mapping unknown (dial tcp"},
		},
		{
			name:    "reboot: a blank CSI volume attached since is ignored; the launch volume is mounted, not formatted",
			disks:   []Disk{ours1, csi},
			journal: j1, record: rec(true, "vol-0aaa"),
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa"},
			states:  []string{"ready"},
			ops:     "write-unit /data1 \nmount /data1 /dev/nvme1n1",
			ignored: []string{"/dev/nvme3n1"},
			says:    []string{"/dev/nvme3n1 (volume vol-0ccc, serial vol0ccc, mapping /dev/xvdba) was not attached by Joiner at launch of this instance"},
		},
		{
			name:  "reboot: a blank volume that took the launch volume's device name is not it",
			disks: []Disk{nv("nvme3n1", "/dev/xvdb", "vol0ccc")},
			record: &LaunchRecord{Version: LaunchRecordVersion, SetupComplete: true,
				Disks: []LaunchDisk{{Key: "vol-0aaa", Mapping: "/dev/xvdb", Device: "/dev/nvme1n1"}}},
			complete: true, keys: []string{"vol-0aaa"},
			states:  []string{"missing"},
			ignored: []string{"/dev/nvme3n1"},
			says:    []string{"launch volume vol-0aaa (/dev/xvdb, recorded as /dev/nvme1n1) not found", "serial vol0ccc, mapping /dev/xvdb) was not attached by Joiner"},
		},
		{
			name:   "the first setup failed: the recorded volume is formatted on the next boot, a foreign one is not",
			disks:  []Disk{launch1, csi},
			record: rec(false, "vol-0aaa"),
			source: SourceFirstBoot, keys: []string{"vol-0aaa"},
			states:  []string{"ready"},
			ops:     "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
			ignored: []string{"/dev/nvme3n1"},
		},
		{
			name:   "the first setup completed: a blank launch volume is reported, not formatted",
			disks:  []Disk{launch1},
			record: rec(true, "vol-0aaa"),
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa"},
			states: []string{"blank"},
			says:   []string{"/dev/nvme1n1 (volume vol-0aaa, serial vol0aaa, mapping /dev/xvdb) is blank; the first setup of this instance has completed"},
		},
		{
			name:   "an explicit device list naming a foreign disk: hands off, named by device and serial",
			disks:  []Disk{launch1, csi},
			cfg:    func(c *config.Volumes) { c.Devices = []string{"/dev/xvdb", "/dev/xvdba"} },
			record: rec(false, "vol-0aaa"),
			source: SourceFirstBoot, keys: []string{"vol-0aaa"},
			states: []string{"ready", "hands-off"},
			ops:    "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
			says:   []string{"/dev/nvme3n1 (volume vol-0ccc, serial vol0ccc, mapping /dev/xvdba) is blank but was not attached by Joiner at launch of this instance (not in the launch record): never formatted"},
		},
		{
			name:   "a record made for another instance (an AMI made from a node) is ignored: this is the new instance's first boot",
			disks:  []Disk{launch1},
			record: &LaunchRecord{Version: LaunchRecordVersion, InstanceID: "i-old", SetupComplete: true, Disks: []LaunchDisk{{Key: "vol-0zzz"}}},
			facts:  LaunchFacts{InstanceID: "i-new", Mappings: []string{"/dev/xvdb"}},
			source: SourceIMDS, write: true, keys: []string{"vol-0aaa"},
			states: []string{"ready"},
			ops:    "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
			says:   []string{"launch record is for instance i-old, this is i-new"},
		},
		{
			name:    "a record without an instance ID, or on a machine that tells none, is kept",
			disks:   []Disk{ours1},
			journal: j1, record: rec(true, "vol-0aaa"),
			facts:  LaunchFacts{InstanceID: "i-new"},
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa"},
			states: []string{"ready"},
			ops:    "write-unit /data1 \nmount /data1 /dev/nvme1n1",
		},
		{
			name:    "no record, the journal names a disk present (set up by an older joiner): adopted, nothing formatted",
			disks:   []Disk{ours1, launch2},
			journal: j1,
			source:  SourceAdopted, write: true, complete: true, keys: []string{"vol-0aaa", "vol-0bbb"},
			states: []string{"ready", "blank"},
			ops:    "write-unit /data1 \nmount /data1 /dev/nvme1n1",
			says:   []string{"format journal names disks of this machine"},
		},
		{
			name:   "no record, a kubelet joined from this root disk: adopted, nothing formatted",
			disks:  []Disk{launch1, csi},
			facts:  LaunchFacts{KubeletJoined: DefaultKubeletCert, Mappings: []string{"xvdb"}},
			source: SourceAdopted, write: true, complete: true, keys: []string{"vol-0aaa"},
			states:  []string{"blank"},
			ignored: []string{"/dev/nvme3n1"},
			says:    []string{"a kubelet joined a cluster from this root disk (" + DefaultKubeletCert + " exists)"},
		},
		{
			name:   "the agent without a record: nothing recorded, nothing formatted",
			disks:  []Disk{launch1},
			agent:  true,
			states: []string{"blank"},
			says:   []string{"no launch record for this instance (joiner bootstrap makes it)", "/dev/nvme1n1 (volume vol-0aaa, serial vol0aaa, mapping /dev/xvdb) is blank; there is no launch record"},
		},
		{
			name:    "the agent after bootstrap, formatOnAgentStart: a blank volume attached later is never formatted",
			disks:   []Disk{ours1, csi},
			journal: j1, record: rec(true, "vol-0aaa"), agent: true,
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa"},
			states:  []string{"ready"},
			ops:     "write-unit /data1 \nmount /data1 /dev/nvme1n1",
			ignored: []string{"/dev/nvme3n1"},
		},
		{
			name:    "a recorded volume that is missing keeps its mount point; the record's order wins",
			disks:   []Disk{ours2},
			journal: j2, record: rec(true, "vol-0aaa", "vol-0bbb"),
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa", "vol-0bbb"},
			states: []string{"missing", "ready"},
			ops:    "write-unit /data2 \nmount /data2 /dev/nvme2n1",
			says:   []string{"launch volume vol-0aaa (recorded as ) not found"},
		},
		{
			name:   "IMDS known but the disk's mapping name is not (no NVMe identify): not recorded",
			disks:  []Disk{nv("nvme1n1", "", "vol0aaa")},
			facts:  imd("xvdb"),
			source: SourceIMDS, write: true,
			ignored: []string{"/dev/nvme1n1"},
			says:    []string{"/dev/nvme1n1 (volume vol-0aaa, serial vol0aaa) is not in the instance's launch block-device mapping [xvdb]"},
		},
		{
			name:   "Xen: no serial, the device path is the identity",
			disks:  []Disk{{Name: "xvdb", Path: "/dev/xvdb", Dev: "202:16", Size: 1 << 30, Kind: KindEBS, MappingName: "/dev/xvdb"}},
			facts:  imd("sdb"),
			source: SourceIMDS, write: true, keys: []string{"/dev/xvdb"},
			states: []string{"ready"},
			ops:    "format /data1 /dev/xvdb\nwrite-unit /data1 \nmount /data1 /dev/xvdb",
		},
		{
			name:    "instance-store disks are formatted after the first setup (a stop blanks them)",
			disks:   []Disk{ours1, store("nvme4n1", "AWS1"), store("nvme5n1", "AWS2")},
			journal: j1, record: rec(true, "vol-0aaa"),
			cfg:    func(c *config.Volumes) { c.InstanceStore.Layout = config.LayoutRAID0 },
			source: SourceFirstBoot, complete: true, keys: []string{"vol-0aaa"},
			states: []string{"ready", "ready"},
			ops: "write-unit /data1 \nmount /data1 /dev/nvme1n1\n" +
				"create-raid0 /mnt/instance-store \nformat /mnt/instance-store /dev/md/joiner-instance-store\n" +
				"write-unit /mnt/instance-store \nmount /mnt/instance-store /dev/md/joiner-instance-store",
		},
		{
			name:  "explicit instance-store devices that are not instance-store disks need the record too",
			disks: []Disk{launch1, csi},
			cfg: func(c *config.Volumes) {
				c.Devices = []string{"/dev/xvdb"}
				c.InstanceStore.Layout = config.LayoutSeparate
				c.InstanceStore.Devices = []string{"/dev/nvme3n1"}
			},
			record: rec(false, "vol-0aaa"),
			source: SourceFirstBoot, keys: []string{"vol-0aaa"},
			states: []string{"ready", "hands-off"},
			ops:    "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
			says:   []string{"/dev/nvme3n1 (volume vol-0ccc, serial vol0ccc, mapping /dev/xvdba) is blank but was not attached by Joiner at launch"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := Inventory{Disks: append(tc.disks, nv("nvme0n1", "/dev/xvda", "vol0root", func(d *Disk) { d.Root = true }))}
			cfg := testCfg(tc.cfg)
			dec := DecideLaunch(LaunchInput{Record: tc.record, Journal: tc.journal, Inventory: inv, Config: cfg, Facts: tc.facts, MayRecord: !tc.agent})
			if (dec.Record == nil) != (tc.source == "" && tc.keys == nil) {
				t.Fatalf("record %+v, want source %q keys %v", dec.Record, tc.source, tc.keys)
			}
			if dec.Record != nil {
				var keys []string
				for _, d := range dec.Record.Disks {
					keys = append(keys, d.Key)
				}
				if dec.Record.Source != tc.source || dec.Record.SetupComplete != tc.complete || !reflect.DeepEqual(keys, tc.keys) {
					t.Errorf("record: source %q complete %v keys %v; want %q %v %v", dec.Record.Source, dec.Record.SetupComplete, keys, tc.source, tc.complete, tc.keys)
				}
			}
			if dec.Write != tc.write {
				t.Errorf("write = %v, want %v", dec.Write, tc.write)
			}
			in := PlanInput{Inventory: inv, Config: cfg, Journal: tc.journal, AllowFormat: true, NewUUID: seqUUID(), Launch: dec.Record}
			p := PlanVolumes(in)
			var states, ignored, said []string
			for _, v := range p.Volumes {
				states = append(states, v.State)
				said = append(said, v.Reason)
			}
			for _, v := range p.Ignored {
				ignored = append(ignored, v.Device)
				said = append(said, v.Reason)
			}
			said = append(said, dec.Notes...)
			if !reflect.DeepEqual(states, tc.states) {
				t.Errorf("states %v, want %v\n%+v", states, tc.states, p.Volumes)
			}
			if got := ops(p); got != tc.ops {
				t.Errorf("actions:\n%s\nwant:\n%s", got, tc.ops)
			}
			if !reflect.DeepEqual(ignored, tc.ignored) {
				t.Errorf("ignored %v, want %v", ignored, tc.ignored)
			}
			all := strings.Join(said, "\n")
			for _, s := range tc.says {
				if !strings.Contains(all, s) {
					t.Errorf("no reason or note says %q:\n%s", s, all)
				}
			}
			for _, a := range p.Actions {
				if a.Op == OpFormat {
					if d, ok := inv.Disk(strings.TrimPrefix(a.Device, "/dev/")); ok && a.Serial != d.Serial {
						t.Errorf("format of %s carries serial %q, disk has %q", a.Device, a.Serial, d.Serial)
					}
				}
			}
			in.NewUUID = seqUUID()
			if again := PlanVolumes(in); !reflect.DeepEqual(again, p) {
				t.Errorf("plan is not deterministic")
			}
		})
	}
}

func TestLaunchRecordFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", LaunchFile)
	if r, err := LoadLaunchRecord(path); r != nil || err != nil {
		t.Fatalf("missing file: %+v, %v; want nil, nil", r, err)
	}
	want := LaunchRecord{Version: LaunchRecordVersion, InstanceID: "i-1", Source: SourceIMDS, SetupComplete: true,
		Disks:      []LaunchDisk{{Key: "vol-0aaa", Serial: "vol0aaa", Mapping: "/dev/xvdb", Device: "/dev/nvme1n1"}},
		RecordedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := SaveLaunchRecord(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLaunchRecord(path)
	if err != nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("state dir holds %v, want only %s (no temp files)", ents, LaunchFile)
	}
	for _, bad := range []struct{ content, says string }{
		{`{"version": 1, "disks": [`, "parsing launch record " + path},
		{`{"version": 7}`, "version 7"},
	} {
		os.WriteFile(path, []byte(bad.content), 0o600)
		if r, err := LoadLaunchRecord(path); r != nil || err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: %+v, %v; want an error saying %q", bad.content, r, err, bad.says)
		}
	}
}

func TestLocalFacts(t *testing.T) {
	sys, cert := t.TempDir(), filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	if f := LocalFacts(sys, cert); !reflect.DeepEqual(f, LaunchFacts{}) {
		t.Errorf("nothing there: %+v", f)
	}
	writeTree(t, sys, map[string]string{"devices/virtual/dmi/id/board_asset_tag": "i-0123456789abcdef0\n"})
	os.WriteFile(cert, nil, 0o600)
	if f := LocalFacts(sys, cert); f.InstanceID != "i-0123456789abcdef0" || f.KubeletJoined != cert || f.Mappings != nil {
		t.Errorf("Nitro, joined: %+v", f)
	}
	writeTree(t, sys, map[string]string{"devices/virtual/dmi/id/board_asset_tag": "Default string\n"})
	if f := LocalFacts(sys, ""); f.InstanceID != "" || f.KubeletJoined != "" {
		t.Errorf("not an instance ID: %+v", f)
	}
}

// fakeMachine is a sysfs and /dev tree with EBS volumes backed by sparse
// files, for Setup without root.
type fakeMachine struct {
	t             *testing.T
	sys, dev      string
	mappings      map[string]string // kernel name -> NVMe identify mapping name
	nextMinor     int
	sizeOfPlugged int64
}

func newFakeMachine(t *testing.T) *fakeMachine {
	m := &fakeMachine{t: t, sys: t.TempDir(), dev: t.TempDir(), mappings: map[string]string{}, sizeOfPlugged: 64 << 20}
	m.plug("nvme0n1", "vol0root", "/dev/xvda") // the root disk, mounted at /
	return m
}

// plug attaches a blank EBS volume.
func (m *fakeMachine) plug(name, serial, mapping string) {
	m.nextMinor++
	writeTree(m.t, m.sys, map[string]string{
		"block/" + name + "/dev": fmt.Sprintf("259:%d\n", m.nextMinor), "block/" + name + "/size": fmt.Sprintf("%d\n", m.sizeOfPlugged/512),
		"block/" + name + "/ro": "0\n", "block/" + name + "/device/model": modelEBS + "\n", "block/" + name + "/device/serial": serial + "\n",
		"class/block/" + name + "/uevent": "",
	})
	f, err := os.Create(filepath.Join(m.dev, name))
	if err != nil {
		m.t.Fatal(err)
	}
	f.Truncate(m.sizeOfPlugged)
	f.Close()
	m.mappings[name] = mapping
}

func (m *fakeMachine) discoverer() *Discoverer {
	return &Discoverer{SysRoot: m.sys, DevRoot: m.dev, SwapsPath: filepath.Join(m.sys, "no-swaps"),
		Mounts: func() ([]*mountinfo.Info, error) {
			return []*mountinfo.Info{{Major: 259, Minor: 1, Mountpoint: "/", Source: "/dev/nvme0n1", FSType: "xfs"}}, nil
		},
		NVMeName: func(p string) (string, error) { return m.mappings[filepath.Base(p)], nil },
	}
}

type okSystemd struct{ started []string }

func (s *okSystemd) Reload(context.Context) error { return nil }
func (s *okSystemd) EnableAndStart(_ context.Context, _, name string) error {
	s.started = append(s.started, name)
	return nil
}
func (s *okSystemd) Start(_ context.Context, name string) error {
	return s.EnableAndStart(context.Background(), "", name)
}

// TestSetupLaunchRecordAcrossBoots runs bootstrap's Setup (default device
// selection: every EBS volume) on a fake machine: the first boot records and
// formats the launch volume; a failed first setup is retried; once it
// succeeded, a blank volume attached later (a CSI volume) is never formatted.
func TestSetupLaunchRecordAcrossBoots(t *testing.T) {
	m := newFakeMachine(t)
	m.plug("nvme1n1", "vol0aaa", "/dev/xvdb")
	root := t.TempDir()
	cfg := config.Config{Volumes: config.Volumes{MountRoot: root, UnitDir: filepath.Join(root, "units"), StateDir: filepath.Join(root, "state"),
		SkipCrossCheck: true}}.WithDefaults().Volumes
	var imdsCalls int
	boot := func(r Runner) (Plan, error) {
		return Setup(context.Background(), Options{Config: cfg, AllowFormat: true, RecordLaunch: true, Runner: r, Systemd: &okSystemd{},
			Discoverer: m.discoverer(), Log: zaptest.NewLogger(t), KubeletCert: noKubelet(t), NewUUID: seqUUID(),
			LaunchMapping: func(context.Context) ([]string, string, error) {
				imdsCalls++
				return nil, "", errors.New("imds unreachable")
			}})
	}
	lpath := LaunchPath(cfg)

	// Boot 1: mkfs fails. The record is written first and stays incomplete.
	failing := &fakeRunner{fail: map[string]error{"mkfs.xfs": errors.New("exit status 1")}}
	if _, err := boot(failing); err == nil {
		t.Fatal("boot 1: want the mkfs error")
	}
	r, err := LoadLaunchRecord(lpath)
	if err != nil || r == nil || r.SetupComplete || r.Source != SourceFirstBoot || len(r.Disks) != 1 || r.Disks[0].Key != "vol-0aaa" || r.Disks[0].Serial != "vol0aaa" || r.RecordedAt.IsZero() {
		t.Fatalf("record after the failed first boot: %+v, %v", r, err)
	}

	// Boot 2: a volume got attached meanwhile; the recorded one is formatted, the other is not.
	m.plug("nvme2n1", "vol0ccc", "/dev/xvdba")
	fr := &fakeRunner{}
	plan, err := boot(fr)
	if err != nil {
		t.Fatalf("boot 2: %v", err)
	}
	if want := "mkfs.xfs -q -m uuid=00000000-0000-4000-8000-000000000001 " + filepath.Join(m.dev, "nvme1n1"); len(fr.cmds) != 1 || fr.cmds[0] != want {
		t.Errorf("boot 2 ran %q, want only %q", fr.cmds, want)
	}
	if len(plan.Ignored) != 1 || !strings.Contains(plan.Ignored[0].Reason, "serial vol0ccc") {
		t.Errorf("boot 2 ignored %+v", plan.Ignored)
	}
	r, _ = LoadLaunchRecord(lpath)
	if r == nil || !r.SetupComplete || r.CompletedAt.IsZero() || len(r.Disks) != 1 {
		t.Fatalf("record after a successful setup: %+v", r)
	}
	if imdsCalls != 1 {
		t.Errorf("the launch mapping was read %d times, want once (only to make the record)", imdsCalls)
	}

	// Boot 3: another blank volume, and the launch volume blank again (say
	// its journal entry was lost): nothing is formatted.
	m.plug("nvme3n1", "vol0ddd", "/dev/xvdc")
	os.Remove(JournalPath(cfg))
	fr = &fakeRunner{}
	plan, err = boot(fr)
	if err != nil {
		t.Fatalf("boot 3: %v", err)
	}
	if len(fr.cmds) != 0 {
		t.Errorf("boot 3 ran %q, want nothing", fr.cmds)
	}
	if len(plan.Volumes) != 1 || plan.Volumes[0].State != StateBlank || len(plan.Ignored) != 2 {
		t.Errorf("boot 3: volumes %+v ignored %+v", plan.Volumes, plan.Ignored)
	}
	after, _ := LoadLaunchRecord(lpath)
	if !reflect.DeepEqual(after, r) {
		t.Errorf("record changed on a later boot:\n%+v\n%+v", r, after)
	}

	// The agent's re-check with formatOnAgentStart formats nothing either.
	cfg.FormatOnAgentStart = true
	fr = &fakeRunner{}
	if _, err := Recheck(context.Background(), Options{Config: cfg, Runner: fr, Systemd: &okSystemd{}, Discoverer: m.discoverer(), KubeletCert: noKubelet(t)}, nil); err != nil {
		t.Fatal(err)
	}
	if len(fr.cmds) != 0 {
		t.Errorf("agent re-check ran %q", fr.cmds)
	}
}

func TestExecutorRefusesWhenTheSerialChanged(t *testing.T) {
	root := t.TempDir()
	cfg := testCfg(func(c *config.Volumes) { c.MountRoot, c.UnitDir = root, filepath.Join(root, "units") })
	inv := Inventory{Disks: []Disk{nv("nvme1n1", "/dev/xvdb", "vol0aaa")}}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: cfg, AllowFormat: true, NewUUID: seqUUID(), Launch: firstBoot(inv, cfg)})
	r := &fakeRunner{}
	ex := &Executor{Runner: r, JournalPath: filepath.Join(root, "j.json"), CheckFS: func(string, string) error { return nil },
		Recheck: func(context.Context, string) (string, error) { return "", nil },
		Serial:  func(string) (string, error) { return "vol0ccc", nil }}
	err := ex.Apply(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), `refusing to format /dev/nvme1n1: it is now the disk with serial "vol0ccc", not the planned serial vol0aaa (vol-0aaa)`) {
		t.Fatalf("err = %v", err)
	}
	if len(r.cmds) != 0 {
		t.Errorf("ran %v", r.cmds)
	}
	if _, err := os.Stat(ex.JournalPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal written: %v", err)
	}
}

func TestDiscovererSerial(t *testing.T) {
	m := newFakeMachine(t)
	m.plug("nvme1n1", "vol0aaa", "/dev/xvdb")
	d := m.discoverer()
	if s, err := d.Serial(filepath.Join(m.dev, "nvme1n1")); err != nil || s != "vol0aaa" {
		t.Errorf("Serial = %q, %v", s, err)
	}
	d.Identify = func(disk *Disk) {
		if disk.Name == "nvme1n1" {
			disk.Serial, disk.VolumeID = "vol0zzz", "vol-0zzz"
		}
	}
	if s, err := d.Serial(filepath.Join(m.dev, "nvme1n1")); err != nil || s != "vol0zzz" {
		t.Errorf("Serial with Identify = %q, %v", s, err)
	}
	inv, err := d.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if disk, _ := inv.Disk("nvme1n1"); disk.Serial != "vol0zzz" || disk.VolumeID != "vol-0zzz" || disk.MappingName != "/dev/xvdb" {
		t.Errorf("Discover with Identify: %+v", disk)
	}
	if _, err := d.Serial(filepath.Join(m.dev, "nope")); err == nil {
		t.Error("Serial of a missing device: no error")
	}
}
