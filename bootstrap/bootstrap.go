// Package bootstrap is the first-boot program (`joiner bootstrap`) that
// rendered user data runs: it lays out the data volumes, writes the agent's
// config and enables and starts the agent.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/agent/volumes"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// DefaultAgentUnit is the agent's systemd unit (shipped in packaging/).
const DefaultAgentUnit = "joiner-agent.service"

// Systemd is what bootstrap needs from systemd.
type Systemd interface {
	volumes.SystemdManager
	Close()
}

// Options configure Run.
type Options struct {
	Config     config.Config // the agent config to write; defaults are applied
	ConfigPath string        // where to write it (default config.DefaultPath)
	DryRun     bool          // print the plan to Out, change nothing
	Out        io.Writer     // where the dry-run plan and the summary go
	StartAgent bool          // enable and start AgentUnit
	AgentUnit  string        // default DefaultAgentUnit
	Log        *zap.Logger

	// Seams for tests; nil means the real thing.
	Volumes        volumes.Options                                              // Runner, Discoverer, LaunchMapping (default IMDS), ...
	Setup          func(context.Context, volumes.Options) (volumes.Plan, error) // default volumes.Setup
	SystemdRunning func() bool                                                  // default volumes.SystemdRunning
	Connect        func(context.Context) (Systemd, error)                       // default D-Bus
}

// ErrNoSystemd is returned (wrapped) when the agent must be started but
// systemd is not running.
var ErrNoSystemd = errors.New("systemd is not running on this machine (no /run/systemd/system)")

func (o *Options) defaults() {
	if o.ConfigPath == "" {
		o.ConfigPath = config.DefaultPath
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.AgentUnit == "" {
		o.AgentUnit = DefaultAgentUnit
	}
	defaults.Zero(&o.Log, zap.NewNop())
	if o.Setup == nil {
		o.Setup = volumes.Setup
	}
	if o.SystemdRunning == nil {
		o.SystemdRunning = volumes.SystemdRunning
	}
	if o.Connect == nil {
		o.Connect = func(ctx context.Context) (Systemd, error) { return volumes.NewDBusSystemd(ctx) }
	}
}

// Run does the first-boot work. Disks that hold data are left alone and
// reported, not treated as failures; anything that fails is an error naming
// the step.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	log := o.Log.Named("bootstrap")
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid agent config: %w", err)
	}
	running := o.SystemdRunning()
	var sd Systemd
	if running && !o.DryRun {
		var err error
		if sd, err = o.Connect(ctx); err != nil {
			return fmt.Errorf("connecting to systemd: %w", err)
		}
		defer sd.Close()
	}

	vo := o.Volumes
	vo.Config, vo.AllowFormat, vo.DryRun, vo.Log = cfg.Volumes, true, o.DryRun, log.Named("volumes")
	// Bootstrap records the volumes Joiner attached at launch (first boot
	// only) and formats no other; see volumes.DecideLaunch.
	vo.RecordLaunch = true
	if vo.LaunchMapping == nil {
		vo.LaunchMapping = defaultLaunchMapping
	}
	if sd != nil {
		vo.Systemd = sd
	}
	plan, err := o.Setup(ctx, vo)
	printPlan(o.Out, plan, o.DryRun)
	if err != nil {
		return fmt.Errorf("setting up data volumes: %w", err)
	}
	for _, v := range plan.Volumes {
		if v.State == volumes.StateHandsOff || v.State == volumes.StateMissing {
			log.Warn("data volume left alone", zap.String("mount", v.Target), zap.String("device", v.Device), zap.String("reason", v.Reason))
		}
	}

	if o.DryRun {
		fmt.Fprintf(o.Out, "would write agent config %s\n", o.ConfigPath)
		if o.StartAgent {
			fmt.Fprintf(o.Out, "would enable and start %s\n", o.AgentUnit)
		}
		return nil
	}
	if err := config.Save(o.ConfigPath, cfg); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "wrote agent config %s\n", o.ConfigPath)
	if !o.StartAgent {
		return nil
	}
	if !running {
		return fmt.Errorf("starting %s: %w; start `joiner agent --config %s` under this machine's supervisor, or pass --start-agent=false", o.AgentUnit, ErrNoSystemd, o.ConfigPath)
	}
	if err := sd.EnableAndStart(ctx, o.AgentUnit, o.AgentUnit); err != nil {
		return fmt.Errorf("enabling and starting %s: %w", o.AgentUnit, err)
	}
	fmt.Fprintf(o.Out, "enabled and started %s\n", o.AgentUnit)
	return nil
}

func printPlan(w io.Writer, p volumes.Plan, dry bool) {
	for _, n := range p.Notes {
		fmt.Fprintf(w, "launch record: %s\n", n)
	}
	for _, v := range p.Volumes {
		fmt.Fprintf(w, "volume %s: %s %s (%s)\n", v.Target, v.State, v.Device, v.Reason)
	}
	for _, v := range p.Ignored {
		fmt.Fprintf(w, "disk %s: %s (%s)\n", v.Device, v.State, v.Reason)
	}
	if !dry {
		return // the executor logs each action it takes
	}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "would %s\n", a)
	}
}
