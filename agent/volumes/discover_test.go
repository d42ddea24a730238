package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if c == "<dir>" {
			os.MkdirAll(full, 0o755)
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiscoverFromFakeSysfs(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	writeTree(t, sys, map[string]string{
		// root EBS disk with a partition mounted at /
		"block/nvme0n1/dev": "259:0\n", "block/nvme0n1/size": "16777216\n", "block/nvme0n1/ro": "0\n",
		"block/nvme0n1/device/model": "Amazon Elastic Block Store              \n", "block/nvme0n1/device/serial": "vol0aaaa\n",
		"block/nvme0n1/nvme0n1p1/partition": "1\n", "block/nvme0n1/nvme0n1p1/dev": "259:1\n",
		// a data EBS volume
		"block/nvme1n1/dev": "259:2\n", "block/nvme1n1/size": "2097152\n", "block/nvme1n1/ro": "0\n",
		"block/nvme1n1/device/model": "Amazon Elastic Block Store\n", "block/nvme1n1/device/serial": "vol0123456789abcdef0\n",
		"block/nvme1n1/holders": "<dir>",
		// an instance-store disk held by md127
		"block/nvme2n1/dev": "259:3\n", "block/nvme2n1/size": "2097152\n",
		"block/nvme2n1/device/model": "Amazon EC2 NVMe Instance Storage\n", "block/nvme2n1/device/serial": "AWS11111\n",
		"block/nvme2n1/holders/md127": "",
		// an unbound loop device and a ram disk: skipped
		"block/loop0/dev": "7:0\n", "block/loop0/size": "0\n",
		"block/ram0/dev": "1:0\n", "block/ram0/size": "8192\n",
	})
	for _, n := range []string{"nvme0n1", "nvme1n1", "nvme2n1"} {
		writeTree(t, sys, map[string]string{"class/block/" + n + "/uevent": ""})
		writeTree(t, dev, map[string]string{n: ""})
	}
	if err := os.Symlink(filepath.Join(dev, "nvme1n1"), filepath.Join(dev, "xvdb")); err != nil {
		t.Fatal(err)
	}
	swaps := filepath.Join(t.TempDir(), "swaps")
	os.WriteFile(swaps, []byte("Filename Type Size Used Priority\n"), 0o644)
	blank := filepath.Join(t.TempDir(), "blank")
	os.WriteFile(blank, nil, 0o644)
	if err := os.Truncate(blank, 1<<30); err != nil { // sparse, the size sysfs reports
		t.Fatal(err)
	}
	d := &Discoverer{
		SysRoot: sys, DevRoot: dev, SwapsPath: swaps,
		Mounts: func() ([]*mountinfo.Info, error) {
			return []*mountinfo.Info{{Major: 259, Minor: 1, Mountpoint: "/", Source: "/dev/nvme0n1p1", FSType: "xfs"}}, nil
		},
		NVMeName: func(p string) (string, error) {
			if filepath.Base(p) == "nvme0n1" {
				return "/dev/xvda", nil
			}
			return "", os.ErrNotExist
		},
		Open: func(string) (*os.File, error) { return os.Open(blank) },
	}
	inv, err := d.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Disks) != 3 {
		t.Fatalf("disks: %+v", inv.Disks)
	}
	root, data, store := inv.Disks[0], inv.Disks[1], inv.Disks[2]
	if !root.Root || root.Kind != KindEBS || root.MappingName != "/dev/xvda" || len(root.Partitions) != 1 || root.VolumeID != "vol-0aaaa" {
		t.Errorf("root disk: %+v", root)
	}
	if data.Root || data.Kind != KindEBS || data.VolumeID != "vol-0123456789abcdef0" || data.MappingName != "/dev/xvdb" || data.Size != 1<<30 {
		t.Errorf("data disk: %+v", data)
	}
	if store.Kind != KindInstanceStore || len(store.Holders) != 1 {
		t.Errorf("instance store: %+v", store)
	}
	if !data.Probe.Blank() || data.Probe.NonZero || data.ProbeErr != "" {
		t.Errorf("probe of a zero file: %+v", data.Probe)
	}
}
