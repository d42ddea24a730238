package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// buffer is a zapcore.WriteSyncer the test reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) Sync() error                 { return nil }

func (b *buffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.b.String()), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestJSONUsesKarpentersKeys: the JSON lines carry the keys and values
// Karpenter's do (message, level INFO, ISO 8601 time, logger, caller), so
// log queries written for Karpenter carry over.
func TestJSONUsesKarpentersKeys(t *testing.T) {
	var buf buffer
	log, err := NewTo(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	log.Named("controller").Named("provisioner").Info("found provisionable pod(s)", zap.Int("pods", 3), zap.Duration("duration", 1500*time.Millisecond))
	log.Warn("careful")
	log.Debug("hidden at info")
	got := buf.lines(t)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2 (debug hidden): %v", len(got), got)
	}
	l := got[0]
	for key, want := range map[string]any{
		"message": "found provisionable pod(s)", "level": "INFO", "logger": "controller.provisioner", "pods": 3.0, "duration": "1.5s",
	} {
		if l[key] != want {
			t.Errorf("%s = %v, want %v (line %v)", key, l[key], want, l)
		}
	}
	if _, ok := l["msg"]; ok {
		t.Errorf("line has msg: %v", l)
	}
	if ts, _ := l["time"].(string); ts == "" {
		t.Errorf("no time in %v", l)
	} else if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts); err != nil {
		t.Errorf("time %q is not ISO 8601 with milliseconds: %v", ts, err)
	}
	if c, _ := l["caller"].(string); !strings.HasPrefix(c, "logging/logging_test.go:") {
		t.Errorf("caller = %q, want logging/logging_test.go:<line>", c)
	}
	if got[1]["level"] != "WARN" {
		t.Errorf("warn level = %v, want WARN", got[1]["level"])
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []Options{{Level: "loud"}, {Format: "xml"}} {
		if _, err := NewTo(zapcore.AddSync(&bytes.Buffer{}), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := NewTo(zapcore.AddSync(&bytes.Buffer{}), Options{Level: "debug", Format: "console"}); err != nil {
		t.Errorf("debug console: %v", err)
	}
}

// TestKlogGoesThroughZap: what client-go logs through klog comes out as
// Joiner's JSON, named klog, with its key/value pairs.
func TestKlogGoesThroughZap(t *testing.T) {
	var buf buffer
	log, err := NewTo(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	RouteKlog(log)
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("Waiting for caches to sync", "controller", "nodeclaims")
	klog.ErrorS(nil, "lost the watch", "resource", "pods")
	klog.Flush()
	got := buf.lines(t)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(got), got)
	}
	for i, want := range []map[string]any{
		{"logger": "klog", "message": "Waiting for caches to sync", "level": "INFO", "controller": "nodeclaims"},
		{"logger": "klog", "message": "lost the watch", "level": "ERROR", "resource": "pods"},
	} {
		for k, v := range want {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
}
