package volumes

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/agent/config"
)

func testCfg(mod func(*config.Volumes)) config.Volumes {
	c := config.Config{}.WithDefaults().Volumes
	if mod != nil {
		mod(&c)
	}
	return c
}

func seqUUID() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
}

func ebs(name, mapping string, mod ...func(*Disk)) Disk {
	d := Disk{Name: name, Path: "/dev/" + name, Dev: "259:" + name[4:5], Size: 1 << 30, Kind: KindEBS, MappingName: mapping, Model: modelEBS}
	for _, m := range mod {
		m(&d)
	}
	return d
}

func ops(p Plan) string {
	var s []string
	for _, a := range p.Actions {
		s = append(s, fmt.Sprintf("%s %s %s", a.Op, a.Group, a.Device))
	}
	return strings.Join(s, "\n")
}

func TestPlanDataVolumes(t *testing.T) {
	xfsSig := func(uuid string) func(*Disk) {
		return func(d *Disk) {
			d.Probe = ProbeResult{Signatures: []Signature{{Type: "xfs", Usage: UsageFilesystem, UUID: uuid}}, NonZero: true}
		}
	}
	for _, tc := range []struct {
		name     string
		disks    []Disk
		mounts   []Mount
		journal  Journal
		cfg      func(*config.Volumes)
		noFormat bool
		states   []string // per volume, in order
		ops      string
	}{
		{
			name:   "blank EBS volumes in mapping-name order, root skipped",
			disks:  []Disk{ebs("nvme3n1", "/dev/xvdc"), ebs("nvme0n1", "/dev/xvda", func(d *Disk) { d.Root = true }), ebs("nvme1n1", "/dev/sdb"), ebs("nvme2n1", "")},
			states: []string{"ready", "ready", "ready"},
			ops: "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1\n" +
				"format /data2 /dev/nvme3n1\nwrite-unit /data2 \nmount /data2 /dev/nvme3n1\n" +
				"format /data3 /dev/nvme2n1\nwrite-unit /data3 \nmount /data3 /dev/nvme2n1",
		},
		{
			name: "every kind of in-use or non-blank disk is hands off",
			disks: []Disk{
				ebs("nvme1n1", "/dev/xvdb", func(d *Disk) { d.Partitions = []string{"nvme1n1p1"} }),
				ebs("nvme2n1", "/dev/xvdc", func(d *Disk) { d.Holders = []string{"md0"} }),
				ebs("nvme3n1", "/dev/xvdd", func(d *Disk) { d.MountPoints = []string{"/srv"} }),
				ebs("nvme4n1", "/dev/xvde", func(d *Disk) { d.Swap = true }),
				ebs("nvme5n1", "/dev/xvdf", func(d *Disk) { d.ReadOnly = true }),
				ebs("nvme6n1", "/dev/xvdg", func(d *Disk) { d.External = []string{"blkid: TYPE=zfs_member"} }),
				ebs("nvme7n1", "/dev/xvdh", func(d *Disk) { d.ProbeErr = "read error" }),
				ebs("nvme8n1", "/dev/xvdi", func(d *Disk) { d.Probe.NonZero = true }),
				ebs("nvme9n1", "/dev/xvdj", xfsSig("11111111-0000-4000-8000-000000000000")),
			},
			states: []string{"hands-off", "hands-off", "hands-off", "hands-off", "hands-off", "hands-off", "hands-off", "hands-off", "hands-off"},
		},
		{
			name:   "non-zero data allowed by config",
			disks:  []Disk{ebs("nvme1n1", "/dev/xvdb", func(d *Disk) { d.Probe.NonZero = true })},
			cfg:    func(c *config.Volumes) { c.AllowNonZero = true },
			states: []string{"ready"},
			ops:    "format /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
		},
		{
			name:     "formatting off: blank is reported, not formatted",
			disks:    []Disk{ebs("nvme1n1", "/dev/xvdb")},
			noFormat: true,
			states:   []string{"blank"},
		},
		{
			name:    "our filesystem from the journal is mounted, not formatted",
			disks:   []Disk{ebs("nvme1n1", "/dev/xvdb", xfsSig("u1"), func(d *Disk) { d.VolumeID = "vol-1" })},
			journal: Journal{Entries: []JournalEntry{{Key: "vol-1", FSType: "xfs", UUID: "u1", Phase: PhaseFormatted}}},
			states:  []string{"ready"},
			ops:     "write-unit /data1 \nmount /data1 /dev/nvme1n1",
		},
		{
			name:    "an interrupted format is verified, then mounted",
			disks:   []Disk{ebs("nvme1n1", "/dev/xvdb", xfsSig("u1"), func(d *Disk) { d.VolumeID = "vol-1" })},
			journal: Journal{Entries: []JournalEntry{{Key: "vol-1", FSType: "xfs", UUID: "u1", Phase: PhaseFormatting}}},
			states:  []string{"ready"},
			ops:     "verify-fs /data1 /dev/nvme1n1\nwrite-unit /data1 \nmount /data1 /dev/nvme1n1",
		},
		{
			name:    "a journal entry with another UUID does not make a filesystem ours",
			disks:   []Disk{ebs("nvme1n1", "/dev/xvdb", xfsSig("u2"), func(d *Disk) { d.VolumeID = "vol-1" })},
			journal: Journal{Entries: []JournalEntry{{Key: "vol-1", FSType: "xfs", UUID: "u1", Phase: PhaseFormatted}}},
			states:  []string{"hands-off"},
		},
		{
			name:   "already mounted at its target: unit kept, nothing formatted",
			disks:  []Disk{ebs("nvme1n1", "/dev/xvdb", xfsSig("u1"), func(d *Disk) { d.MountPoints = []string{"/data1"} })},
			mounts: []Mount{{Dev: "259:1", Source: "/dev/nvme1n1", Target: "/data1", FSType: "xfs"}},
			states: []string{"ready"},
			ops:    "write-unit /data1 \nmount /data1 /dev/nvme1n1",
		},
		{
			name:   "target taken by another device",
			disks:  []Disk{ebs("nvme1n1", "/dev/xvdb")},
			mounts: []Mount{{Dev: "8:1", Source: "/dev/sda1", Target: "/data1", FSType: "ext4"}},
			states: []string{"hands-off"},
		},
		{
			name:   "an exact path wins over a mapping name",
			disks:  []Disk{ebs("nvme1n1", "/dev/sdb"), {Name: "sdb", Path: "/dev/sdb", Dev: "8:16", Size: 1 << 30, Kind: KindOther}},
			cfg:    func(c *config.Volumes) { c.Devices = []string{"/dev/sdb"} },
			states: []string{"ready"},
			ops:    "format /data1 /dev/sdb\nwrite-unit /data1 \nmount /data1 /dev/sdb",
		},
		{
			name:   "explicit list by mapping name; a missing entry keeps its slot",
			disks:  []Disk{ebs("nvme1n1", "/dev/sdf"), ebs("nvme2n1", "/dev/sdg")},
			cfg:    func(c *config.Volumes) { c.Devices = []string{"/dev/xvdg", "/dev/xvdz", "/dev/sdf"} },
			states: []string{"ready", "missing", "ready"},
			ops: "format /data1 /dev/nvme2n1\nwrite-unit /data1 \nmount /data1 /dev/nvme2n1\n" +
				"format /data3 /dev/nvme1n1\nwrite-unit /data3 \nmount /data3 /dev/nvme1n1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := PlanInput{Inventory: Inventory{Disks: tc.disks, Mounts: tc.mounts}, Config: testCfg(tc.cfg), Journal: tc.journal, AllowFormat: !tc.noFormat, NewUUID: seqUUID()}
			in.Launch = DecideLaunch(LaunchInput{Journal: in.Journal, Inventory: in.Inventory, Config: in.Config, MayRecord: true}).Record
			p := PlanVolumes(in)
			var states []string
			for _, v := range p.Volumes {
				states = append(states, v.State)
			}
			if !reflect.DeepEqual(states, tc.states) {
				t.Errorf("states %v, want %v\n%+v", states, tc.states, p.Volumes)
			}
			if got := ops(p); got != tc.ops {
				t.Errorf("actions:\n%s\nwant:\n%s", got, tc.ops)
			}
			in.NewUUID = seqUUID()
			if again := PlanVolumes(in); !reflect.DeepEqual(again, p) {
				t.Errorf("plan is not deterministic")
			}
		})
	}
}

