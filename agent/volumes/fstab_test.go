package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpdateFstab(t *testing.T) {
	const admin = "# /etc/fstab\nUUID=aaa / ext4 defaults 0 1\n"
	for _, tc := range []struct {
		name, before, where, line, after, err string
		wrote                                 bool
	}{
		{name: "no file", where: "/data1", line: "UUID=u1 /data1 xfs nofail 0 0", wrote: true,
			after: fstabBegin + "\nUUID=u1 /data1 xfs nofail 0 0\n" + fstabEnd + "\n"},
		{name: "admin lines kept", before: admin, where: "/data1", line: "UUID=u1 /data1 xfs nofail 0 0", wrote: true,
			after: admin + fstabBegin + "\nUUID=u1 /data1 xfs nofail 0 0\n" + fstabEnd + "\n"},
		{name: "same line: no write", before: admin + fstabBegin + "\nUUID=u1 /data1 xfs nofail 0 0\n" + fstabEnd + "\n",
			where: "/data1", line: "UUID=u1 /data1 xfs nofail 0 0",
			after: admin + fstabBegin + "\nUUID=u1 /data1 xfs nofail 0 0\n" + fstabEnd + "\n"},
		{name: "replaced in place, others kept", before: fstabBegin + "\nUUID=u1 /data1 xfs a 0 0\nUUID=u2 /data2 xfs a 0 0\n" + fstabEnd + "\n# after\n",
			where: "/data1", line: "UUID=u9 /data1 xfs b 0 0", wrote: true,
			after: fstabBegin + "\nUUID=u9 /data1 xfs b 0 0\nUUID=u2 /data2 xfs a 0 0\n" + fstabEnd + "\n# after\n"},
		{name: "the admin's own entry wins", before: admin + "/dev/sdb /data1 ext4 defaults 0 2\n", where: "/data1", line: "UUID=u1 /data1 xfs nofail 0 0",
			err: "line 3 already mounts /data1"},
		{name: "damaged block", before: fstabBegin + "\n", where: "/data1", line: "x /data1 xfs d 0 0", err: "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fstab")
			if tc.before != "" {
				os.WriteFile(p, []byte(tc.before), 0o644)
			}
			wrote, err := updateFstab(p, tc.where, tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if b, _ := os.ReadFile(p); string(b) != tc.before {
					t.Errorf("file changed on error:\n%s", b)
				}
				return
			}
			if err != nil || wrote != tc.wrote {
				t.Fatalf("wrote=%v err=%v, want wrote=%v", wrote, err, tc.wrote)
			}
			if b, _ := os.ReadFile(p); string(b) != tc.after {
				t.Errorf("fstab:\n%s\nwant:\n%s", b, tc.after)
			}
		})
	}
}

func TestFstabLine(t *testing.T) {
	for _, tc := range []struct {
		u    Unit
		want string
	}{
		{Unit{What: "/dev/disk/by-uuid/u1", Where: "/data1", Type: "xfs", Options: "defaults,nofail"}, "UUID=u1 /data1 xfs defaults,nofail 0 0"},
		{Unit{What: "/dev/disk/by-uuid/u1", Where: "/data1", Type: "ext4", Options: "defaults"}, "UUID=u1 /data1 ext4 defaults 0 2"},
		{Unit{What: "/mnt/is/var_lib_kubelet", Where: "/var/lib/kubelet", Type: "none", Options: "bind,nofail", After: "/mnt/is"},
			"/mnt/is/var_lib_kubelet /var/lib/kubelet none bind,nofail,x-systemd.requires-mounts-for=/mnt/is 0 0"},
	} {
		if got := tc.u.FstabLine(); got != tc.want {
			t.Errorf("FstabLine() = %q, want %q", got, tc.want)
		}
	}
}
