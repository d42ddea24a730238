package volumes

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// Options wire Setup and Recheck to the machine. Zero values mean the real
// thing: sysfs/dev/mountinfo discovery, os/exec, direct mounts (no systemd).
type Options struct {
	Config      config.Volumes // defaults applied (config.Config.WithDefaults)
	AllowFormat bool
	DryRun      bool
	Runner      Runner
	Systemd     SystemdManager
	Discoverer  *Discoverer
	NewUUID     func() string
	Log         *zap.Logger

	// RecordLaunch: this is bootstrap. When the instance has no launch
	// record, Setup makes one (StateDir/launch.json) before formatting
	// anything, and marks it when the setup succeeded. Without it (the
	// agent) no record is made or changed.
	RecordLaunch bool
	// LaunchMapping reads the block-device-mapping names of the EBS volumes
	// the instance was launched with and, if it can, the instance ID (IMDS
	// meta-data/block-device-mapping/ebsN). It is called only when a launch
	// record is to be made. nil or an error: unknown.
	LaunchMapping func(ctx context.Context) (mappings []string, instanceID string, err error)
	// KubeletCert is the file whose existence shows a kubelet joined a
	// cluster from this root disk (default DefaultKubeletCert).
	KubeletCert string
	// Now is the clock for the record's timestamps (default time.Now).
	Now func() time.Time

	afterFormat func(Action) // test hook, see Executor.afterFormat
}

func (o *Options) defaults() {
	if o.Runner == nil {
		o.Runner = ExecRunner{}
	}
	if o.Discoverer == nil {
		o.Discoverer = &Discoverer{}
	}
	if o.Discoverer.CrossCheck == nil && !o.Config.SkipCrossCheck {
		o.Discoverer.CrossCheck = CrossCheck(o.Runner)
	}
	defaults.Zero(&o.Log, zap.NewNop())
	if o.Discoverer.Log == nil {
		o.Discoverer.Log = o.Log
	}
	if o.NewUUID == nil {
		o.NewUUID = uuid.NewString
	}
	if o.KubeletCert == "" {
		o.KubeletCert = DefaultKubeletCert
	}
	defaults.Clock(&o.Now)
}

// JournalPath is the journal's path for cfg.
func JournalPath(cfg config.Volumes) string { return filepath.Join(cfg.StateDir, JournalFile) }

// Setup discovers the disks, plans their layout and, unless DryRun, carries
// the plan out. It returns the plan (for printing) and every failure joined.
//
// With RecordLaunch (bootstrap) and no launch record for this instance, the
// record DecideLaunch makes is saved before anything is formatted; once the
// plan was carried out without error it is marked SetupComplete, after
// which no boot formats anything but instance-store disks.
func Setup(ctx context.Context, o Options) (Plan, error) {
	o.defaults()
	jpath, lpath := JournalPath(o.Config), LaunchPath(o.Config)
	journal, err := LoadJournal(jpath)
	if err != nil {
		return Plan{}, err
	}
	rec, err := LoadLaunchRecord(lpath)
	if err != nil {
		return Plan{}, err
	}
	extra := append(append([]string{}, o.Config.Devices...), o.Config.InstanceStore.Devices...)
	inv, err := o.Discoverer.Discover(ctx, extra)
	if err != nil {
		return Plan{}, fmt.Errorf("discovering block devices: %w", err)
	}
	facts := LocalFacts(o.Discoverer.SysRoot, o.KubeletCert)
	if o.RecordLaunch && !rec.forInstance(facts.InstanceID) {
		facts = o.launchFacts(ctx, facts)
	}
	dec := DecideLaunch(LaunchInput{Record: rec, Journal: journal, Inventory: inv, Config: o.Config, Facts: facts, MayRecord: o.RecordLaunch})
	for _, n := range dec.Notes {
		o.Log.Warn("launch record", zap.String("path", lpath), zap.String("note", n))
	}
	if dec.Write && !o.DryRun {
		r := *dec.Record
		r.RecordedAt = o.Now().UTC()
		if err := SaveLaunchRecord(lpath, r); err != nil {
			return Plan{}, err
		}
		o.Log.Info("launch record written", zap.String("path", lpath), zap.String("source", r.Source), zap.Int("disks", len(r.Disks)), zap.Bool("setupComplete", r.SetupComplete))
		dec.Record = &r
	}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: o.Config, Journal: journal, AllowFormat: o.AllowFormat, NewUUID: o.NewUUID, Launch: dec.Record})
	plan.Notes = dec.Notes
	for _, v := range plan.Volumes {
		o.Log.Info("data volume", zap.String("mount", v.Target), zap.String("device", v.Device), zap.String("state", v.State), zap.String("reason", v.Reason))
	}
	for _, v := range plan.Ignored {
		o.Log.Info("disk not Joiner's", zap.String("device", v.Device), zap.String("reason", v.Reason))
	}
	if o.DryRun {
		return plan, nil
	}
	ex := &Executor{Runner: o.Runner, Systemd: o.Systemd, JournalPath: jpath, Journal: &journal, Log: o.Log, afterFormat: o.afterFormat,
		AllowNonZero: o.Config.AllowNonZero, Serial: o.Discoverer.Serial}
	if o.Config.SkipCrossCheck {
		ex.Recheck = pureRecheck(o.Config.AllowNonZero)
	}
	if err := ex.Apply(ctx, plan); err != nil {
		return plan, err
	}
	if o.RecordLaunch && dec.Record != nil && !dec.Record.SetupComplete {
		r := *dec.Record
		r.SetupComplete, r.CompletedAt = true, o.Now().UTC()
		if err := SaveLaunchRecord(lpath, r); err != nil {
			return plan, fmt.Errorf("marking the first setup complete: %w", err)
		}
		o.Log.Info("first setup complete: from now on only instance-store disks are ever formatted", zap.String("path", lpath))
	}
	return plan, nil
}

// launchFacts adds the launch block-device mapping to f.
func (o *Options) launchFacts(ctx context.Context, f LaunchFacts) LaunchFacts {
	if o.LaunchMapping == nil {
		f.MappingsErr = "no source of the launch block-device mapping"
		return f
	}
	m, id, err := o.LaunchMapping(ctx)
	if err != nil {
		f.MappingsErr = err.Error()
		return f
	}
	if m == nil {
		m = []string{}
	}
	f.Mappings = m
	if f.InstanceID == "" {
		f.InstanceID = id
	}
	return f
}

// Recheck is what `joiner agent` calls at start: re-discover, mount what
// joiner made before, report every volume (log + metrics when m is not nil)
// and never format unless the config says FormatOnAgentStart. For example:
//
//	cfg, err := config.Load(config.DefaultPath)
//	m, err := volumes.NewMetrics(prometheus.DefaultRegisterer)
//	opts := volumes.Options{Config: cfg.Volumes, Log: log.Named("volumes")}
//	if volumes.SystemdRunning() { opts.Systemd, err = volumes.NewDBusSystemd(ctx) } // Close when done
//	plan, err := volumes.Recheck(ctx, opts, m) // plan.Volumes: one status per mount point
//
// Volumes left alone are not errors (they are in plan.Volumes with state
// hands-off, blank or missing); the error joins what failed while acting.
func Recheck(ctx context.Context, o Options, m *Metrics) (Plan, error) {
	o.AllowFormat = o.Config.FormatOnAgentStart
	plan, err := Setup(ctx, o)
	if m != nil {
		m.Observe(plan)
	}
	return plan, err
}
