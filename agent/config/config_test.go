package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etc", "agent.json")
	in := Config{NodeName: "n1", Volumes: Volumes{Devices: []string{"/dev/xvdb"}, FSType: "ext4",
		InstanceStore: InstanceStore{Layout: LayoutRAID0, BindDirs: []string{"/var/lib/kubelet"}}}}.WithDefaults()
	if err := Save(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

func TestLoadDefaultsAndUnknownFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.json")
	if err := os.WriteFile(p, []byte(`{"volumes":{},"someFutureSection":{"x":1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Volumes.FSType != "xfs" || c.Volumes.MountPrefix != "/data" || c.Volumes.InstanceStore.Layout != LayoutNone {
		t.Errorf("defaults not applied: %+v", c.Volumes)
	}
}

func TestValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"fs", func(c *Config) { c.Volumes.FSType = "btrfs" }, "volumes.fsType: btrfs"},
		{"prefix", func(c *Config) { c.Volumes.MountPrefix = "data" }, "volumes.mountPrefix: data"},
		{"timeout", func(c *Config) { c.Volumes.DeviceTimeout = "soon" }, "volumes.deviceTimeout: soon"},
		{"option", func(c *Config) { c.Volumes.MountOptions = []string{"a,b"} }, "volumes.mountOptions[0]"},
		{"layout", func(c *Config) { c.Volumes.InstanceStore.Layout = "raid5" }, "volumes.instanceStore.layout: raid5"},
		{"bind", func(c *Config) { c.Volumes.InstanceStore.BindDirs = []string{"/var/lib/kubelet"} }, `needs layout "raid0"`},
		{"version", func(c *Config) { c.Version = 9 }, "version: 9"},
		{"persist", func(c *Config) { c.Volumes.Persist = "crontab" }, "volumes.persist: crontab"},
		{"space", func(c *Config) { c.Volumes.MountPrefix = "/my data" }, "volumes.mountPrefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{}.WithDefaults()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}
