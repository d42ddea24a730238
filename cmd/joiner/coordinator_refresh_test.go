package main

import (
	"strings"
	"testing"
	"time"
)

// TestLeaderFlagsRefreshes: Karpenter's AMI and subnet refresh intervals
// replace --nodeclass-refresh (the smaller one set), under 1m is refused, and
// batch durations must be positive.
func TestLeaderFlagsRefreshes(t *testing.T) {
	for _, c := range []struct {
		name        string
		ami, subnet time.Duration
		idle, max   time.Duration
		wantRefresh time.Duration
		wantErr     string
	}{
		{"neither: --nodeclass-refresh", 0, 0, time.Second, 10 * time.Second, 5 * time.Minute, ""},
		{"ami only", 2 * time.Minute, 0, time.Second, 10 * time.Second, 2 * time.Minute, ""},
		{"subnet only", 0, 10 * time.Minute, time.Second, 10 * time.Second, 10 * time.Minute, ""},
		{"the smaller of both", 3 * time.Minute, time.Minute, time.Second, 10 * time.Second, time.Minute, ""},
		{"under 1m refused", 30 * time.Second, 0, time.Second, 10 * time.Second, 0, "--ami-refresh-interval 30s: want at least 1m"},
		{"zero batch refused", 0, 0, 0, 10 * time.Second, 0, "--batch-idle-duration 0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &leaderFlags{classRefresh: 5 * time.Minute, amiRefresh: c.ami, subnetRefresh: c.subnet, batchIdle: c.idle, batchMax: c.max}
			err := f.refreshes()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("refreshes() = %v, want an error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.classRefresh != c.wantRefresh {
				t.Errorf("class refresh %s, want %s", f.classRefresh, c.wantRefresh)
			}
		})
	}
}
