// Package config is the node agent's config file: `joiner bootstrap` writes
// it on first boot and `joiner agent` reads it at start.
//
// The file is JSON (default path DefaultPath). Unknown fields are ignored so
// an older agent can read a newer file. Every field has a documented default
// applied by WithDefaults; Validate names the field path of a bad value.
//
// To add a section (IMDS, drain, report, ...): add a struct field with a json
// tag and `omitempty`, give it defaults in WithDefaults and checks in Validate.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/internal/atomicfile"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// DefaultPath is where bootstrap writes the file and the agent reads it.
const DefaultPath = "/etc/joiner/agent.json"

// Version is the current file format version.
const Version = 1

// Config is the agent's config file.
type Config struct {
	Version int `json:"version"`
	// NodeName is the Kubernetes node name (default: the kubelet's, i.e. the hostname).
	NodeName string `json:"nodeName,omitempty"`
	// Volumes is the data-volume layout.
	Volumes Volumes `json:"volumes"`
}

// Volumes describes how data volumes are laid out.
type Volumes struct {
	// Devices is an explicit device list in block-device-mapping order; entry
	// i (0-based) is mounted at <MountPrefix><i+1>. Entries may be /dev paths,
	// udev links, or mapping names (/dev/xvdb) matched against the NVMe
	// identify data. Empty: every EBS data volume, in mapping-name order.
	Devices []string `json:"devices,omitempty"`
	// FSType for new filesystems: "xfs" (default) or "ext4".
	FSType string `json:"fsType,omitempty"`
	// MountPrefix: data volumes mount at <prefix>1..N. Default "/data".
	MountPrefix string `json:"mountPrefix,omitempty"`
	// MountRoot is prepended to every mount point (tests; default "" = /).
	MountRoot string `json:"mountRoot,omitempty"`
	// MountOptions for data mounts. Default ["defaults", "noatime"];
	// "nofail" and x-systemd.device-timeout are always added.
	MountOptions []string `json:"mountOptions,omitempty"`
	// DeviceTimeout is x-systemd.device-timeout. Default "10s".
	DeviceTimeout string `json:"deviceTimeout,omitempty"`
	// InstanceStore is the layout of instance-store NVMe disks.
	InstanceStore InstanceStore `json:"instanceStore"`
	// UnitDir is where .mount units are written. Default "/etc/systemd/system".
	UnitDir string `json:"unitDir,omitempty"`
	// StateDir holds the format journal and the launch record (the volumes
	// Joiner attached at launch). Default "/var/lib/joiner".
	StateDir string `json:"stateDir,omitempty"`
	// AllowNonZero lets a disk with no signature but non-zero bytes in its
	// first or last MiB be formatted. Default false: such data is unknown,
	// hands off.
	AllowNonZero bool `json:"allowNonZero,omitempty"`
	// FormatOnAgentStart lets `joiner agent` format blank disks it finds at
	// start. Even then only launch volumes in bootstrap's launch record
	// whose first setup has not completed, and instance-store disks, are
	// formatted. Default false: the agent only reports them.
	FormatOnAgentStart bool `json:"formatOnAgentStart,omitempty"`
	// SkipCrossCheck disables the blkid -p / wipefs -n second opinion.
	SkipCrossCheck bool `json:"skipCrossCheck,omitempty"`
	// Persist is how mounts survive a reboot: "units" (default: one systemd
	// .mount unit per mount in UnitDir) or "fstab" (UUID= lines in a block
	// of FstabPath that joiner owns).
	Persist string `json:"persist,omitempty"`
	// FstabPath for Persist "fstab". Default "/etc/fstab".
	FstabPath string `json:"fstabPath,omitempty"`
}

// Persist modes.
const (
	PersistUnits = "units"
	PersistFstab = "fstab"
)

// Instance-store layouts.
const (
	LayoutNone     = "none"     // leave instance-store disks alone
	LayoutRAID0    = "raid0"    // one md RAID0 array over all of them, one mount
	LayoutSeparate = "separate" // each at <MountPath><i>, i from 0
)

