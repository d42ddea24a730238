package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/bootstrap"
)

func init() { addCommand(newBootstrapCmd) }

// newBootstrapCmd is `joiner bootstrap`: the first-boot step user data runs.
func newBootstrapCmd(g *globals) *cobra.Command {
	var (
		from, out  string
		dryRun     bool
		startAgent bool
		agentUnit  string
		v          config.Volumes
	)
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "First-boot step: mount data volumes safely, write the agent config, start the agent",
		Long: `bootstrap lays out the instance's data volumes, writes the agent's config and
enables and starts the agent (systemd, over D-Bus).

A disk is formatted only when it is blank: no filesystem, RAID, LVM, LUKS,
swap or partition-table signature (pure-Go probe plus blkid -p and wipefs -n),
unused, and zero in its first and last MiB. Anything else is left alone and
reported. Blank EBS volumes mount at /data1..N in block-device-mapping order
through systemd .mount units by UUID (nofail). Re-running changes nothing.

Only volumes Joiner attached at launch are formatted, and only before the
first successful setup. The first run on an instance records them by EBS
volume ID (NVMe serial) in <state-dir>/launch.json, keeping EBS volumes the
launch block-device mapping in IMDS lists when IMDS is reachable; later runs
mount those and format nothing but instance-store disks. Any other EBS
volume (a CSI volume still attached after a reboot) is never touched.`,
		Example: `  joiner bootstrap --dry-run
  joiner bootstrap --devices /dev/xvdb,/dev/xvdc --fs-type ext4
  joiner bootstrap --instance-store raid0 --bind-dirs /var/lib/kubelet,/var/lib/containerd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			var cfg config.Config
			if from != "" {
				if cfg, err = config.Load(from); err != nil {
					return &errExitCode{code: 2, err: err}
				}
			}
			f := cmd.Flags()
			set := func(name string, dst *string, val string) {
				if f.Changed(name) {
					*dst = val
				}
			}
			cv := &cfg.Volumes
			if f.Changed("devices") {
				cv.Devices = v.Devices
			}
			set("fs-type", &cv.FSType, v.FSType)
			set("mount-prefix", &cv.MountPrefix, v.MountPrefix)
			set("mount-root", &cv.MountRoot, v.MountRoot)
			set("unit-dir", &cv.UnitDir, v.UnitDir)
			set("state-dir", &cv.StateDir, v.StateDir)
			set("device-timeout", &cv.DeviceTimeout, v.DeviceTimeout)
			set("instance-store", &cv.InstanceStore.Layout, v.InstanceStore.Layout)
			set("persist", &cv.Persist, v.Persist)
			set("fstab", &cv.FstabPath, v.FstabPath)
			if f.Changed("mount-options") {
				cv.MountOptions = v.MountOptions
			}
			if f.Changed("bind-dirs") {
				cv.InstanceStore.BindDirs = v.InstanceStore.BindDirs
			}
			if f.Changed("allow-nonzero") {
				cv.AllowNonZero = v.AllowNonZero
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = bootstrap.Run(ctx, bootstrap.Options{
				Config: cfg, ConfigPath: out, DryRun: dryRun, Out: cmd.OutOrStdout(),
				StartAgent: startAgent, AgentUnit: agentUnit, Log: log,
			})
			if err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "start from this agent config file (JSON) instead of the defaults; flags override it")
	f.StringVar(&out, "agent-config", config.DefaultPath, "where to write the agent config")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be done and change nothing")
	f.BoolVar(&startAgent, "start-agent", true, "enable and start the agent's systemd unit")
	f.StringVar(&agentUnit, "agent-unit", bootstrap.DefaultAgentUnit, "the agent's systemd unit")
	f.StringSliceVar(&v.Devices, "devices", nil, "data volumes in block-device-mapping order (paths, links or mapping names such as /dev/xvdb); default: every EBS data volume in mapping-name order")
	f.StringVar(&v.FSType, "fs-type", "xfs", "filesystem for blank volumes: xfs or ext4")
	f.StringVar(&v.MountPrefix, "mount-prefix", "/data", "data volumes mount at <prefix>1..N")
	f.StringVar(&v.MountRoot, "mount-root", "", "prefix for every mount point (testing)")
	f.StringSliceVar(&v.MountOptions, "mount-options", []string{"defaults", "noatime"}, "mount options (nofail and x-systemd.device-timeout are always added)")
	f.StringVar(&v.DeviceTimeout, "device-timeout", "10s", "x-systemd.device-timeout for the mount units")
	f.StringVar(&v.UnitDir, "unit-dir", "/etc/systemd/system", "where .mount units are written")
	f.StringVar(&v.StateDir, "state-dir", "/var/lib/joiner", "where the format journal lives")
	f.StringVar(&v.InstanceStore.Layout, "instance-store", config.LayoutNone, "instance-store NVMe layout: none, raid0 or separate")
	f.StringSliceVar(&v.InstanceStore.BindDirs, "bind-dirs", nil, "with --instance-store raid0: directories bind-mounted onto the instance store (e.g. /var/lib/kubelet,/var/lib/containerd)")
	f.StringVar(&v.Persist, "persist", config.PersistUnits, "how mounts survive a reboot: units (systemd .mount units) or fstab (UUID= lines in a block joiner owns)")
	f.StringVar(&v.FstabPath, "fstab", "/etc/fstab", "the fstab for --persist fstab")
	f.BoolVar(&v.AllowNonZero, "allow-nonzero", false, "allow formatting disks with no signature but non-zero bytes in their first or last MiB")
	return cmd
}
