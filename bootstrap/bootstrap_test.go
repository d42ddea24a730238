package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/agent/volumes"
)

type fakeSystemd struct {
	started []string
	fail    error
	closed  bool
}

func (f *fakeSystemd) Reload(context.Context) error { return nil }
func (f *fakeSystemd) EnableAndStart(_ context.Context, _, name string) error {
	f.started = append(f.started, name)
	return f.fail
}
func (f *fakeSystemd) Start(_ context.Context, name string) error {
	f.started = append(f.started, name)
	return f.fail
}
func (f *fakeSystemd) Close() { f.closed = true }

var fakePlan = volumes.Plan{
	Volumes: []volumes.VolumeStatus{{Target: "/data1", Device: "/dev/nvme1n1", State: volumes.StateReady, Reason: "blank"}},
	Actions: []volumes.Action{{Op: volumes.OpFormat, Group: "/data1", Device: "/dev/nvme1n1", FSType: "xfs", UUID: "u1", Reason: "blank data volume #1"}},
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dry        bool
		systemd    bool
		setupErr   error
		startErr   error
		wantErr    string
		wantOut    []string
		wantConfig bool
		wantStart  bool
	}{
		{name: "dry run changes nothing", dry: true, systemd: true,
			wantOut: []string{"volume /data1: ready", "would format /dev/nvme1n1 as xfs", "would write agent config", "would enable and start joiner-agent.service"}},
		{name: "with systemd: config written, agent started", systemd: true, wantConfig: true, wantStart: true,
			wantOut: []string{"wrote agent config", "enabled and started joiner-agent.service"}},
		{name: "without systemd: config written, clear error", wantConfig: true, wantErr: "systemd is not running on this machine"},
		{name: "volume failure stops before the config", systemd: true, setupErr: errors.New("mkfs.xfs: boom"), wantErr: "setting up data volumes: mkfs.xfs: boom"},
		{name: "agent start failure", systemd: true, startErr: errors.New("job failed"), wantConfig: true, wantStart: true, wantErr: "enabling and starting joiner-agent.service: job failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			sd := &fakeSystemd{fail: tc.startErr}
			cfgPath := filepath.Join(t.TempDir(), "agent.json")
			var gotOpts volumes.Options
			err := Run(context.Background(), Options{
				ConfigPath: cfgPath, DryRun: tc.dry, Out: &out, StartAgent: true,
				Setup: func(_ context.Context, o volumes.Options) (volumes.Plan, error) {
					gotOpts = o
					return fakePlan, tc.setupErr
				},
				SystemdRunning: func() bool { return tc.systemd },
				Connect:        func(context.Context) (Systemd, error) { return sd, nil },
			})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if !gotOpts.AllowFormat || gotOpts.DryRun != tc.dry || !gotOpts.RecordLaunch || gotOpts.LaunchMapping == nil {
				t.Errorf("volumes options: AllowFormat=%v DryRun=%v RecordLaunch=%v LaunchMapping set=%v", gotOpts.AllowFormat, gotOpts.DryRun, gotOpts.RecordLaunch, gotOpts.LaunchMapping != nil)
			}
			_, statErr := os.Stat(cfgPath)
			if (statErr == nil) != tc.wantConfig {
				t.Errorf("config written = %v, want %v", statErr == nil, tc.wantConfig)
			}
			if tc.wantConfig {
				if c, err := config.Load(cfgPath); err != nil || c.Volumes.FSType != "xfs" {
					t.Errorf("written config: %+v, %v", c, err)
				}
			}
			if (len(sd.started) == 1) != tc.wantStart {
				t.Errorf("started %v, want start=%v", sd.started, tc.wantStart)
			}
		})
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	err := Run(context.Background(), Options{Config: config.Config{Volumes: config.Volumes{FSType: "ntfs"}},
		Setup: func(context.Context, volumes.Options) (volumes.Plan, error) {
			t.Fatal("setup ran")
			return volumes.Plan{}, nil
		}})
	if err == nil || !strings.Contains(err.Error(), "volumes.fsType: ntfs") {
		t.Errorf("err = %v", err)
	}
}