// InstanceStore is the layout of instance-store NVMe disks.
type InstanceStore struct {
	// Layout: "none" (default), "raid0" or "separate".
	Layout string `json:"layout,omitempty"`
	// MountPath for raid0; for separate, disks mount at <MountPath><i>.
	// Default "/mnt/instance-store".
	MountPath string `json:"mountPath,omitempty"`
	// RAIDName is the md array name (/dev/md/<name>). Default "joiner-instance-store".
	RAIDName string `json:"raidName,omitempty"`
	// Devices is an explicit instance-store device list (tests; default: by model).
	Devices []string `json:"devices,omitempty"`
	// BindDirs are bind-mounted from <MountPath>/<dir with / as _> onto
	// themselves, e.g. /var/lib/kubelet, /var/lib/containerd, /var/log/pods
	// (raid0 layout only).
	BindDirs []string `json:"bindDirs,omitempty"`
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	defaults.Zero(&c.Version, Version)
	v := &c.Volumes
	defaults.Zero(&v.FSType, "xfs")
	defaults.Zero(&v.MountPrefix, "/data")
	if len(v.MountOptions) == 0 {
		v.MountOptions = []string{"defaults", "noatime"}
	}
	defaults.Zero(&v.DeviceTimeout, "10s")
	defaults.Zero(&v.UnitDir, "/etc/systemd/system")
	defaults.Zero(&v.StateDir, "/var/lib/joiner")
	defaults.Zero(&v.Persist, PersistUnits)
	defaults.Zero(&v.FstabPath, "/etc/fstab")
	is := &v.InstanceStore
	defaults.Zero(&is.Layout, LayoutNone)
	defaults.Zero(&is.MountPath, "/mnt/instance-store")
	defaults.Zero(&is.RAIDName, "joiner-instance-store")
	return c
}

// Validate checks c (after WithDefaults) and names the field of a bad value.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, val any, why string) {
		errs = append(errs, fmt.Errorf("%s: %v: %s", field, val, why))
	}
	if c.Version != Version {
		bad("version", c.Version, fmt.Sprintf("unsupported (this agent reads version %d)", Version))
	}
	v := c.Volumes
	if v.FSType != "xfs" && v.FSType != "ext4" {
		bad("volumes.fsType", v.FSType, `must be "xfs" or "ext4"`)
	}
	for _, f := range []struct{ name, val string }{
		{"volumes.mountPrefix", v.MountPrefix}, {"volumes.unitDir", v.UnitDir}, {"volumes.stateDir", v.StateDir},
		{"volumes.instanceStore.mountPath", v.InstanceStore.MountPath}, {"volumes.fstabPath", v.FstabPath},
	} {
		if !path.IsAbs(f.val) {
			bad(f.name, f.val, "must be an absolute path")
		}
	}
	if v.MountRoot != "" && !path.IsAbs(v.MountRoot) {
		bad("volumes.mountRoot", v.MountRoot, "must be an absolute path")
	}
	if d, err := time.ParseDuration(v.DeviceTimeout); err != nil || d <= 0 {
		bad("volumes.deviceTimeout", v.DeviceTimeout, "must be a positive duration such as 10s")
	}
	for i, o := range v.MountOptions {
		if o == "" || strings.ContainsAny(o, ", \t\n") {
			bad(fmt.Sprintf("volumes.mountOptions[%d]", i), fmt.Sprintf("%q", o), "must be one non-empty option without commas or spaces")
		}
	}
	if v.Persist != PersistUnits && v.Persist != PersistFstab {
		bad("volumes.persist", v.Persist, `must be "units" or "fstab"`)
	}
	for _, f := range []struct{ name, val string }{{"volumes.mountRoot", v.MountRoot}, {"volumes.mountPrefix", v.MountPrefix}, {"volumes.instanceStore.mountPath", v.InstanceStore.MountPath}} {
		if strings.ContainsAny(f.val, " \t\n\\") {
			bad(f.name, fmt.Sprintf("%q", f.val), "must not contain whitespace or backslashes")
		}
	}
	switch v.InstanceStore.Layout {
	case LayoutNone, LayoutRAID0, LayoutSeparate:
	default:
		bad("volumes.instanceStore.layout", v.InstanceStore.Layout, `must be "none", "raid0" or "separate"`)
	}
	if n := v.InstanceStore.RAIDName; n == "" || strings.ContainsAny(n, "/ \t\n") {
		bad("volumes.instanceStore.raidName", fmt.Sprintf("%q", n), "must be a name without slashes or spaces")
	}
	for i, d := range v.InstanceStore.BindDirs {
		if !path.IsAbs(d) || path.Clean(d) == "/" {
			bad(fmt.Sprintf("volumes.instanceStore.bindDirs[%d]", i), d, "must be an absolute path other than /")
		}
	}
	if len(v.InstanceStore.BindDirs) > 0 && v.InstanceStore.Layout != LayoutRAID0 {
		bad("volumes.instanceStore.bindDirs", v.InstanceStore.BindDirs, `needs layout "raid0"`)
	}
	return errors.Join(errs...)
}

// Load reads the file at p, applies defaults and validates it.
func Load(p string) (Config, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return Config{}, fmt.Errorf("reading agent config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("parsing agent config %s: %w", p, err)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("agent config %s: %w", p, err)
	}
	return c, nil
}

// Save writes c to p atomically (temp file + rename), mode 0644. A file that
// already holds exactly this content is left as it is.
func Save(p string, c Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding agent config: %w", err)
	}
	if _, err := atomicfile.WriteIfChanged(p, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("saving agent config: %w", err)
	}
	return nil
}
