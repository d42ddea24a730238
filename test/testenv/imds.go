package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// IMDSScenario selects what AEMM serves (its subcommand).
type IMDSScenario string

// AEMM scenarios.
const (
	// IMDSAll serves everything AEMM mocks: spot interruption after SpotDelay,
	// rebalance recommendation after RebalanceDelay, a scheduled event, ASG
	// target lifecycle state.
	IMDSAll IMDSScenario = ""
	// IMDSSpot serves only the spot interruption (and rebalance) paths.
	IMDSSpot IMDSScenario = "spot"
	// IMDSEvents serves only scheduled maintenance events.
	IMDSEvents IMDSScenario = "events"
	// IMDSASGLifecycle serves only the ASG target lifecycle state.
	IMDSASGLifecycle IMDSScenario = "asglifecycle"
)

// IMDSOptions configures an AEMM instance. Delays are whole seconds, counted
// from the (re)start of the mock.
type IMDSOptions struct {
	Scenario IMDSScenario
	// IMDSv2Only rejects requests without a session token (401).
	IMDSv2Only bool
	// SpotDelay: spot/instance-action answers 404 until this has passed.
	SpotDelay time.Duration
	// SpotAction is the spot notice's action (terminate, stop, hibernate);
	// Scenario IMDSSpot only. Empty: terminate.
	SpotAction string
	// RebalanceDelay: events/recommendations/rebalance answers 404 until then.
	RebalanceDelay time.Duration
	// ASGTerminationDelay: the target lifecycle state flips to Terminated then.
	ASGTerminationDelay time.Duration
	// EventCode (system-reboot, instance-reboot, system-maintenance,
	// instance-retirement, instance-stop) and EventState (active, completed,
	// canceled) of the scheduled event; Scenario IMDSEvents only.
	EventCode  string
	EventState string
	// Args are extra AEMM flags.
	Args []string
}

// IMDS is a running AEMM on a loopback port.
type IMDS struct {
	// Endpoint is the base URL, e.g. http://127.0.0.1:40123 (pass it to
	// aws-sdk-go-v2 feature/ec2/imds as Options.Endpoint).
	Endpoint string

	dir  string
	port int
	mu   sync.Mutex
	proc *process
	opts IMDSOptions
}

// StartIMDS runs AEMM for one test and stops it in t.Cleanup. It skips under
// -short or when the binary is missing.
func StartIMDS(t testing.TB, opts IMDSOptions) *IMDS {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: IMDS mock skipped under -short")
	}
	if _, err := toolPath(IMDSBin); err != nil {
		t.Skip(err.Error())
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &IMDS{dir: t.TempDir(), port: port, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	t.Cleanup(func() {
		if t.Failed() {
			if p := m.process(); p != nil {
				t.Logf("testenv: %s log (tail)\n%s", IMDSBin, p.logTail(60))
			}
		}
		m.Stop()
	})
	if err := m.RestartWith(opts); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return m
}

// Restart stops the mock and starts it again on the same port with the same
// options: delays count again from now.
func (m *IMDS) Restart() error {
	m.mu.Lock()
	opts := m.opts
	m.mu.Unlock()
	return m.RestartWith(opts)
}

// RestartWith stops the mock and starts it on the same port with new options
// (AEMM cannot reload its configuration, e.g. to cancel a scheduled event).
func (m *IMDS) RestartWith(opts IMDSOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		m.proc.stop()
		m.proc = nil
	}
	bin, err := toolPath(IMDSBin)
	if err != nil {
		return err
	}
	home := filepath.Join(m.dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("imds home: %w", err)
	}
	p, err := startProcess(m.dir, IMDSBin, bin, imdsArgs(m.port, opts), []string{"HOME=" + home})
	if err != nil {
		return err
	}
	m.proc, m.opts = p, opts
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Any HTTP answer (even 401 or 404) means it is serving.
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/latest/meta-data/instance-id", nil)
		if err != nil {
			return err
		}
		if resp, err := plainClient().Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		if err := pause(ctx, p); err != nil {
			return fmt.Errorf("waiting for %s: %w", IMDSBin, err)
		}
	}
}

// Stop kills the mock; it is idempotent and also runs in t.Cleanup.
func (m *IMDS) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		m.proc.stop()
	}
}

// PID is the mock's current process id (0 if never started).
func (m *IMDS) PID() int {
	if p := m.process(); p != nil {
		return p.pid()
	}
	return 0
}

func (m *IMDS) process() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

func imdsArgs(port int, o IMDSOptions) []string {
	var args []string
	if o.Scenario != IMDSAll {
		args = append(args, string(o.Scenario))
	}
	args = append(args, "--hostname=127.0.0.1", "--port="+strconv.Itoa(port))
	if o.IMDSv2Only {
		args = append(args, "--imdsv2")
	}
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
	if o.SpotDelay > 0 {
		args = append(args, "--mock-delay-sec="+secs(o.SpotDelay))
	}
	if o.RebalanceDelay > 0 {
		args = append(args, "--rebalance-delay-sec="+secs(o.RebalanceDelay))
	}
	if o.ASGTerminationDelay > 0 {
		args = append(args, "--asg-termination-delay-sec="+secs(o.ASGTerminationDelay))
	}
	if o.Scenario == IMDSSpot && o.SpotAction != "" {
		args = append(args, "--action="+o.SpotAction)
	}
	if o.Scenario == IMDSEvents {
		if o.EventCode != "" {
			args = append(args, "--code="+o.EventCode)
		}
		if o.EventState != "" {
			args = append(args, "--state="+o.EventState)
		}
	}
	return append(args, o.Args...)
}
