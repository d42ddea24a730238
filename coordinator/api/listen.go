package api

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/joiner-dev/joiner/internal/defaults"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"
)

// Limits bound what one client can hold of the HTTP server: time to send
// headers, the whole request (a slow body is cut off) and to read the
// answer, keep-alive idleness, header size and open connections. The
// request body itself is limited per handler (reports: 64 KiB).
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConns          int
}

// DefaultLimits are the coordinator's: generous for an agent on a slow
// link, small against a client that holds connections open.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       15 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       90 * time.Second,
	MaxHeaderBytes:    16 << 10,
	MaxConns:          512,
}

// NewHTTPServer is the coordinator's HTTP server for h with limits (zero
// fields take DefaultLimits') and, when tlsConf is set, TLS (the handshake
// is bounded by the header timeout).
func NewHTTPServer(h http.Handler, tlsConf *tls.Config, l Limits, log *zap.Logger) *http.Server {
	l = l.withDefaults()
	// Failed handshakes and cut-off clients are the server doing its job:
	// debug level.
	errLog, _ := zap.NewStdLogAt(log.Named("http"), zap.DebugLevel)
	return &http.Server{Handler: h, TLSConfig: tlsConf, ErrorLog: errLog,
		ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// Listen listens on addr and accepts at most l.MaxConns connections at
// once (more wait in the kernel's backlog until one closes).
func Listen(addr string, l Limits) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(ln, l.withDefaults().MaxConns), nil
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	defaults.Positive(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	defaults.Positive(&l.ReadTimeout, d.ReadTimeout)
	defaults.Positive(&l.WriteTimeout, d.WriteTimeout)
	defaults.Positive(&l.IdleTimeout, d.IdleTimeout)
	defaults.Positive(&l.MaxHeaderBytes, d.MaxHeaderBytes)
	defaults.Positive(&l.MaxConns, d.MaxConns)
	return l
}
