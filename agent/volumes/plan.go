package volumes

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/joiner-dev/joiner/agent/config"
)

// Op is what an Action does.
type Op string

// Operations, in the order the planner emits them for one volume.
const (
	OpCreateRAID0 Op = "create-raid0"  // mdadm --create level 0 over blank members
	OpAssemble    Op = "assemble-raid" // mdadm --assemble an array joiner created before
	OpFormat      Op = "format"        // mkfs with a planner-chosen UUID
	OpVerifyFS    Op = "verify-fs"     // a format was interrupted: check the new filesystem, then adopt it
	OpWriteUnit   Op = "write-unit"    // write a .mount unit (atomic; no-op when unchanged)
	OpWriteFstab  Op = "write-fstab"   // add or update the mount's line in joiner's fstab block
	OpMount       Op = "mount"         // start the unit (systemd) or mount directly; no-op when mounted
)

// Action is one step of a plan. Actions of one Group (a mount point) run in
// order; a failure skips the rest of its group, not other groups.
type Action struct {
	Op      Op       `json:"op"`
	Group   string   `json:"group"`             // the mount point this serves
	Device  string   `json:"device,omitempty"`  // block device path
	Key     string   `json:"key,omitempty"`     // journal key of the device
	FSType  string   `json:"fsType,omitempty"`  //
	UUID    string   `json:"uuid,omitempty"`    // filesystem UUID (new or existing)
	Serial  string   `json:"serial,omitempty"`  // format: the disk's serial, checked again right before mkfs
	Members []string `json:"members,omitempty"` // RAID members
	Name    string   `json:"name,omitempty"`    // RAID name
	Unit    *Unit    `json:"unit,omitempty"`    //
	Reason  string   `json:"reason,omitempty"`  //
}

// String is the dry-run line for the action.
func (a Action) String() string {
	switch a.Op {
	case OpCreateRAID0:
		return fmt.Sprintf("create RAID0 /dev/md/%s over %s (%s)", a.Name, strings.Join(a.Members, " "), a.Reason)
	case OpAssemble:
		return fmt.Sprintf("assemble /dev/md/%s from %s (%s)", a.Name, strings.Join(a.Members, " "), a.Reason)
	case OpFormat:
		return fmt.Sprintf("format %s as %s with UUID %s (%s)", a.Device, a.FSType, a.UUID, a.Reason)
	case OpVerifyFS:
		return fmt.Sprintf("verify %s filesystem %s on %s (%s)", a.FSType, a.UUID, a.Device, a.Reason)
	case OpWriteUnit:
		return fmt.Sprintf("write unit %s (%s on %s)", a.Unit.Path, a.Unit.What, a.Unit.Where)
	case OpWriteFstab:
		return fmt.Sprintf("write %s line %q", a.Unit.Path, a.Unit.FstabLine())
	case OpMount:
		return fmt.Sprintf("mount %s on %s (unit %s)", a.Device, a.Unit.Where, a.Unit.Name)
	}
	return string(a.Op)
}

// Unit is a systemd .mount unit.
type Unit struct {
	Name    string `json:"name"` // escaped from Where, e.g. data1.mount
	Path    string `json:"path"` // UnitDir/Name
	What    string `json:"what"` // /dev/disk/by-uuid/<uuid>, or the bind source
	Where   string `json:"where"`
	Type    string `json:"type"`
	Options string `json:"options"`
	After   string `json:"after,omitempty"` // for bind mounts: the mount point the source lives on
	// Fstab: persisted as an fstab line (Path is the fstab); systemd's
	// fstab generator makes the unit, which is started, not enabled.
	Fstab bool `json:"fstab,omitempty"`
}

// FstabLine renders the unit as an fstab line (What as UUID=... for devices).
func (u Unit) FstabLine() string {
	what, opts, pass := u.What, u.Options, "0"
	if strings.HasPrefix(what, "/dev/disk/by-uuid/") {
		what = "UUID=" + strings.TrimPrefix(what, "/dev/disk/by-uuid/")
	}
	if u.After != "" {
		opts += ",x-systemd.requires-mounts-for=" + u.After
	}
	if u.Type == "ext4" {
		pass = "2"
	}
	return fmt.Sprintf("%s %s %s %s 0 %s", what, u.Where, u.Type, opts, pass)
}

