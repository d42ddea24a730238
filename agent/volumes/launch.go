package volumes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/agent/config"
)

// LaunchFile is the launch record's name under the state directory.
const LaunchFile = "launch.json"

// LaunchRecordVersion is the launch record's format version.
const LaunchRecordVersion = 1

// DefaultKubeletCert is the kubelet's client certificate after it joined a
// cluster (TLS bootstrap). Its presence means this root disk has been a
// node before, so this boot is not the instance's first.
const DefaultKubeletCert = "/var/lib/kubelet/pki/kubelet-client-current.pem"

// Launch record sources.
const (
	// SourceIMDS: made at first boot from the disks present then, EBS
	// volumes kept only when the launch block-device mapping (IMDS) lists
	// their mapping name.
	SourceIMDS = "imds"
	// SourceFirstBoot: made at first boot from the disks present then; the
	// launch mapping was unknown (no IMDS, e.g. in the sandboxed unit).
	// Bootstrap runs before the kubelet, so no CSI volume can be attached
	// yet.
	SourceFirstBoot = "first-boot"
	// SourceAdopted: no record, but this is not the instance's first boot
	// (a format journal names its disks, or a kubelet joined from this root
	// disk): the disks present are recorded for their mount points and the
	// first setup counts as done, so nothing is ever formatted.
	SourceAdopted = "adopted"
)

// LaunchDisk is one disk Joiner attached at launch (or, for explicitly
// listed non-EBS devices, was configured with at first boot).
type LaunchDisk struct {
	// Key is the disk's identity, as the journal keys it: the EBS volume ID
	// (from the NVMe serial), serial:<serial>, or the device path when the
	// disk has no serial (Xen, loop).
	Key     string `json:"key"`
	Serial  string `json:"serial,omitempty"`  // NVMe serial (vol0123...)
	Mapping string `json:"mapping,omitempty"` // block-device-mapping name, /dev/xvdb
	Device  string `json:"device"`            // kernel path at record time (may change across boots)
	// InstanceStore: listed in instanceStore.devices rather than a data volume.
	InstanceStore bool `json:"instanceStore,omitempty"`
}

// LaunchRecord is StateDir/launch.json: the disks this instance was
// launched with, written once (atomically) by the first bootstrap and
// marked when the first setup succeeded. Only disks it lists are ever
// formatted, and only until SetupComplete; data volumes take their mount
// points (/data1..N) in its order.
type LaunchRecord struct {
	Version       int          `json:"version"`
	InstanceID    string       `json:"instanceID,omitempty"`
	Source        string       `json:"source"`
	Disks         []LaunchDisk `json:"disks"`
	SetupComplete bool         `json:"setupComplete"`
	RecordedAt    time.Time    `json:"recordedAt,omitzero"`
	CompletedAt   time.Time    `json:"completedAt,omitzero"`
}

// Has reports whether the record lists the disk with key.
func (r *LaunchRecord) Has(key string) bool {
	if r == nil {
		return false
	}
	for _, d := range r.Disks {
		if d.Key == key {
			return true
		}
	}
	return false
}

// forInstance reports whether r may be used on the instance id: a record
// or an id that is unknown cannot be told apart.
func (r *LaunchRecord) forInstance(id string) bool {
	return r != nil && (r.InstanceID == "" || id == "" || r.InstanceID == id)
}

// LaunchPath is the launch record's path for cfg.
func LaunchPath(cfg config.Volumes) string { return filepath.Join(cfg.StateDir, LaunchFile) }

// LoadLaunchRecord reads the record; a missing file is nil. A file that
// cannot be read or parsed is an error: it is written atomically, so that
// is not a crash, and guessing could format a disk.
func LoadLaunchRecord(path string) (*LaunchRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading launch record: %w", err)
	}
	var r LaunchRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("parsing launch record %s: %w (remove it to have the next bootstrap adopt the disks present without formatting any)", path, err)
	}
	if r.Version != LaunchRecordVersion {
		return nil, fmt.Errorf("launch record %s: version %d, this joiner reads version %d", path, r.Version, LaunchRecordVersion)
	}
	return &r, nil
}

