package httpauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestGuard: a peer passes without a token; a bearer token's review maps
// to 200, 401, 403, 429 or 503; a review that failed is never shown to the
// caller; without an Authorizer only peers pass.
func TestGuard(t *testing.T) {
	authorize := func(_ context.Context, token string) (string, error) {
		switch token {
		case "reader":
			return "system:serviceaccount:monitoring:prometheus", nil
		case "stranger":
			return "system:serviceaccount:default:x", fmt.Errorf("%w: user may not get /metrics", ErrForbidden)
		case "busy":
			return "", ErrBusy
		case "broken":
			return "", errors.New("our ServiceAccount may not create subjectaccessreviews.authorization.k8s.io")
		}
		return "", fmt.Errorf("%w: token not recognised", ErrUnauthenticated)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metric 1\n") })
	for _, tc := range []struct {
		name      string
		peer      bool
		noAuthz   bool
		auth      string
		code      int
		body, hdr string
		hdrWant   string
	}{
		{name: "peer", peer: true, code: 200, body: "metric 1"},
		{name: "allowed token", auth: "Bearer reader", code: 200, body: "metric 1"},
		{name: "scheme in lower case", auth: "bearer reader", code: 200, body: "metric 1"},
		{name: "scheme in upper case", auth: "BEARER reader", code: 200, body: "metric 1"},
		{name: "another scheme named like it", auth: "Bearers reader", code: 401},
		{name: "no token", code: 401, body: "need a certificate", hdr: "WWW-Authenticate", hdrWant: `Bearer realm="joiner"`},
		{name: "basic auth", auth: "Basic YTpi", code: 401},
		{name: "rejected token", auth: "Bearer forged", code: 401, body: "bearer token rejected"},
		{name: "denied", auth: "Bearer stranger", code: 403, body: "may not get /metrics"},
		{name: "busy", auth: "Bearer busy", code: 429, hdr: "Retry-After", hdrWant: "1"},
		{name: "review failed", auth: "Bearer broken", code: 503, body: "cannot check the caller now, retry", hdr: "Retry-After", hdrWant: "1"},
		{name: "certificates only", noAuthz: true, auth: "Bearer reader", code: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Guard{Next: next, Peer: func(*http.Request) bool { return tc.peer }, Authorize: authorize, Want: "need a certificate"}
			if tc.noAuthz {
				g.Authorize = nil
			}
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%d %q, want %d containing %q", rec.Code, body, tc.code, tc.body)
			}
			if strings.Contains(body, "subjectaccessreviews") {
				t.Errorf("review failure shown to the caller: %q", body)
			}
			if tc.hdr != "" && rec.Header().Get(tc.hdr) != tc.hdrWant {
				t.Errorf("%s %q, want %q", tc.hdr, rec.Header().Get(tc.hdr), tc.hdrWant)
			}
		})
	}
}

// TestIsLoopback: judged by the bound address, so localhost is loopback
// by what it resolved to, and an unspecified address is not.
func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:0": true, "localhost:0": true, "[::1]:0": true, "0.0.0.0:0": false, ":0": false} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err) // e.g. no IPv6
			continue
		}
		if got := IsLoopback(ln.Addr()); got != want {
			t.Errorf("IsLoopback(%s, bound %s) = %v, want %v", addr, ln.Addr(), got, want)
		}
		_ = ln.Close()
	}
	if IsLoopback(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}) {
		t.Error("a unix socket counted as a TCP loopback address")
	}
}

// TestSelfSigned: the certificate names the hosts, is kept while fresh and
// made again when a third of its lifetime is left.
func TestSelfSigned(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s := &SelfSigned{Hosts: []string{"10.0.1.2", "ip-10-0-1-2.ec2.internal"}, Lifetime: 90 * time.Hour, Now: func() time.Time { return now }}
	c1, err := s.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf := c1.Leaf
	if err := leaf.VerifyHostname("10.0.1.2"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("ip-10-0-1-2.ec2.internal"); err != nil {
		t.Error(err)
	}
	now = now.Add(50 * time.Hour)
	if c2, _ := s.Certificate(); c2 != c1 {
		t.Error("a fresh certificate was replaced")
	}
	now = now.Add(11 * time.Hour)
	c3, err := s.Certificate()
	if err != nil || c3 == c1 || !c3.Leaf.NotAfter.After(leaf.NotAfter) {
		t.Fatalf("certificate not renewed with a third of its life left: %v", err)
	}
}