func TestPlanInstanceStore(t *testing.T) {
	is := func(name, serial string, mod ...func(*Disk)) Disk {
		d := Disk{Name: name, Path: "/dev/" + name, Dev: "259:" + name[4:5], Size: 1 << 30, Kind: KindInstanceStore, Serial: serial, Model: modelInstanceStore}
		for _, m := range mod {
			m(&d)
		}
		return d
	}
	raid := func(c *config.Volumes) {
		c.InstanceStore.Layout = config.LayoutRAID0
		c.InstanceStore.BindDirs = []string{"/var/lib/kubelet"}
	}
	for _, tc := range []struct {
		name  string
		disks []Disk
		cfg   func(*config.Volumes)
		ops   string
	}{
		{"raid0 over blank disks, with a bind mount", []Disk{is("nvme2n1", "AWS2"), is("nvme1n1", "AWS1")}, raid,
			"create-raid0 /mnt/instance-store \nformat /mnt/instance-store /dev/md/joiner-instance-store\n" +
				"write-unit /mnt/instance-store \nmount /mnt/instance-store /dev/md/joiner-instance-store\n" +
				"write-unit /var/lib/kubelet \nmount /var/lib/kubelet /mnt/instance-store/var_lib_kubelet"},
		{"raid0 refused when a member holds an md superblock", []Disk{is("nvme2n1", "AWS2"), is("nvme1n1", "AWS1", func(d *Disk) {
			d.Probe.Signatures = []Signature{{Type: "linux_raid_member", Usage: UsageRAID}}
		})}, func(c *config.Volumes) { c.InstanceStore.Layout = config.LayoutRAID0 }, ""},
		{"an assembled array is reused", []Disk{is("nvme2n1", "AWS2", func(d *Disk) { d.Holders = []string{"md127"} }), is("nvme1n1", "AWS1", func(d *Disk) { d.Holders = []string{"md127"} }),
			{Name: "md127", Path: "/dev/md127", Dev: "9:127", Kind: KindRAID, Size: 2 << 30, Slaves: []string{"nvme1n1", "nvme2n1"}, Aliases: []string{"/dev/md/joiner-instance-store"}}},
			func(c *config.Volumes) { c.InstanceStore.Layout = config.LayoutRAID0 },
			"format /mnt/instance-store /dev/md127\nwrite-unit /mnt/instance-store \nmount /mnt/instance-store /dev/md127"},
		{"our array, not assembled: assembled, never re-created", []Disk{
			is("nvme2n1", "AWS2", func(d *Disk) { d.Probe.Signatures = []Signature{{Type: "linux_raid_member", Usage: UsageRAID}} }),
			is("nvme1n1", "AWS1", func(d *Disk) { d.Probe.Signatures = []Signature{{Type: "linux_raid_member", Usage: UsageRAID}} }),
		}, func(c *config.Volumes) { c.InstanceStore.Layout = config.LayoutRAID0 },
			"assemble-raid /mnt/instance-store \nwrite-unit /mnt/instance-store \nmount /mnt/instance-store /dev/md/joiner-instance-store"},
		{"separate mounts", []Disk{is("nvme2n1", "AWS2"), is("nvme1n1", "AWS1")}, func(c *config.Volumes) { c.InstanceStore.Layout = config.LayoutSeparate },
			"format /mnt/instance-store0 /dev/nvme1n1\nwrite-unit /mnt/instance-store0 \nmount /mnt/instance-store0 /dev/nvme1n1\n" +
				"format /mnt/instance-store1 /dev/nvme2n1\nwrite-unit /mnt/instance-store1 \nmount /mnt/instance-store1 /dev/nvme2n1"},
		{"layout none leaves them alone", []Disk{is("nvme2n1", "AWS2")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := Journal{Entries: []JournalEntry{{Key: "md:joiner-instance-store", FSType: "xfs", UUID: "u1", Phase: PhaseFormatted}}}
			p := PlanVolumes(PlanInput{Inventory: Inventory{Disks: tc.disks}, Config: testCfg(tc.cfg), Journal: j, AllowFormat: true, NewUUID: seqUUID()})
			if got := ops(p); got != tc.ops {
				t.Errorf("actions:\n%s\nwant:\n%s\nvolumes %+v", got, tc.ops, p.Volumes)
			}
			// Every mount, bind mounts included, is nofail: a volume that
			// does not come back must not stop the boot.
			for _, a := range p.Actions {
				if a.Unit != nil && !slices.Contains(strings.Split(a.Unit.Options, ","), "nofail") {
					t.Errorf("%s: options %q lack nofail", a.Unit.Where, a.Unit.Options)
				}
			}
		})
	}
}

func TestUnitContent(t *testing.T) {
	inv := Inventory{Disks: []Disk{ebs("nvme1n1", "/dev/xvdb")}}
	p := PlanVolumes(PlanInput{Inventory: inv, Config: testCfg(nil), AllowFormat: true, NewUUID: seqUUID(), Launch: firstBoot(inv, testCfg(nil))})
	u := p.Actions[1].Unit
	want := `# Written by joiner; re-generated on every run, do not edit.
[Unit]
Description=Joiner data volume /data1
Documentation=https://github.com/joiner-dev/joiner
Before=containerd.service kubelet.service

[Mount]
What=/dev/disk/by-uuid/00000000-0000-4000-8000-000000000001
Where=/data1
Type=xfs
Options=defaults,noatime,nofail,x-systemd.device-timeout=10s

[Install]
WantedBy=multi-user.target
`
	if u.Name != "data1.mount" || u.Path != "/etc/systemd/system/data1.mount" || string(u.Content()) != want {
		t.Errorf("unit %s at %s:\n%s", u.Name, u.Path, u.Content())
	}
}
