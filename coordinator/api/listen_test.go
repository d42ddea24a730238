package api

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestListenerCutsSlowAndIdleClients: against the real listener and
// server (TLS, the report handler), a client that connects and never
// sends a ClientHello, one that sends headers and never finishes them,
// and one that promises a body and trickles it are all disconnected by
// the server; none holds a connection open.
func TestListenerCutsSlowAndIdleClients(t *testing.T) {
	l := Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 300 * time.Millisecond, MaxConns: 8}
	ln, err := Listen("127.0.0.1:0", l)
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Cluster: &fakeCluster{}, Reports: noReports{}, Authenticate: testAuthenticate, NodeInstance: testNodeInstance}, zap.NewNop())
	srv := NewHTTPServer(h, mustTLS("srv").HTTPServerConfig(), l, zap.NewNop())
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	// cut waits (up to a minute: a slow machine is not what this checks)
	// for the server to end the connection: EOF, a reset, or an answer
	// followed by the close.
	cut := func(t *testing.T, c net.Conn) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept the connection open for a minute")
		}
	}
	tlsDial := func(t *testing.T) *tls.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: testCA.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("no handshake", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cut(t, c)
	})
	t.Run("headers never finished", func(t *testing.T) {
		c := tlsDial(t)
		if _, err := io.WriteString(c, "POST /v1/interruptions HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		cut(t, c)
	})
	t.Run("slow body", func(t *testing.T) {
		c := tlsDial(t)
		if _, err := io.WriteString(c, "POST /v1/interruptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tokenOf("ip-i-1")+
			"\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{\"id\":"); err != nil {
			t.Fatal(err)
		}
		cut(t, c)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := tlsDial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "ok") {
			t.Fatalf("healthz body %q", body)
		}
		cut(t, c) // then nothing: closed at the idle timeout
	})
}