// Content renders the unit file.
func (u Unit) Content() []byte {
	var b strings.Builder
	b.WriteString("# Written by joiner; re-generated on every run, do not edit.\n[Unit]\n")
	fmt.Fprintf(&b, "Description=Joiner data volume %s\n", u.Where)
	b.WriteString("Documentation=https://github.com/joiner-dev/joiner\n")
	b.WriteString("Before=containerd.service kubelet.service\n")
	if u.After != "" {
		fmt.Fprintf(&b, "RequiresMountsFor=%s\n", u.After)
	}
	fmt.Fprintf(&b, "\n[Mount]\nWhat=%s\nWhere=%s\nType=%s\nOptions=%s\n", u.What, u.Where, u.Type, u.Options)
	b.WriteString("\n[Install]\nWantedBy=multi-user.target\n")
	return []byte(b.String())
}

// Volume states reported per mount point.
const (
	StateReady    = "ready"     // mounted, or will be by this plan
	StateBlank    = "blank"     // blank but formatting is not allowed now
	StateHandsOff = "hands-off" // holds data or is in use: never touched
	StateMissing  = "missing"   // a listed device was not found
)

// VolumeStatus is the planner's verdict for one mount point.
type VolumeStatus struct {
	Target string `json:"target"`
	Device string `json:"device,omitempty"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// Plan is the planner's output.
type Plan struct {
	Actions []Action       `json:"actions"`
	Volumes []VolumeStatus `json:"volumes"`
	// Ignored are EBS volumes that are not Joiner's (not in the launch
	// record: CSI volumes, volumes attached by hand): no mount point, never
	// touched. Target is empty.
	Ignored []VolumeStatus `json:"ignored,omitempty"`
	// Notes are what Setup noticed about the launch record.
	Notes []string `json:"notes,omitempty"`
}

// PlanInput is everything the planner looks at. It is pure data.
type PlanInput struct {
	Inventory   Inventory
	Config      config.Volumes // with defaults applied
	Journal     Journal
	AllowFormat bool          // bootstrap: true; agent start: Config.FormatOnAgentStart
	NewUUID     func() string // source of UUIDs for new filesystems
	// Launch is the instance's launch record (DecideLaunch). Only disks it
	// lists are formatted, and only while its SetupComplete is false;
	// instance-store disks are exempt. nil: no disk but instance-store
	// disks is formatted. With no explicit Devices, data volumes are the
	// record's, in its order.
	Launch *LaunchRecord
}

// PlanVolumes decides, without side effects, what to do with every data and
// instance-store disk. A disk is formatted only when it and every cross-check
// saw no signature, it is unused (not root, mounted, partitioned, held, swap
// or read-only), unless AllowNonZero its head and tail read as zeros, and it
// is an instance-store disk or one the launch record lists while the first
// setup has not completed.
func PlanVolumes(in PlanInput) Plan {
	p := &planner{in: in, cfg: in.Config}
	p.dataVolumes()
	p.instanceStore()
	return p.plan
}

type planner struct {
	in   PlanInput
	cfg  config.Volumes
	plan Plan
	used map[string]bool // kernel names placed already
}

func (p *planner) status(target, dev, state, reason string) {
	p.plan.Volumes = append(p.plan.Volumes, VolumeStatus{Target: target, Device: dev, State: state, Reason: reason})
}

// find matches a device spec to a disk: an exact path or link first, then a
// block-device-mapping name (/dev/xvdb matches a disk mapped as /dev/sdb).
// A mapping name that fits more than one disk matches none.
func (p *planner) find(spec string) (Disk, bool) {
	for _, d := range p.in.Inventory.Disks {
		if d.Path == spec {
			return d, true
		}
		for _, a := range d.Aliases {
			if a == spec {
				return d, true
			}
		}
	}
	var found []Disk
	for _, d := range p.in.Inventory.Disks {
		if d.MappingName != "" && strings.HasPrefix(spec, "/dev/") && mappingKey(d.MappingName) == mappingKey(spec) {
			found = append(found, d)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return Disk{}, false
}

func (p *planner) mark(name string) {
	if p.used == nil {
		p.used = map[string]bool{}
	}
	p.used[name] = true
}

func (p *planner) dataVolumes() {
	type slot struct {
		spec string
		disk Disk
		ok   bool
	}
	var slots []slot
	rec := p.in.Launch
	switch {
	case len(p.cfg.Devices) > 0:
		for _, spec := range p.cfg.Devices {
			d, ok := p.find(spec)
			slots = append(slots, slot{spec, d, ok})
		}
	case rec != nil:
		// The record's data volumes keep their mount points, present or
		// not; any other EBS volume is not Joiner's.
		for _, ld := range rec.Disks {
			if ld.InstanceStore {
				continue
			}
			d, ok := p.byKey(ld.Key)
			spec := fmt.Sprintf("launch volume %s (%s, recorded as %s)", ld.Key, ld.Mapping, ld.Device)
			if ld.Mapping == "" {
				spec = fmt.Sprintf("launch volume %s (recorded as %s)", ld.Key, ld.Device)
			}
			slots = append(slots, slot{spec, d, ok})
		}
		for _, d := range defaultDataDisks(p.in.Inventory) {
			if !rec.Has(diskKey(d)) {
				p.plan.Ignored = append(p.plan.Ignored, VolumeStatus{Device: d.Path, State: StateHandsOff,
					Reason: ident(d) + " was not attached by Joiner at launch of this instance (not in the launch record): left alone"})
			}
		}
	default:
		for _, d := range defaultDataDisks(p.in.Inventory) {
			slots = append(slots, slot{d.Path, d, true})
		}
	}
	for i, s := range slots {
		target := path.Join("/", p.cfg.MountRoot, fmt.Sprintf("%s%d", p.cfg.MountPrefix, i+1))
		if !s.ok {
			p.status(target, s.spec, StateMissing, fmt.Sprintf("%s not found", s.spec))
			continue
		}
		if p.used[s.disk.Name] {
			p.status(target, s.disk.Path, StateHandsOff, fmt.Sprintf("%s is listed twice", s.disk.Path))
			continue
		}
		p.mark(s.disk.Name)
		p.volume(s.disk, []Disk{s.disk}, target, "data volume #"+fmt.Sprint(i+1))
	}
}

// defaultDataDisks are the non-root EBS volumes in mapping-name order (no
// mapping name last).
func defaultDataDisks(inv Inventory) []Disk {
	var ebs []Disk
	for _, d := range inv.Disks {
		if d.Kind == KindEBS && !d.Root {
			ebs = append(ebs, d)
		}
	}
	sort.SliceStable(ebs, func(i, j int) bool {
		a, b := ebs[i], ebs[j]
		if (a.MappingName == "") != (b.MappingName == "") {
			return a.MappingName != ""
		}
		if a.MappingName != b.MappingName {
			return mappingKey(a.MappingName) < mappingKey(b.MappingName)
		}
		return a.Name < b.Name
	})
	return ebs
}

// byKey finds the disk whose identity (diskKey) is key.
func (p *planner) byKey(key string) (Disk, bool) {
	for _, d := range p.in.Inventory.Disks {
		if diskKey(d) == key {
			return d, true
		}
	}
	return Disk{}, false
}

// mayFormat says, as a state and a reason naming each disk's path and
// serial, why the disks that make up a volume must not be formatted because
// of who they are, or "" when they may be. Instance-store disks may always
// be (EC2 attaches them with the instance; a stop blanks them; no CSI
// driver attaches one); any other disk only when the launch record lists it
// and the first setup has not completed.
func (p *planner) mayFormat(ids []Disk) (state, reason string) {
	rec := p.in.Launch
	for _, d := range ids {
		switch {
		case d.Kind == KindInstanceStore:
		case rec == nil:
			return StateBlank, fmt.Sprintf("%s is blank; there is no launch record for this instance (joiner bootstrap makes it): not formatting", ident(d))
		case !rec.Has(diskKey(d)):
			return StateHandsOff, fmt.Sprintf("%s is blank but was not attached by Joiner at launch of this instance (not in the launch record): never formatted", ident(d))
		case rec.SetupComplete:
			return StateBlank, fmt.Sprintf("%s is blank; the first setup of this instance has completed and joiner formats only before it: not formatting", ident(d))
		}
	}
	return "", ""
}

func (p *planner) instanceStore() {
	is := p.cfg.InstanceStore
	if is.Layout == config.LayoutNone {
		return
	}
	var disks []Disk
	if len(is.Devices) > 0 {
		for _, spec := range is.Devices {
			d, ok := p.find(spec)
			if !ok {
				p.status(is.MountPath, spec, StateMissing, fmt.Sprintf("instance-store device %s not found", spec))
				return
			}
			disks = append(disks, d)
		}
	} else {
		for _, d := range p.in.Inventory.Disks {
			if d.Kind == KindInstanceStore && !p.used[d.Name] {
				disks = append(disks, d)
			}
		}
		sort.Slice(disks, func(i, j int) bool {
			if disks[i].Serial != disks[j].Serial {
				return disks[i].Serial < disks[j].Serial
			}
			return disks[i].Name < disks[j].Name
		})
	}
	if len(disks) == 0 {
		return
	}
	for _, d := range disks {
		p.mark(d.Name)
	}
	root := func(s string) string { return path.Join("/", p.cfg.MountRoot, s) }
	if is.Layout == config.LayoutSeparate || len(disks) == 1 {
		for i, d := range disks {
			target := root(fmt.Sprintf("%s%d", is.MountPath, i))
			if len(disks) == 1 && is.Layout == config.LayoutRAID0 {
				target = root(is.MountPath)
			}
			p.volume(d, []Disk{d}, target, "instance-store disk")
		}
		p.binds(root(is.MountPath))
		return
	}
	p.raid0(disks, root(is.MountPath))
	p.binds(root(is.MountPath))
}

func (p *planner) raid0(members []Disk, target string) {
	name := p.cfg.InstanceStore.RAIDName
	names := map[string]bool{}
	var paths []string
	for _, m := range members {
		names[m.Name] = true
		paths = append(paths, m.Path)
	}
	// An assembled array over exactly these members: use it.
	for _, d := range p.in.Inventory.Disks {
		if d.Kind != KindRAID || len(d.Slaves) != len(members) {
			continue
		}
		same := true
		for _, s := range d.Slaves {
			same = same && names[s]
		}
		if same {
			p.volume(d, members, target, "instance-store RAID0 array")
			return
		}
	}
	// Our own array, not assembled (a reboot without udev assembly): assemble
	// it, never re-create it. Only when the journal says we made it, every
	// member carries nothing but an md superblock, and none is in use.
	if j, ok := p.in.Journal.Get("md:" + name); ok && j.Phase == PhaseFormatted && allRAIDMembers(members) {
		dev := "/dev/md/" + name
		p.add(Action{Op: OpAssemble, Group: target, Name: name, Members: paths, Reason: "members of the array joiner created"})
		p.mount(dev, target, j.FSType, j.UUID)
		p.status(target, dev, StateReady, fmt.Sprintf("RAID0 array to be assembled; %s filesystem %s made by joiner", j.FSType, j.UUID))
		return
	}
	for _, m := range members {
		if why := notBlank(m, p.cfg.AllowNonZero); why != "" {
			reason := fmt.Sprintf("RAID0 member %s %s: not creating the array", m.Path, why)
			for _, s := range m.Probe.Signatures {
				if s.Type == "linux_raid_member" {
					reason += " (an md member that is not assembled: run `mdadm --assemble --scan`)"
					break
				}
			}
			p.status(target, strings.Join(paths, ","), StateHandsOff, reason)
			return
		}
	}
	if state, why := p.mayFormat(members); state != "" {
		p.status(target, strings.Join(paths, ","), state, why)
		return
	}
	if !p.in.AllowFormat {
		p.status(target, strings.Join(paths, ","), StateBlank, "blank instance-store disks; formatting is off now")
		return
	}
	dev := "/dev/md/" + name
	uuid := p.in.NewUUID()
	p.add(Action{Op: OpCreateRAID0, Group: target, Name: name, Members: paths, Reason: fmt.Sprintf("%d blank instance-store disks", len(members))})
	p.add(Action{Op: OpFormat, Group: target, Device: dev, Key: "md:" + name, FSType: p.cfg.FSType, UUID: uuid, Reason: "new RAID0 array"})
	p.mount(dev, target, p.cfg.FSType, uuid)
	p.status(target, dev, StateReady, "RAID0 array to be created and formatted")
}

// binds adds the bind mounts of BindDirs from under src.
func (p *planner) binds(src string) {
	if len(p.cfg.InstanceStore.BindDirs) == 0 {
		return
	}
	for _, dir := range p.cfg.InstanceStore.BindDirs {
		where := path.Join("/", p.cfg.MountRoot, dir)
		from := path.Join(src, strings.ReplaceAll(strings.Trim(path.Clean(dir), "/"), "/", "_"))
		// nofail, as the data mounts: an instance store that comes back
		// blank (a stop and start) must not stop the boot at local-fs.target.
		u := p.unit(from, where, "none", "bind,nofail")
		u.After = src
		p.persist(where, &u)
		p.add(Action{Op: OpMount, Group: where, Device: from, Unit: &u, Reason: "bind mount"})
		p.status(where, from, StateReady, "bind mount from instance store")
	}
}

func (p *planner) add(a Action) { p.plan.Actions = append(p.plan.Actions, a) }

func (p *planner) unit(what, where, fstype, options string) Unit {
	name := unit.UnitNamePathEscape(where) + ".mount"
	return Unit{Name: name, Path: path.Join(p.cfg.UnitDir, name), What: what, Where: where, Type: fstype, Options: options}
}

func (p *planner) mount(dev, target, fstype, uuid string) {
	opts := append(append([]string{}, p.cfg.MountOptions...), "nofail", "x-systemd.device-timeout="+p.cfg.DeviceTimeout)
	u := p.unit("/dev/disk/by-uuid/"+uuid, target, fstype, strings.Join(opts, ","))
	p.persist(target, &u)
	p.add(Action{Op: OpMount, Group: target, Device: dev, FSType: fstype, UUID: uuid, Unit: &u})
}

// persist adds the action that makes u survive a reboot: a unit file, or a
// line in joiner's block of the fstab.
func (p *planner) persist(group string, u *Unit) {
	if p.cfg.Persist == config.PersistFstab {
		u.Fstab, u.Path = true, p.cfg.FstabPath
		p.add(Action{Op: OpWriteFstab, Group: group, Unit: u})
		return
	}
	p.add(Action{Op: OpWriteUnit, Group: group, Unit: u})
}

// diskKey is the journal key: the EBS volume ID or NVMe serial when known
// (stable across reboots and renames), else the device path.
func diskKey(d Disk) string {
	switch {
	case d.Kind == KindRAID:
		for _, a := range d.Aliases {
			if strings.HasPrefix(a, "/dev/md/") {
				return "md:" + path.Base(a)
			}
		}
	case d.VolumeID != "":
		return d.VolumeID
	case d.Serial != "":
		return "serial:" + d.Serial
	}
	return d.Path
}

// inUse says why a disk must not be touched at all, or "".
func inUse(d Disk) string {
	switch {
	case d.Root:
		return "is the root disk"
	case len(d.Partitions) > 0:
		return fmt.Sprintf("has partitions %s", strings.Join(d.Partitions, ","))
	case len(d.Holders) > 0:
		return fmt.Sprintf("is held by %s", strings.Join(d.Holders, ","))
	case d.Swap:
		return "is in use as swap"
	case d.ReadOnly:
		return "is read-only"
	}
	return ""
}

// notBlank says why a disk must not be formatted, or "" when it may be.
func notBlank(d Disk, allowNonZero bool) string {
	if why := inUse(d); why != "" {
		return why
	}
	if len(d.MountPoints) > 0 {
		return "is mounted at " + strings.Join(d.MountPoints, ",")
	}
	if d.ProbeErr != "" {
		return "could not be probed (" + d.ProbeErr + ")"
	}
	if len(d.Probe.Signatures) > 0 {
		return "holds " + describe(d.Probe.Signatures)
	}
	if len(d.External) > 0 {
		return "has signatures according to " + strings.Join(d.External, "; ")
	}
	if d.Probe.NonZero && !allowNonZero {
		return "has no known signature but non-zero data in its first or last MiB"
	}
	return ""
}

func describe(sigs []Signature) string {
	var parts []string
	for _, s := range sigs {
		parts = append(parts, fmt.Sprintf("%s (%s at %d)", s.Type, s.Usage, s.Offset))
	}
	return strings.Join(parts, ", ")
}

// volume plans one disk (or md array) onto one mount point. ids are the
// disks whose identity decides whether it may be formatted: d itself, or an
// array's members.
func (p *planner) volume(d Disk, ids []Disk, target, what string) {
	key := diskKey(d)
	j, journaled := p.in.Journal.Get(key)
	fs, hasFS := d.Probe.Filesystem()
	ours := journaled && hasFS && j.UUID != "" && fs.UUID == j.UUID && onlyFilesystems(d.Probe.Signatures) && d.ProbeErr == ""

	if m, ok := p.in.Inventory.MountAt(target); ok {
		if m.Dev != d.Dev {
			p.status(target, d.Path, StateHandsOff, fmt.Sprintf("%s is already a mount of %s", target, m.Source))
			return
		}
		if !hasFS || fs.UUID == "" {
			p.status(target, d.Path, StateReady, "already mounted here (filesystem UUID unknown: unit not written)")
			return
		}
		p.mount(d.Path, target, m.FSType, fs.UUID)
		p.status(target, d.Path, StateReady, "already mounted")
		return
	}
	if why := inUse(d); why != "" {
		p.status(target, d.Path, StateHandsOff, d.Path+" "+why)
		return
	}
	if len(d.MountPoints) > 0 {
		p.status(target, d.Path, StateHandsOff, fmt.Sprintf("%s is mounted elsewhere (%s)", d.Path, strings.Join(d.MountPoints, ",")))
		return
	}
	if ours {
		if j.Phase != PhaseFormatted {
			p.add(Action{Op: OpVerifyFS, Group: target, Device: d.Path, Key: key, FSType: j.FSType, UUID: j.UUID, Reason: "a format of this disk was interrupted"})
		}
		p.mount(d.Path, target, j.FSType, j.UUID)
		p.status(target, d.Path, StateReady, fmt.Sprintf("%s filesystem %s made by joiner", j.FSType, j.UUID))
		return
	}
	if why := notBlank(d, p.cfg.AllowNonZero); why != "" {
		p.status(target, d.Path, StateHandsOff, d.Path+" "+why)
		return
	}
	if state, why := p.mayFormat(ids); state != "" {
		p.status(target, d.Path, state, why)
		return
	}
	if !p.in.AllowFormat {
		p.status(target, d.Path, StateBlank, d.Path+" is blank; formatting is off now")
		return
	}
	uuid := p.in.NewUUID()
	p.add(Action{Op: OpFormat, Group: target, Device: d.Path, Key: key, FSType: p.cfg.FSType, UUID: uuid, Serial: d.Serial, Reason: "blank " + what})
	p.mount(d.Path, target, p.cfg.FSType, uuid)
	p.status(target, d.Path, StateReady, "blank: to be formatted "+p.cfg.FSType)
}

func onlyFilesystems(sigs []Signature) bool {
	for _, s := range sigs {
		if s.Usage != UsageFilesystem {
			return false
		}
	}
	return true
}

// allRAIDMembers: every disk is unused and holds only an md superblock.
func allRAIDMembers(disks []Disk) bool {
	for _, d := range disks {
		if inUse(d) != "" || len(d.MountPoints) > 0 || d.ProbeErr != "" || len(d.Probe.Signatures) == 0 {
			return false
		}
		for _, s := range d.Probe.Signatures {
			if s.Type != "linux_raid_member" {
				return false
			}
		}
		for _, e := range d.External {
			if !strings.Contains(e, "linux_raid_member") {
				return false
			}
		}
	}
	return true
}