// SaveLaunchRecord writes the record atomically (mode 0600).
func SaveLaunchRecord(path string, r LaunchRecord) error { return saveJSON(path, "launch record", r) }

// LaunchFacts is what the machine says about this instance, read at the
// edges (LocalFacts, plus Options.LaunchMapping) for DecideLaunch.
type LaunchFacts struct {
	// InstanceID from DMI (board_asset_tag, Nitro) or IMDS; "" unknown.
	InstanceID string
	// Mappings are the block-device-mapping names of the EBS volumes the
	// instance was launched with (IMDS meta-data/block-device-mapping/ebsN,
	// root excluded). nil: unknown; empty: none.
	Mappings []string
	// MappingsErr says why Mappings is unknown.
	MappingsErr string
	// KubeletJoined names the file that shows a kubelet joined a cluster
	// from this root disk before; "" when none does.
	KubeletJoined string
}

// LocalFacts reads the instance ID from DMI under sysRoot and whether
// kubeletCert exists. It needs no network and no AWS rights.
func LocalFacts(sysRoot, kubeletCert string) LaunchFacts {
	var f LaunchFacts
	if b, err := os.ReadFile(filepath.Join(sysRoot, "devices", "virtual", "dmi", "id", "board_asset_tag")); err == nil {
		if id := strings.TrimSpace(string(b)); strings.HasPrefix(id, "i-") {
			f.InstanceID = id
		}
	}
	if kubeletCert != "" {
		if _, err := os.Stat(kubeletCert); err == nil {
			f.KubeletJoined = kubeletCert
		}
	}
	return f
}

// LaunchInput is everything DecideLaunch looks at. It is pure data.
type LaunchInput struct {
	Record    *LaunchRecord // as loaded; nil: none
	Journal   Journal
	Inventory Inventory
	Config    config.Volumes // with defaults applied
	Facts     LaunchFacts
	// MayRecord: this is bootstrap, which may make a record when there is
	// none. The agent never does (it runs after the kubelet, when CSI
	// volumes may be attached).
	MayRecord bool
}

// LaunchDecision is DecideLaunch's answer.
type LaunchDecision struct {
	Record *LaunchRecord // the record to plan with; nil: none, nothing is formatted
	Write  bool          // Record is new: save it before anything is formatted
	Notes  []string      // what was left out or ignored, and why
}

