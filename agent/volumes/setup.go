package volumes

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/agent/config"
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
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Discoverer.Log == nil {
		o.Discoverer.Log = o.Log
	}
	if o.NewUUID == nil {
		o.NewUUID = uuid.NewString
	}
}

// JournalPath is the journal's path for cfg.
func JournalPath(cfg config.Volumes) string { return filepath.Join(cfg.StateDir, JournalFile) }

// Setup discovers the disks, plans their layout and, unless DryRun, carries
// the plan out. It returns the plan (for printing) and every failure joined.
func Setup(ctx context.Context, o Options) (Plan, error) {
	o.defaults()
	jpath := JournalPath(o.Config)
	journal, err := LoadJournal(jpath)
	if err != nil {
		return Plan{}, err
	}
	extra := append(append([]string{}, o.Config.Devices...), o.Config.InstanceStore.Devices...)
	inv, err := o.Discoverer.Discover(ctx, extra)
	if err != nil {
		return Plan{}, fmt.Errorf("discovering block devices: %w", err)
	}
	plan := PlanVolumes(PlanInput{Inventory: inv, Config: o.Config, Journal: journal, AllowFormat: o.AllowFormat, NewUUID: o.NewUUID})
	for _, v := range plan.Volumes {
		o.Log.Info("data volume", zap.String("mount", v.Target), zap.String("device", v.Device), zap.String("state", v.State), zap.String("reason", v.Reason))
	}
	if o.DryRun {
		return plan, nil
	}
	ex := &Executor{Runner: o.Runner, Systemd: o.Systemd, JournalPath: jpath, Journal: &journal, Log: o.Log, afterFormat: o.afterFormat,
		AllowNonZero: o.Config.AllowNonZero}
	if o.Config.SkipCrossCheck {
		ex.Recheck = pureRecheck(o.Config.AllowNonZero)
	}
	return plan, ex.Apply(ctx, plan)
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
