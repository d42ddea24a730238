package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/joiner-dev/joiner/internal/atomicfile"
)

// TLSFiles names the PEM files of raft's mutual TLS: this server's
// certificate and key, and the CA that signs every coordinator's
// certificate. A coordinator certificate must carry the server's DNS name
// (coordinator-N.<headless-svc>...) as a SAN and allow both server and
// client authentication (it is used on both ends of a raft connection).
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// TLS holds the current certificate and CA pool, reloaded from the files
// when one of them changes (checked at each handshake: a stat of three
// files, no goroutine). A reload that fails keeps the previous material,
// so a half-written rotation never takes raft down.
type TLS struct {
	files TLSFiles
	// issuer, when set, replaces the files: the leaf comes from the
	// coordinators' CA (see TLSFromCA).
	issuer *issuer

	mu     sync.Mutex
	stamp  [3]fileStamp
	cert   *tls.Certificate
	pool   *x509.CertPool
	reload error // last reload error, nil when the files in use are current
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadTLS reads the files once; errors name the file at fault.
func LoadTLS(files TLSFiles) (*TLS, error) {
	if files.CertFile == "" || files.KeyFile == "" || files.CAFile == "" {
		return nil, fmt.Errorf("raft TLS needs a certificate, key and CA file (got cert %q, key %q, ca %q)", files.CertFile, files.KeyFile, files.CAFile)
	}
	t := &TLS{files: files}
	stamp, err := t.stat()
	if err != nil {
		return nil, err
	}
	if err := t.load(stamp); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *TLS) stat() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, p := range []string{t.files.CertFile, t.files.KeyFile, t.files.CAFile} {
		st, err := os.Stat(p)
		if err != nil {
			return out, fmt.Errorf("raft TLS: %w", err)
		}
		out[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
	}
	return out, nil
}

func (t *TLS) load(stamp [3]fileStamp) error {
	cert, err := tls.LoadX509KeyPair(t.files.CertFile, t.files.KeyFile)
	if err != nil {
		return fmt.Errorf("raft TLS: loading certificate %s and key %s: %w", t.files.CertFile, t.files.KeyFile, err)
	}
	caPEM, err := os.ReadFile(t.files.CAFile)
	if err != nil {
		return fmt.Errorf("raft TLS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("raft TLS: CA file %s holds no PEM certificate", t.files.CAFile)
	}
	t.cert, t.pool, t.stamp = &cert, pool, stamp
	return nil
}

// current returns the material in use, reloading it first if a file
// changed since the last load.
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	if t.issuer != nil {
		cert, err := t.issuer.current()
		t.mu.Lock()
		t.reload = err
		t.mu.Unlock()
		return cert, t.pool
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if stamp, err := t.stat(); err != nil {
		t.reload = err
	} else if stamp != t.stamp {
		t.reload = t.load(stamp)
	}
	return t.cert, t.pool
}

// ReloadError is the last reload's error (nil: the files in use are the
// files on disk).
func (t *TLS) ReloadError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reload
}

// ServerConfig is the listener side: present our certificate, require a
// client certificate signed by the CA.
func (t *TLS) ServerConfig() *tls.Config { return t.serverConfig(tls.RequireAndVerifyClientCert) }

// serverConfig presents the current certificate at each handshake and
// checks client certificates against the CA as auth says.
func (t *TLS) serverConfig(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := t.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   auth,
			}, nil
		},
	}
}

// ClientConfig is the dialing side: verify the peer against the CA and its
// DNS name (serverName), and present our certificate.
func (t *TLS) ClientConfig(serverName string) *tls.Config {
	cert, pool := t.current()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		ServerName:   serverName,
		RootCAs:      pool,
		Certificates: []tls.Certificate{*cert},
	}
}

// HTTPServerConfig is the HTTP API's side: present our certificate and
// verify a client certificate when one is given (coordinators and `joiner
// status` present one; agents authenticate with a bearer token instead).
func (t *TLS) HTTPServerConfig() *tls.Config { return t.serverConfig(tls.VerifyClientCertIfGiven) }

// HTTPClientConfig dials another replica's HTTP API: verify its
// certificate against the CA (the server name comes from the URL) and
// present ours (the current one at each handshake).
func (t *TLS) HTTPClientConfig() *tls.Config {
	_, pool := t.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := t.current()
			return cert, nil
		},
	}
}

// WriteFiles writes the current certificate, key and CA as PEM files
// tls.crt, tls.key and ca.crt (mode 0600) into dir, for tools run beside
// the coordinator (`joiner status` in the pod).
func (t *TLS) WriteFiles(dir string, ca []byte) error {
	cert, _ := t.current()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), "ca.crt": ca} {
		if err := atomicfile.Write(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// dnsStream is a raft.StreamLayer that dials peers by their DNS names and
// advertises its own DNS name, so LocalAddr and the leader address are
// stable across pod restarts (pod IPs change; names do not). With tls set,
// every connection is mutual TLS: the dialer checks the peer's certificate
// against the CA and the peer's DNS name, the listener requires a client
// certificate from the same CA.
//
// The listener holds at most MaxInboundConns connections at once (one more
// is closed on accept) and gives a client HandshakeTimeout to complete the
// TLS handshake, so neither idle nor slow connections from anyone who can
// reach the port pile up.
type dnsStream struct {
	net.Listener
	advertise dnsAddr
	tls       *TLS
	slots     chan struct{}
	handshake time.Duration
}

// Listener limits of the raft port. Raft keeps at most a few connections
// per peer (MaxPool plus the pipeline and the heartbeat stream).
const (
	MaxInboundConns  = 64
	HandshakeTimeout = 10 * time.Second
)

type dnsAddr string

func (a dnsAddr) Network() string { return "tcp" }
func (a dnsAddr) String() string  { return string(a) }

func listenStream(bind, advertise string, t *TLS) (*dnsStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("listening for raft on %s: %w", bind, err)
	}
	return &dnsStream{Listener: ln, advertise: dnsAddr(advertise), tls: t,
		slots: make(chan struct{}, MaxInboundConns), handshake: HandshakeTimeout}, nil
}

// Addr implements net.Listener: the advertised name, not the bound IP.
func (s *dnsStream) Addr() net.Addr { return s.advertise }

// Accept implements net.Listener. The TLS handshake runs on the
// connection's first read (in raft's per-connection goroutine), so a slow
// or hostile client does not hold up the accept loop; a client without a
// certificate from the CA, or one that does not finish the handshake in
// time, fails there and is dropped. A connection over the limit is closed
// at once.
func (s *dnsStream) Accept() (net.Conn, error) {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if s.slots != nil {
			select {
			case s.slots <- struct{}{}:
			default:
				c.Close()
				continue
			}
			c = &slotConn{Conn: c, release: func() { <-s.slots }}
		}
		if s.tls == nil {
			return c, nil
		}
		return &handshakeConn{Conn: tls.Server(c, s.tls.ServerConfig()), timeout: s.handshake}, nil
	}
}

// slotConn gives its listener slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// handshakeConn completes the server handshake within timeout on first use.
type handshakeConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		if c.timeout > 0 {
			_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
		}
		if c.err = c.Conn.Handshake(); c.err == nil {
			c.err = c.Conn.SetDeadline(time.Time{})
		} else {
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Dial implements raft.StreamLayer. The DNS name is resolved at each dial.
func (s *dnsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil || s.tls == nil {
		return c, err
	}
	host, _, err := net.SplitHostPort(string(addr))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("raft peer address %q: %w", addr, err)
	}
	tc := tls.Client(c, s.tls.ClientConfig(host))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
