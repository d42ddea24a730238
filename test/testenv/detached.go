package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrToolsMissing means a binary the control plane needs is not built:
// run `make tools`.
var ErrToolsMissing = errors.New("test control plane tools missing")

// StartDetached runs a control plane outside a test (the demo, the process
// harness) with its data and logs in dir. The caller must call Stop, also
// when an error is returned with a non-nil Env. When a binary is missing the
// error wraps ErrToolsMissing.
func StartDetached(ctx context.Context, dir string, opts Options) (*Env, error) {
	if reason := missingTools(opts); reason != "" {
		return nil, fmt.Errorf("%w: %s", ErrToolsMissing, reason)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return start(ctx, dir, opts)
}

// Process is a child process started by StartProcess: it runs in its own
// process group, its stdout and stderr appended to <dir>/<name>.log.
type Process struct{ p *process }

// StartProcess starts bin with args (and env added to this process's
// environment) in its own process group, logging to <dir>/<name>.log
// (appended, so a restart under the same name keeps one log).
func StartProcess(dir, name, bin string, args, env []string) (*Process, error) {
	p, err := startProcess(dir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Name is the name the process was started under.
func (p *Process) Name() string { return p.p.name }

// PID is the process id (also its process group id).
func (p *Process) PID() int { return p.p.pid() }

// LogPath is the process's log file.
func (p *Process) LogPath() string { return p.p.logPath }

// LogTail returns the last n lines of the process log.
func (p *Process) LogTail(n int) string { return p.p.logTail(n) }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// ExitError describes how the process ended, with the end of its log.
func (p *Process) ExitError() error { return p.p.exitError() }

// Stop sends SIGTERM to the process group, SIGKILL after a grace period,
// and waits until the process is reaped. Safe to call more than once.
func (p *Process) Stop() { p.p.stop() }

// Kill sends SIGKILL to the process group (a crash: no clean shutdown) and
// waits until the process is reaped.
func (p *Process) Kill() {
	killGroup(p.p.pid(), syscall.SIGKILL)
	<-p.p.done
}
