package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// Kind tells EBS volumes from instance-store disks.
type Kind string

// Disk kinds.
const (
	KindEBS           Kind = "ebs"
	KindInstanceStore Kind = "instance-store"
	KindRAID          Kind = "md"
	KindOther         Kind = "other"
)

// NVMe model strings on Nitro instances.
const (
	modelEBS           = "Amazon Elastic Block Store"
	modelInstanceStore = "Amazon EC2 NVMe Instance Storage"
)

// Disk is one whole block device as discovery saw it.
type Disk struct {
	Name        string   `json:"name"`                  // kernel name: nvme1n1, xvdb, loop3, md127
	Path        string   `json:"path"`                  // /dev/<name>
	Dev         string   `json:"dev"`                   // major:minor
	Size        int64    `json:"size"`                  // bytes
	Model       string   `json:"model,omitempty"`       // trimmed
	Serial      string   `json:"serial,omitempty"`      // trimmed
	Kind        Kind     `json:"kind"`                  //
	VolumeID    string   `json:"volumeID,omitempty"`    // vol-0123... (EBS)
	MappingName string   `json:"mappingName,omitempty"` // block-device-mapping name, /dev/xvdb
	Aliases     []string `json:"aliases,omitempty"`     // /dev paths and by-id links that resolve to it
	Partitions  []string `json:"partitions,omitempty"`  // kernel names of its partitions
	Holders     []string `json:"holders,omitempty"`     // md/dm devices built on it or its partitions
	Slaves      []string `json:"slaves,omitempty"`      // for md/dm: the devices it is built from
	MountPoints []string `json:"mountPoints,omitempty"` // where it or a partition is mounted
	Swap        bool     `json:"swap,omitempty"`        // it or a partition is active swap
	Root        bool     `json:"root,omitempty"`        // holds the mount source of /
	ReadOnly    bool     `json:"readOnly,omitempty"`    //
	Probe       ProbeResult
	ProbeErr    string   `json:"probeErr,omitempty"` // the probe could not read it: never blank
	External    []string `json:"external,omitempty"` // what blkid -p / wipefs -n reported
}

// Mount is one entry of /proc/self/mountinfo, reduced.
type Mount struct {
	Dev    string // major:minor
	Source string
	Target string
	FSType string
}

// Inventory is every disk and mount discovery saw.
type Inventory struct {
	Disks  []Disk
	Mounts []Mount
}

// Disk returns the disk with kernel name name.
func (inv Inventory) Disk(name string) (Disk, bool) {
	for _, d := range inv.Disks {
		if d.Name == name {
			return d, true
		}
	}
	return Disk{}, false
}

// MountAt returns the mount at target, if any.
func (inv Inventory) MountAt(target string) (Mount, bool) {
	var found Mount
	ok := false
	for _, m := range inv.Mounts { // the last one wins: it is the visible one
		if m.Target == target {
			found, ok = m, true
		}
	}
	return found, ok
}

// Discoverer reads the block devices from sysfs, udev links and mountinfo.
// Every root is configurable so tests can point it at a fake tree.
type Discoverer struct {
	SysRoot    string                                                   // default /sys
	DevRoot    string                                                   // default /dev
	SwapsPath  string                                                   // default /proc/swaps
	Mounts     func() ([]*mountinfo.Info, error)                        // default mountinfo.GetMounts(nil)
	NVMeName   func(devPath string) (string, error)                     // EBS mapping name from NVMe identify; default: ioctl
	Open       func(path string) (*os.File, error)                      // default os.Open
	CrossCheck func(ctx context.Context, path string) ([]string, error) // blkid -p / wipefs -n; nil: skip
	// Identify, when set, is called on every disk once sysfs and the NVMe
	// identify data are read, and by Serial: it may change Kind, Model,
	// Serial, VolumeID and MappingName. Tests use it to give loop devices
	// an EBS volume's identity.
	Identify func(*Disk)
	Log      *zap.Logger
}

func (d *Discoverer) defaults() {
	defaults.Zero(&d.SysRoot, "/sys")
	defaults.Zero(&d.DevRoot, "/dev")
	defaults.Zero(&d.SwapsPath, "/proc/swaps")
	if d.Mounts == nil {
		d.Mounts = func() ([]*mountinfo.Info, error) { return mountinfo.GetMounts(nil) }
	}
	if d.NVMeName == nil {
		d.NVMeName = nvmeMappingName
	}
	if d.Open == nil {
		d.Open = os.Open
	}
	defaults.Zero(&d.Log, zap.NewNop())
}

// virtualPrefixes are kernel names skipped unless a device is listed explicitly.
var virtualPrefixes = []string{"loop", "ram", "zram", "dm-", "sr", "fd", "nbd", "mtdblock"}

