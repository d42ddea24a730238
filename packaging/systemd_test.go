package packaging_test

import (
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSystemdUnitsHardened checks the sandbox of each unit directive by
// directive: what it may not do, and the little each may.
func TestSystemdUnitsHardened(t *testing.T) {
	const agent, boot = "systemd/joiner-agent.service", "systemd/joiner-bootstrap.service"
	units := map[string]map[string]map[string][]string{agent: unit(t, agent), boot: unit(t, boot)}
	both := func(key, val string) [][3]string { return [][3]string{{agent, key, val}, {boot, key, val}} }
	var rows [][3]string // unit, [Service] key, value it must have
	for _, kv := range [][2]string{
		{"NoNewPrivileges", "yes"}, {"AmbientCapabilities", ""}, {"ProtectHome", "yes"}, {"PrivateTmp", "yes"},
		{"PrivateMounts", "yes"}, {"ProtectKernelModules", "yes"}, {"ProtectKernelLogs", "yes"},
		{"ProtectControlGroups", "yes"}, {"ProtectClock", "yes"}, {"ProtectHostname", "yes"},
		{"ProtectProc", "invisible"}, {"RestrictNamespaces", "yes"}, {"RestrictRealtime", "yes"},
		{"RestrictSUIDSGID", "yes"}, {"LockPersonality", "yes"}, {"MemoryDenyWriteExecute", "yes"},
		{"SystemCallArchitectures", "native"}, {"SystemCallErrorNumber", "EPERM"},
	} {
		rows = append(rows, both(kv[0], kv[1])...)
	}
	rows = append(rows,
		// The agent: no capabilities, nothing writable, no devices, TCP and
		// the notify socket only.
		[3]string{agent, "CapabilityBoundingSet", ""},
		[3]string{agent, "ProtectSystem", "strict"},
		[3]string{agent, "PrivateDevices", "yes"},
		[3]string{agent, "ProtectKernelTunables", "yes"},
		[3]string{agent, "RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"},
		[3]string{agent, "SystemCallFilter", "~@clock @cpu-emulation @debug @module @mount @obsolete @privileged @raw-io @reboot @resources @swap"},
		[3]string{agent, "UMask", "0077"},
		// Bootstrap: CAP_SYS_ADMIN for the NVMe identify and md ioctls,
		// CAP_MKNOD for mdadm's device nodes; /usr, /boot and /etc
		// read-only but for its own two directories; no IP; no mount calls
		// (systemd mounts). The system call filters are deny lists, which
		// systemd older than 239 can ignore safely (see the units).
		[3]string{boot, "CapabilityBoundingSet", "CAP_SYS_ADMIN CAP_MKNOD"},
		[3]string{boot, "ProtectSystem", "full"},
		[3]string{boot, "ReadWriteDirectories", "/etc/joiner /etc/systemd/system"},
		[3]string{boot, "RestrictAddressFamilies", "AF_UNIX AF_NETLINK AF_INET"},
		[3]string{boot, "IPAddressDeny", "any"},
		[3]string{boot, "IPAddressAllow", "169.254.169.254"},
		[3]string{boot, "SystemCallFilter", "~@clock @cpu-emulation @debug @module @mount @obsolete @raw-io @reboot @resources @swap"},
	)
	for _, r := range rows {
		t.Run(strings.TrimPrefix(r[0], "systemd/")+"/"+r[1]+"="+r[2], func(t *testing.T) {
			got := units[r[0]]["Service"][r[1]]
			if !slices.Contains(got, r[2]) {
				t.Errorf("[Service] %s = %q, want a line %s=%s", r[1], got, r[1], r[2])
			}
		})
	}
	// Nothing undoes the sandbox.
	for path, u := range units {
		for _, key := range []string{"User", "DynamicUser", "AmbientCapabilities", "CapabilityBoundingSet", "SystemCallFilter",
			"RestrictAddressFamilies", "ReadWritePaths", "ReadWriteDirectories", "PrivateNetwork", "PrivateDevices", "DeviceAllow"} {
			for _, v := range u["Service"][key] {
				if strings.Contains(v, "CAP_SYS_MODULE") || strings.Contains(v, "CAP_DAC_OVERRIDE") || strings.Contains(v, "CAP_NET_ADMIN") ||
					strings.Contains(v, "@mount") && !strings.HasPrefix(v, "~") || v == "/" || v == "/etc" {
					t.Errorf("%s: %s=%s widens the sandbox", path, key, v)
				}
			}
		}
		for key, vals := range u["Service"] {
			for _, v := range vals {
				prefix := v[:len(v)-len(strings.TrimLeft(v, "-@:+!|"))] // systemd.service "Command lines"
				if strings.HasPrefix(key, "Exec") && strings.ContainsAny(prefix, "+!") {
					t.Errorf("%s: %s=%s runs outside the sandbox", path, key, v)
				}
			}
		}
		for _, v := range u["Service"]["SystemCallFilter"] {
			if !strings.HasPrefix(v, "~") {
				t.Errorf("%s: SystemCallFilter=%s is an allow list; systemd before 239 does not know @system-service and would stop the service", path, v)
			}
		}
		if u["Service"]["PermissionsStartOnly"] != nil {
			t.Errorf("%s: PermissionsStartOnly runs commands outside the sandbox", path)
		}
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestSystemdUnitsExposure runs `systemd-analyze security --offline` on the
// units. The bar is 5.0 for the agent; the units rate 1.6 and 2.2
// with systemd 252, and the limits below leave room for the checks newer
// systemd versions add.
func TestSystemdUnitsExposure(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: systemd-analyze security not run")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	for _, c := range []struct {
		unit string
		max  float64
	}{
		{"systemd/joiner-agent.service", 2.5},
		{"systemd/joiner-bootstrap.service", 3.0},
	} {
		t.Run(c.unit, func(t *testing.T) {
			out, err := run(t, ".", nil, "systemd-analyze", "security", "--offline=yes", "--no-pager", c.unit)
			m := exposureRE.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("systemd-analyze security --offline=yes %s: %v, no exposure level in:\n%s", c.unit, err, out)
			}
			got, _ := strconv.ParseFloat(m[1], 64)
			t.Logf("%s: exposure %.1f", c.unit, got)
			if got > c.max {
				t.Errorf("%s: exposure %.1f > %.1f:\n%s", c.unit, got, c.max, out)
			}
		})
	}
}
