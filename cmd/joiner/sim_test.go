package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSimRejectsNonLoopback(t *testing.T) {
	cmd := newSimCmd(&globals{})
	cmd.SetArgs([]string{"--listen", "0.0.0.0:0"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err = %v, want a loopback-only error", err)
	}
}

func TestSimServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newSimCmd(&globals{})
	out := &syncBuffer{}
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--boot-delay", "1s"})
	cmd.SetOut(out)
	cmd.SetErr(&bytes.Buffer{})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var endpoint string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && endpoint == ""; time.Sleep(20 * time.Millisecond) {
		if s := out.String(); strings.Contains(s, "\n") {
			endpoint = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(s, "\n", 2)[0], "endpoint: "))
		}
	}
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		cancel()
		t.Fatalf("endpoint line %q", out.String())
	}
	resp, err := http.PostForm(endpoint+"/", url.Values{"Action": {"DescribeSubnets"}, "Version": {"2016-11-15"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("DescribeSubnets: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sim exited with %v", err)
	}
}