// Discover lists the whole disks and md arrays of the machine plus every path
// in extra (an explicit device list; loop devices are allowed there) and
// probes each for signatures. A device in extra that does not exist is left
// out; the planner reports it.
func (d *Discoverer) Discover(ctx context.Context, extra []string) (Inventory, error) {
	d.defaults()
	var inv Inventory
	infos, err := d.Mounts()
	if err != nil {
		return inv, fmt.Errorf("reading mountinfo: %w", err)
	}
	for _, mi := range infos {
		inv.Mounts = append(inv.Mounts, Mount{Dev: fmt.Sprintf("%d:%d", mi.Major, mi.Minor), Source: mi.Source, Target: mi.Mountpoint, FSType: mi.FSType})
	}
	aliases := map[string][]string{} // kernel name -> paths naming it
	for _, p := range extra {
		name, err := d.kernelName(p)
		if err != nil {
			d.Log.Warn("listed device not found", zap.String("device", p), zap.Error(err))
			continue
		}
		aliases[name] = append(aliases[name], p)
	}
	d.addLinks(aliases)

	entries, err := os.ReadDir(filepath.Join(d.SysRoot, "block"))
	if err != nil {
		return inv, fmt.Errorf("listing block devices: %w", err)
	}
	swaps := d.swaps()
	for _, e := range entries {
		name := e.Name()
		if isVirtual(name) && len(aliases[name]) == 0 {
			continue
		}
		disk, err := d.disk(ctx, name, uniqueSorted(aliases[name]), inv.Mounts, swaps)
		if err != nil {
			return inv, fmt.Errorf("reading block device %s: %w", name, err)
		}
		if disk.Size == 0 {
			continue // an unbound loop device or an empty slot
		}
		inv.Disks = append(inv.Disks, disk)
	}
	return inv, nil
}

func isVirtual(name string) bool {
	for _, p := range virtualPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// kernelName resolves a /dev path (or a link to one) to its kernel name.
func (d *Discoverer) kernelName(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	name := filepath.Base(real)
	if _, err := os.Stat(filepath.Join(d.SysRoot, "class", "block", name)); err != nil {
		return "", fmt.Errorf("%s (%s) is not a block device: %w", p, real, err)
	}
	return name, nil
}

// addLinks adds /dev/disk/by-id, /dev/md and /dev/{sd,xvd}* links as aliases.
func (d *Discoverer) addLinks(aliases map[string][]string) {
	var links []string
	for _, dir := range []string{filepath.Join(d.DevRoot, "disk", "by-id"), filepath.Join(d.DevRoot, "md")} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			links = append(links, filepath.Join(dir, e.Name()))
		}
	}
	ents, _ := os.ReadDir(d.DevRoot)
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 && (strings.HasPrefix(e.Name(), "sd") || strings.HasPrefix(e.Name(), "xvd")) {
			links = append(links, filepath.Join(d.DevRoot, e.Name())) // amazon-ec2-utils' /dev/xvdb -> nvme1n1
		}
	}
	for _, l := range links {
		real, err := filepath.EvalSymlinks(l)
		if err != nil {
			continue
		}
		name := filepath.Base(real)
		aliases[name] = append(aliases[name], l)
	}
}

