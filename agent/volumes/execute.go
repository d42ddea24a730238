package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/joiner-dev/joiner/internal/atomicfile"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// Runner runs an external command (mkfs, mdadm, mount, blkid, ...).
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec; stdin is empty.
type ExecRunner struct{}

// Run runs name with args and returns its combined output. A non-zero exit
// is an error wrapping *exec.ExitError and naming the command and its output.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// SystemdManager is the part of systemd the executor uses.
type SystemdManager interface {
	// Reload is `systemctl daemon-reload`.
	Reload(ctx context.Context) error
	// EnableAndStart enables the unit file at path and starts unit name,
	// waiting for the start job to finish.
	EnableAndStart(ctx context.Context, path, name string) error
	// Start starts unit name (e.g. one generated from fstab) and waits.
	Start(ctx context.Context, name string) error
}

// CrossCheck returns a second-opinion probe built on blkid -p and wipefs -n.
// It reports every signature either tool sees. A tool that is not installed
// is skipped; any other failure is an error (and the disk counts as not blank).
func CrossCheck(r Runner) func(ctx context.Context, path string) ([]string, error) {
	return func(ctx context.Context, path string) ([]string, error) {
		var found []string
		out, err := r.Run(ctx, "blkid", "-p", "-o", "export", path)
		var ee *exec.ExitError
		switch {
		case err == nil:
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "TYPE=") || strings.HasPrefix(l, "PTTYPE=") {
					found = append(found, "blkid: "+l)
				}
			}
			if len(found) == 0 {
				found = append(found, "blkid: "+strings.Join(strings.Fields(string(out)), " "))
			}
		case errors.As(err, &ee) && ee.ExitCode() == 2: // nothing found
		case errors.Is(err, exec.ErrNotFound):
		default:
			return found, fmt.Errorf("blkid -p %s: %w", path, err)
		}
		out, err = r.Run(ctx, "wipefs", "-n", "--noheadings", "-O", "TYPE,OFFSET", path)
		switch {
		case err == nil:
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					found = append(found, "wipefs: "+strings.Join(strings.Fields(l), " at "))
				}
			}
		case errors.Is(err, exec.ErrNotFound):
		default:
			return found, fmt.Errorf("wipefs -n %s: %w", path, err)
		}
		return found, nil
	}
}

// Executor carries out a Plan. It re-probes every device right before a
// destructive step and refuses if anything appeared since planning.
type Executor struct {
	Runner      Runner
	Systemd     SystemdManager // nil: mount directly with mount(8)
	JournalPath string
	Journal     *Journal
	// Recheck says why path must not be formatted now, or "" (default:
	// the pure-Go probe plus CrossCheck(Runner)).
	Recheck func(ctx context.Context, path string) (string, error)
	// CheckFS verifies, before a direct mount by device path, that the
	// device holds the filesystem with the given UUID (default: the probe).
	CheckFS func(path, uuid string) error
	// Serial reads the serial of the disk at path right before mkfs, so a
	// format planned for one disk never lands on another that took its path
	// (default: sysfs, as Discoverer.Serial).
	Serial func(path string) (string, error)
	// AllowNonZero is config.Volumes.AllowNonZero, applied by the default Recheck.
	AllowNonZero bool
	Log          *zap.Logger

	// afterFormat is a test hook run after mkfs returned and before the
	// journal records the format as finished.
	afterFormat func(Action)
	reloaded    bool
	changed     bool
}

func (e *Executor) recheck(ctx context.Context, path string) (string, error) {
	if e.Recheck != nil {
		return e.Recheck(ctx, path)
	}
	res, err := probePath(path)
	if err != nil {
		return "", err
	}
	ext, err := CrossCheck(e.Runner)(ctx, path)
	if err != nil {
		return "", err
	}
	return notBlank(Disk{Probe: res, External: ext}, e.AllowNonZero), nil
}

