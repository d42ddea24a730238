package imds

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestClientGet(t *testing.T) {
	f, srv := newFakeIMDS(t)
	f.set(PathInstanceID, "i-0123")
	c, err := NewClient(ClientOptions{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := c.Get(ctx, PathInstanceID)
	if err != nil || string(b) != "i-0123" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if _, err := c.Get(ctx, PathSpotInstanceAction); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing path: err = %v, want ErrNotFound", err)
	}
	f.mu.Lock()
	f.status[PathRebalance] = 500
	f.mu.Unlock()
	if _, err := c.Get(ctx, PathRebalance); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("500: err = %v, want a non-NotFound error", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.puts != 1 {
		t.Errorf("token PUTs = %d, want 1 (token reused)", f.puts)
	}
	if f.lastTTLs[0] != "21600" {
		t.Errorf("requested TTL = %s, want 21600", f.lastTTLs[0])
	}
}

func TestClientNoSilentIMDSv1Fallback(t *testing.T) {
	f, srv := newFakeIMDS(t)
	f.set(PathInstanceID, "i-0123")
	f.failPUT = true
	c, err := NewClient(ClientOptions{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), PathInstanceID); err == nil {
		t.Fatal("Get succeeded without a token: IMDSv1 fallback must be off by default")
	}
	f.mu.Lock()
	gets := f.gets
	f.mu.Unlock()
	if gets != 0 {
		t.Fatalf("client sent %d tokenless GETs", gets)
	}
}

func TestClientRefreshesTokenBeforeExpiry(t *testing.T) {
	f, srv := newFakeIMDS(t)
	f.set(PathInstanceID, "i-0123")
	// The client uses a 4 s token for 3 s; a request may take up to the
	// grace to arrive on a loaded machine and still counts as in time.
	f.grace = 900 * time.Millisecond
	c, err := NewClient(ClientOptions{Endpoint: srv.URL, TokenTTL: 4 * time.Second, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Get(context.Background(), PathInstanceID); err != nil {
			t.Fatalf("Get across token expiry: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.puts < 2 {
		t.Errorf("token PUTs = %d, want >= 2 (refresh)", f.puts)
	}
	if f.unauth != 0 {
		t.Errorf("%d requests hit an expired token; want refresh before expiry", f.unauth)
	}
}

func TestRefreshAfter(t *testing.T) {
	for _, c := range []struct{ ttl, want int64 }{{1, 1}, {2, 2}, {4, 3}, {300, 240}, {21600, 21540}} {
		if got := refreshAfter(c.ttl); got != c.want {
			t.Errorf("refreshAfter(%d) = %d, want %d", c.ttl, got, c.want)
		}
	}
}