func (d *Discoverer) read(name, rel string) string {
	b, err := os.ReadFile(filepath.Join(d.SysRoot, "block", name, rel))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (d *Discoverer) disk(ctx context.Context, name string, aliases []string, mounts []Mount, swaps map[string]bool) (Disk, error) {
	disk := Disk{Name: name, Path: filepath.Join(d.DevRoot, name), Dev: d.read(name, "dev"), Kind: KindOther, Aliases: aliases}
	sectors, _ := strconv.ParseInt(d.read(name, "size"), 10, 64)
	disk.Size = sectors * 512
	disk.Model = strings.TrimSpace(d.read(name, "device/model"))
	disk.Serial = strings.TrimSpace(d.read(name, "device/serial"))
	disk.ReadOnly = d.read(name, "ro") == "1"
	switch {
	case disk.Model == modelEBS:
		disk.Kind = KindEBS
		if strings.HasPrefix(disk.Serial, "vol") && !strings.HasPrefix(disk.Serial, "vol-") {
			disk.VolumeID = "vol-" + strings.TrimPrefix(disk.Serial, "vol")
		}
		if mn, err := d.NVMeName(disk.Path); err == nil && mn != "" {
			disk.MappingName = normalizeMapping(mn)
		}
	case disk.Model == modelInstanceStore:
		disk.Kind = KindInstanceStore
	case strings.HasPrefix(name, "xvd"):
		disk.Kind = KindEBS // Xen instances: the mapping name is the kernel name
		disk.MappingName = "/dev/" + name
	case strings.HasPrefix(name, "md"):
		disk.Kind = KindRAID
	}
	if d.Identify != nil {
		d.Identify(&disk)
	}
	ents, err := os.ReadDir(filepath.Join(d.SysRoot, "block", name))
	if err != nil {
		return disk, err
	}
	devs := map[string]bool{disk.Dev: true}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(d.SysRoot, "block", name, e.Name(), "partition")); err == nil {
			disk.Partitions = append(disk.Partitions, e.Name())
			devs[d.read(name, e.Name()+"/dev")] = true
			disk.Holders = append(disk.Holders, d.list(name, e.Name()+"/holders")...)
			if swaps[e.Name()] {
				disk.Swap = true
			}
		}
	}
	disk.Holders = append(disk.Holders, d.list(name, "holders")...)
	disk.Slaves = d.list(name, "slaves")
	disk.Swap = disk.Swap || swaps[name]
	for _, m := range mounts {
		if devs[m.Dev] {
			disk.MountPoints = append(disk.MountPoints, m.Target)
			if m.Target == "/" {
				disk.Root = true
			}
		}
	}
	// The mapping name on Nitro with amazon-ec2-utils comes as a /dev link.
	if disk.MappingName == "" && disk.Kind == KindEBS {
		for _, a := range disk.Aliases {
			if base := filepath.Base(a); strings.HasPrefix(base, "sd") || strings.HasPrefix(base, "xvd") {
				disk.MappingName = "/dev/" + base
			}
		}
	}
	d.probe(ctx, &disk)
	return disk, nil
}

// Serial reads the serial of the disk at path (a /dev path or a link to
// one) as Discover does: for an EBS volume on Nitro, its volume ID without
// the dash. A disk without one has "". The executor calls it right before
// mkfs to check that the path still names the disk that was planned.
func (d *Discoverer) Serial(path string) (string, error) {
	d.defaults()
	name, err := d.kernelName(path)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", path, err)
	}
	disk := Disk{Name: name, Path: filepath.Join(d.DevRoot, name), Serial: strings.TrimSpace(d.read(name, "device/serial")),
		Model: strings.TrimSpace(d.read(name, "device/model"))}
	if d.Identify != nil {
		d.Identify(&disk)
	}
	return disk.Serial, nil
}

func (d *Discoverer) list(name, rel string) []string {
	ents, _ := os.ReadDir(filepath.Join(d.SysRoot, "block", name, rel))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// probe runs the pure-Go probe and, when configured, blkid/wipefs. Failures
// are recorded on the disk (which makes it "not blank"), never ignored.
func (d *Discoverer) probe(ctx context.Context, disk *Disk) {
	f, err := d.Open(disk.Path)
	if err != nil {
		disk.ProbeErr = err.Error()
		return
	}
	defer f.Close()
	res, err := Probe(f, disk.Size)
	disk.Probe = res
	if err != nil {
		disk.ProbeErr = err.Error()
	}
	if d.CrossCheck != nil {
		ext, err := d.CrossCheck(ctx, disk.Path)
		disk.External = ext
		if err != nil {
			disk.ProbeErr = strings.TrimSpace(disk.ProbeErr + "; " + err.Error())
		}
	}
}

// swaps reads the kernel names of active swap devices.
func (d *Discoverer) swaps() map[string]bool {
	out := map[string]bool{}
	b, err := os.ReadFile(d.SwapsPath)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(f[0]); err == nil {
			out[filepath.Base(real)] = true
		}
		out[filepath.Base(f[0])] = true
	}
	return out
}

// normalizeMapping turns "sdf", "/dev/sdf" or "xvdf" into "/dev/sdf" form.
func normalizeMapping(s string) string {
	s = strings.TrimSpace(strings.Trim(s, "\x00 "))
	if s == "" {
		return ""
	}
	if !strings.HasPrefix(s, "/dev/") {
		s = "/dev/" + s
	}
	return s
}

// mappingKey makes /dev/sdf and /dev/xvdf compare equal and sorts "z" before "aa".
func mappingKey(s string) string {
	b := strings.TrimPrefix(s, "/dev/")
	for _, p := range []string{"xvd", "sd", "hd", "vd"} {
		if strings.HasPrefix(b, p) {
			b = strings.TrimPrefix(b, p)
			break
		}
	}
	return fmt.Sprintf("%04d%s", len(b), b)
}

func uniqueSorted(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	sort.Strings(in)
	out := in[:1]
	for _, s := range in[1:] {
		if s != out[len(out)-1] {
			out = append(out, s)
		}
	}
	return out
}
