package testenv_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/test/testenv"
)

// imdsGet fetches path with an IMDSv2 token (when token is true).
func imdsGet(ctx context.Context, t *testing.T, endpoint, path string, token bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
	if token {
		put, _ := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/latest/api/token", nil)
		put.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
		resp, err := http.DefaultClient.Do(put)
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		tok, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token: %s", resp.Status)
		}
		req.Header.Set("X-aws-ec2-metadata-token", string(tok))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestIMDS(t *testing.T) {
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, IMDSv2Only: true, SpotDelay: time.Second, RebalanceDelay: time.Second})
	if !strings.HasPrefix(m.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q is not on loopback", m.Endpoint)
	}
	ctx := t.Context()
	if code, _ := imdsGet(ctx, t, m.Endpoint, "/latest/meta-data/instance-id", false); code != http.StatusUnauthorized {
		t.Errorf("IMDSv1 GET = %d, want 401 with IMDSv2Only", code)
	}
	notice := waitFor(ctx, t, "spot interruption notice", func() (string, bool) {
		code, body := imdsGet(ctx, t, m.Endpoint, "/latest/meta-data/spot/instance-action", true)
		return body, code == http.StatusOK
	})
	var action struct{ Action, Time string }
	if err := json.Unmarshal([]byte(notice), &action); err != nil || action.Action != "terminate" || action.Time == "" {
		t.Errorf("notice = %s, want action terminate", notice)
	}

	before := m.PID()
	if err := m.RestartWith(testenv.IMDSOptions{Scenario: testenv.IMDSEvents, EventCode: "system-reboot", EventState: "canceled"}); err != nil {
		t.Fatal(err)
	}
	if m.PID() == before || testenv.ProcessAlive(before) {
		t.Errorf("restart kept process %d alive (new %d)", before, m.PID())
	}
	events := waitFor(ctx, t, "canceled scheduled event", func() (string, bool) {
		code, body := imdsGet(ctx, t, m.Endpoint, "/latest/meta-data/events/maintenance/scheduled", false)
		return body, code == http.StatusOK
	})
	if !strings.Contains(events, "canceled") || !strings.Contains(events, "system-reboot") {
		t.Errorf("scheduled events = %s, want a canceled system-reboot", events)
	}
	pid := m.PID()
	m.Stop()
	if testenv.ProcessAlive(pid) {
		t.Errorf("IMDS process %d alive after Stop", pid)
	}
}