// DecideLaunch picks the launch record to plan with: the one on disk when it
// is this instance's; otherwise, only for bootstrap, a new one. A new record
// lists the data-volume candidates present now (the configured devices, or
// every non-root EBS volume in mapping-name order), EBS volumes only when the
// launch block-device mapping lists them (if it is known), identified by
// volume ID. When this is evidently not the instance's first boot (the
// journal names a present disk, or a kubelet joined from this root disk), the
// new record is marked SetupComplete at once: nothing will be formatted.
func DecideLaunch(in LaunchInput) LaunchDecision {
	var out LaunchDecision
	note := func(format string, a ...any) { out.Notes = append(out.Notes, fmt.Sprintf(format, a...)) }
	rec, stale := in.Record, false
	if rec != nil && !rec.forInstance(in.Facts.InstanceID) {
		note("launch record is for instance %s, this is %s: ignored, with the format journal's entries", rec.InstanceID, in.Facts.InstanceID)
		rec, stale = nil, true
	}
	if rec != nil {
		out.Record = rec
		return out
	}
	if !in.MayRecord {
		note("no launch record for this instance (joiner bootstrap makes it): nothing will be formatted")
		return out
	}
	n := &LaunchRecord{Version: LaunchRecordVersion, InstanceID: in.Facts.InstanceID}
	switch {
	case !stale && journalNamesPresentDisk(in.Journal, in.Inventory):
		n.Source, n.SetupComplete = SourceAdopted, true
		note("no launch record, but the format journal names disks of this machine (set up by a joiner without launch records): adopting the disks present; nothing will be formatted")
	case in.Facts.KubeletJoined != "":
		n.Source, n.SetupComplete = SourceAdopted, true
		note("no launch record, but a kubelet joined a cluster from this root disk (%s exists): not the first boot; adopting the disks present; nothing will be formatted", in.Facts.KubeletJoined)
	case in.Facts.Mappings != nil:
		n.Source = SourceIMDS
	default:
		n.Source = SourceFirstBoot
		why := in.Facts.MappingsErr
		if why == "" {
			why = "no source configured"
		}
		note("launch block-device mapping unknown (%s): recording the data volumes present at this first boot", why)
	}
	for _, c := range launchCandidates(in.Inventory, in.Config) {
		d := c.disk
		if d.Kind == KindEBS && in.Facts.Mappings != nil && !inMapping(d.MappingName, in.Facts.Mappings) {
			note("%s is not in the instance's launch block-device mapping [%s]: not recorded, never formatted", ident(d), strings.Join(in.Facts.Mappings, " "))
			continue
		}
		n.Disks = append(n.Disks, LaunchDisk{Key: diskKey(d), Serial: d.Serial, Mapping: d.MappingName, Device: d.Path, InstanceStore: c.instanceStore})
	}
	out.Record, out.Write = n, true
	return out
}

type candidate struct {
	disk          Disk
	instanceStore bool
}

// launchCandidates are the disks a new launch record may list, in
// data-volume order: the configured devices (or every non-root EBS volume by
// mapping name), then explicitly listed instance-store devices that are not
// instance-store disks. Instance-store disks themselves are never recorded:
// EC2 attaches them with the instance, they come back blank after a stop,
// and no CSI driver can attach one.
func launchCandidates(inv Inventory, cfg config.Volumes) []candidate {
	p := &planner{in: PlanInput{Inventory: inv}, cfg: cfg}
	var out []candidate
	seen := map[string]bool{}
	add := func(d Disk, is bool) {
		if seen[d.Name] || d.Root || d.Kind == KindInstanceStore {
			return
		}
		seen[d.Name] = true
		out = append(out, candidate{d, is})
	}
	if len(cfg.Devices) > 0 {
		for _, spec := range cfg.Devices {
			if d, ok := p.find(spec); ok {
				add(d, false)
			}
		}
	} else {
		for _, d := range defaultDataDisks(inv) {
			add(d, false)
		}
	}
	if cfg.InstanceStore.Layout != config.LayoutNone {
		for _, spec := range cfg.InstanceStore.Devices {
			if d, ok := p.find(spec); ok {
				add(d, true)
			}
		}
	}
	return out
}

// journalNamesPresentDisk: some journal entry is about a disk present now.
func journalNamesPresentDisk(j Journal, inv Inventory) bool {
	for _, d := range inv.Disks {
		if _, ok := j.Get(diskKey(d)); ok {
			return true
		}
	}
	return false
}

// inMapping: the mapping name m (/dev/sdb or /dev/xvdb) is one of names.
func inMapping(m string, names []string) bool {
	if m == "" {
		return false
	}
	return slices.ContainsFunc(names, func(n string) bool { return mappingKey(normalizeMapping(n)) == mappingKey(m) })
}

// ident names a disk in messages: its path, volume ID, serial and mapping.
func ident(d Disk) string {
	var parts []string
	if d.VolumeID != "" {
		parts = append(parts, "volume "+d.VolumeID)
	}
	if d.Serial != "" {
		parts = append(parts, "serial "+d.Serial)
	} else {
		parts = append(parts, "no serial")
	}
	if d.MappingName != "" {
		parts = append(parts, "mapping "+d.MappingName)
	}
	return fmt.Sprintf("%s (%s)", d.Path, strings.Join(parts, ", "))
}