// Apply runs the plan's actions. A failed action skips the rest of its group
// and the others go on; the error joins every failure.
func (e *Executor) Apply(ctx context.Context, p Plan) error {
	defaults.Zero(&e.Log, zap.NewNop())
	if e.Journal == nil {
		e.Journal = &Journal{}
	}
	failed := map[string]bool{}
	var errs []error
	for _, a := range p.Actions {
		if failed[a.Group] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		log := e.Log.With(zap.String("op", string(a.Op)), zap.String("mount", a.Group), zap.String("device", a.Device))
		if err := e.do(ctx, a); err != nil {
			failed[a.Group] = true
			log.Error("volume action failed", zap.Error(err))
			errs = append(errs, fmt.Errorf("%s: %w", a.Group, err))
			continue
		}
		log.Info("volume action done", zap.String("action", a.String()))
	}
	if e.Systemd != nil && e.changed && !e.reloaded {
		// Units changed under mounts that were already up: let systemd see them.
		if err := e.Systemd.Reload(ctx); err != nil {
			errs = append(errs, fmt.Errorf("systemd daemon-reload: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (e *Executor) do(ctx context.Context, a Action) error {
	switch a.Op {
	case OpCreateRAID0:
		return e.createRAID0(ctx, a)
	case OpAssemble:
		args := append([]string{"--assemble", "/dev/md/" + a.Name}, a.Members...)
		if _, err := e.Runner.Run(ctx, "mdadm", args...); err != nil {
			return fmt.Errorf("assembling RAID0: %w", err)
		}
		return nil
	case OpFormat:
		return e.format(ctx, a)
	case OpVerifyFS:
		return e.verify(ctx, a)
	case OpWriteFstab:
		wrote, err := updateFstab(a.Unit.Path, a.Unit.Where, a.Unit.FstabLine())
		if err != nil {
			return fmt.Errorf("updating %s: %w", a.Unit.Path, err)
		}
		e.changed = e.changed || wrote
		return nil
	case OpWriteUnit:
		wrote, err := atomicfile.WriteIfChanged(a.Unit.Path, a.Unit.Content(), 0o644)
		if err != nil {
			return fmt.Errorf("writing unit: %w", err)
		}
		e.changed = e.changed || wrote
		return nil
	case OpMount:
		return e.mount(ctx, a)
	}
	return fmt.Errorf("unknown action %q", a.Op)
}

func (e *Executor) createRAID0(ctx context.Context, a Action) error {
	for _, m := range a.Members {
		why, err := e.recheck(ctx, m)
		if err != nil {
			return fmt.Errorf("re-probing RAID member %s: %w", m, err)
		}
		if why != "" {
			return fmt.Errorf("refusing to create RAID0: member %s %s", m, why)
		}
	}
	args := []string{"--create", "/dev/md/" + a.Name, "--run", "--level=0", "--chunk=256", "--homehost=any",
		"--name=" + a.Name, fmt.Sprintf("--raid-devices=%d", len(a.Members))}
	if _, err := e.Runner.Run(ctx, "mdadm", append(args, a.Members...)...); err != nil {
		return fmt.Errorf("creating RAID0: %w", err)
	}
	return nil
}

func (e *Executor) format(ctx context.Context, a Action) error {
	if a.Serial != "" {
		serial := e.Serial
		if serial == nil {
			serial = (&Discoverer{}).Serial
		}
		got, err := serial(a.Device)
		if err != nil {
			return fmt.Errorf("reading the serial of %s (planned for serial %s) before mkfs: %w", a.Device, a.Serial, err)
		}
		if got != a.Serial {
			return fmt.Errorf("refusing to format %s: it is now the disk with serial %q, not the planned serial %s (%s)", a.Device, got, a.Serial, a.Key)
		}
	}
	why, err := e.recheck(ctx, a.Device)
	if err != nil {
		return fmt.Errorf("re-probing %s before mkfs: %w", a.Device, err)
	}
	if why != "" {
		return fmt.Errorf("refusing to format %s: it %s", a.Device, why)
	}
	entry := JournalEntry{Key: a.Key, Device: a.Device, FSType: a.FSType, UUID: a.UUID, Phase: PhaseFormatting}
	e.Journal.Set(entry)
	if err := SaveJournal(e.JournalPath, *e.Journal); err != nil {
		return err
	}
	var args []string
	switch a.FSType {
	case "xfs":
		args = []string{"mkfs.xfs", "-q", "-m", "uuid=" + a.UUID, a.Device} // never -f: mkfs.xfs refuses existing signatures too
	case "ext4":
		args = []string{"mkfs.ext4", "-q", "-U", a.UUID, a.Device}
	default:
		return fmt.Errorf("unsupported filesystem type %q", a.FSType)
	}
	if _, err := e.Runner.Run(ctx, args[0], args[1:]...); err != nil {
		return fmt.Errorf("formatting: %w", err)
	}
	if e.afterFormat != nil {
		e.afterFormat(a)
	}
	entry.Phase = PhaseFormatted
	e.Journal.Set(entry)
	return SaveJournal(e.JournalPath, *e.Journal)
}

func (e *Executor) verify(ctx context.Context, a Action) error {
	var args []string
	switch a.FSType {
	case "xfs":
		args = []string{"xfs_repair", "-n", a.Device}
	case "ext4":
		args = []string{"e2fsck", "-f", "-n", a.Device}
	default:
		return fmt.Errorf("unsupported filesystem type %q", a.FSType)
	}
	if _, err := e.Runner.Run(ctx, args[0], args[1:]...); err != nil {
		return fmt.Errorf("the %s filesystem %s on %s from an interrupted format does not check clean; left alone (inspect it; to start over, wipe it by hand): %w", a.FSType, a.UUID, a.Device, err)
	}
	e.Journal.Set(JournalEntry{Key: a.Key, Device: a.Device, FSType: a.FSType, UUID: a.UUID, Phase: PhaseFormatted})
	return SaveJournal(e.JournalPath, *e.Journal)
}

// mountedAt returns the mountinfo entry at target, if any.
func mountedAt(target string) (*mountinfo.Info, error) {
	infos, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	if err != nil || len(infos) == 0 {
		return nil, err
	}
	return infos[len(infos)-1], nil
}

func (e *Executor) mount(ctx context.Context, a Action) error {
	u := a.Unit
	bind := u.Type == "none"
	mi, err := mountedAt(u.Where)
	if err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	if mi != nil {
		if bind {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Stat(a.Device, &st); err != nil {
			return fmt.Errorf("stat %s: %w", a.Device, err)
		}
		if uint32(mi.Major) == unix.Major(uint64(st.Rdev)) && uint32(mi.Minor) == unix.Minor(uint64(st.Rdev)) {
			return nil
		}
		return fmt.Errorf("%s is already a mount of %s, not of %s", u.Where, mi.Source, a.Device)
	}
	if bind {
		if err := os.MkdirAll(u.What, 0o755); err != nil {
			return fmt.Errorf("creating bind source: %w", err)
		}
	}
	if e.Systemd != nil {
		if e.changed && !e.reloaded {
			if err := e.Systemd.Reload(ctx); err != nil {
				return fmt.Errorf("systemd daemon-reload: %w", err)
			}
			e.reloaded = true
		}
		start := func() error { return e.Systemd.EnableAndStart(ctx, u.Path, u.Name) }
		if u.Fstab {
			start = func() error { return e.Systemd.Start(ctx, u.Name) } // generated units cannot be enabled
		}
		if err := start(); err != nil {
			return fmt.Errorf("starting %s: %w", u.Name, err)
		}
		return nil
	}
	if !bind && a.UUID != "" {
		// Mount by device path only what carries the expected filesystem
		// (the unit itself mounts by UUID).
		check := e.CheckFS
		if check == nil {
			check = checkUUID
		}
		if err := check(a.Device, a.UUID); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(u.Where, 0o755); err != nil {
		return fmt.Errorf("creating mount point: %w", err)
	}
	args := []string{"-t", u.Type, "-o", u.Options, a.Device, u.Where}
	if bind {
		args = []string{"--bind", u.What, u.Where}
	}
	if _, err := e.Runner.Run(ctx, "mount", args...); err != nil {
		return fmt.Errorf("mounting: %w", err)
	}
	return nil
}

// pureRecheck is the recheck without blkid/wipefs.
func pureRecheck(allowNonZero bool) func(context.Context, string) (string, error) {
	return func(_ context.Context, path string) (string, error) {
		return probeRecheck(path, allowNonZero)
	}
}

func probeRecheck(path string, allowNonZero bool) (string, error) {
	res, err := probePath(path)
	if err != nil {
		return "", err
	}
	return notBlank(Disk{Probe: res}, allowNonZero), nil
}

// probePath runs the signature probe over the whole device at path.
func probePath(path string) (ProbeResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return ProbeResult{}, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return ProbeResult{}, fmt.Errorf("sizing %s: %w", path, err)
	}
	return Probe(f, size)
}

// checkUUID verifies that path holds a filesystem with UUID uuid.
func checkUUID(path, uuid string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Seek(0, 2)
	if err != nil {
		return fmt.Errorf("sizing %s: %w", path, err)
	}
	res, err := Probe(f, size)
	if err != nil {
		return fmt.Errorf("probing %s: %w", path, err)
	}
	if fs, ok := res.Filesystem(); !ok || fs.UUID != uuid {
		return fmt.Errorf("%s does not hold filesystem %s (probe: %s); not mounting it", path, uuid, describe(res.Signatures))
	}
	return nil
}
