package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// testCA is a throwaway certificate authority for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes cert, key and CA files for a coordinator valid for
// 127.0.0.1 and localhost (server and client auth) and returns their names.
func (ca *testCA) issue(t *testing.T, dir, name string) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), CAFile: filepath.Join(dir, name+"-ca.crt")}
	for p, b := range map[string][]byte{
		f.CertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		f.KeyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		f.CAFile:   ca.pem,
	} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func loadTLS(t *testing.T, f TLSFiles) *TLS {
	t.Helper()
	tl, err := LoadTLS(f)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// eventually polls cond until it holds; the bound only stops a hung test.
// openCluster opens n raft nodes on 127.0.0.1 with the given TLS material
// (nil entries: plaintext) and bootstraps them as one configuration.
func openCluster(t *testing.T, tlss []*TLS) ([]*Node, []*fsm.FSM) {
	t.Helper()
	var nodes []*Node
	var fsms []*fsm.FSM
	var cfg raft.Configuration
	for i, tl := range tlss {
		port := freePort(t)
		f := fsm.New()
		n, err := Open(Config{
			DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("127.0.0.1:%d", port),
			Tune: steadyRaft, TLS: tl,
		}, f, zap.NewNop())
		if err != nil {
			t.Fatalf("opening node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
		fsms = append(fsms, f)
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: n.ID, Address: n.Addr})
	}
	for _, n := range nodes {
		if err := n.Raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return nodes, fsms
}

func leaderOf(nodes []*Node) *Node {
	for _, n := range nodes {
		if n.Raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

// TestTLSClusterFormsAndReplicates: three coordinators whose raft traffic
// is mutual TLS elect a leader and replicate a command to every FSM.
func TestTLSClusterFormsAndReplicates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "joiner-ca")
	var tlss []*TLS
	for i := range 3 {
		tlss = append(tlss, loadTLS(t, ca.issue(t, dir, fmt.Sprintf("c%d", i))))
	}
	nodes, fsms := openCluster(t, tlss)
	eventually(t, "a leader", func() bool { return leaderOf(nodes) != nil })
	cmd := testPlan("i1")
	commitOnLeader(t, func() []*raft.Raft { return rafts(nodes) }, fsm.MustEncode(fsm.PlanCommitType, cmd))
	for i, f := range fsms {
		eventually(t, fmt.Sprintf("intent on node %d", i), func() bool { _, ok := f.Intent("i1"); return ok })
	}
}

// TestTLSRejectsForeignCA: a peer whose certificate another CA signed can
// neither dial a coordinator nor be dialed by one, and a plaintext client
// gets nothing either.
func TestTLSRejectsForeignCA(t *testing.T) {
	dir := t.TempDir()
	good := newTestCA(t, "joiner-ca")
	evil := newTestCA(t, "other-ca")
	srv, err := listenStream("127.0.0.1:0", "127.0.0.1:0", loadTLS(t, good.issue(t, dir, "server")))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := raft.ServerAddress(srv.Listener.Addr().String())
	accepted := make(chan error, 4)
	go readEach(srv, accepted)

	// A member of the same CA gets through.
	friend := &dnsStream{tls: loadTLS(t, good.issue(t, dir, "friend"))}
	c, err := friend.Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatalf("same-CA peer rejected: %v", err)
	}
	_, _ = c.Write([]byte{1})
	if err := <-accepted; err != nil {
		t.Fatalf("server side of a same-CA connection: %v", err)
	}
	c.Close()

	// A peer with a foreign certificate is refused by the server...
	stranger := &dnsStream{tls: loadTLS(t, evil.issue(t, dir, "stranger"))}
	if c, err := stranger.Dial(addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatal("peer with a foreign CA's certificate connected")
	}
	if err := <-accepted; err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("server accepted a foreign client certificate: %v", err)
	}
	// ...a coordinator dialing a foreign listener refuses it...
	evilLn, err := listenStream("127.0.0.1:0", "127.0.0.1:0", loadTLS(t, evil.issue(t, dir, "evil-server")))
	if err != nil {
		t.Fatal(err)
	}
	defer evilLn.Close()
	go func() {
		c, err := evilLn.Accept()
		if err == nil {
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	if c, err := friend.Dial(raft.ServerAddress(evilLn.Listener.Addr().String()), 5*time.Second); err == nil {
		c.Close()
		t.Fatal("coordinator trusted a listener with a foreign CA's certificate")
	}
	// ...and a plaintext client reads nothing back.
	pc, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = pc.Write([]byte("plaintext raft rpc\n"))
	_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(pc)
	pc.Close()
	if strings.Contains(string(b), "raft") {
		t.Fatalf("plaintext client got an answer: %q", b)
	}
	<-accepted
}

// TestTLSReloadsChangedFiles: rotated files are picked up at the next
// handshake; a broken rotation keeps the previous material.
func TestTLSReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "joiner-ca")
	files := ca.issue(t, dir, "c0")
	tl := loadTLS(t, files)
	first, _ := tl.current()
	// Rotate: a new certificate under the same names, newer mtime.
	next := ca.issue(t, t.TempDir(), "c0")
	for _, p := range [][2]string{{next.CertFile, files.CertFile}, {next.KeyFile, files.KeyFile}} {
		b, _ := os.ReadFile(p[0])
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Minute)
		_ = os.Chtimes(p[1], future, future)
	}
	second, _ := tl.current()
	if string(second.Certificate[0]) == string(first.Certificate[0]) {
		t.Fatal("rotated certificate not reloaded")
	}
	if err := tl.ReloadError(); err != nil {
		t.Fatal(err)
	}
	// Break it: garbage in the key file keeps the rotated pair in use.
	if err := os.WriteFile(files.KeyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	third, _ := tl.current()
	if string(third.Certificate[0]) != string(second.Certificate[0]) {
		t.Fatal("a broken rotation replaced the working certificate")
	}
	if err := tl.ReloadError(); err == nil || !strings.Contains(err.Error(), files.KeyFile) {
		t.Fatalf("reload error %v, want one naming %s", err, files.KeyFile)
	}
}

func TestLoadTLSErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	files := newTestCA(t, "ca").issue(t, dir, "c0")
	if err := os.WriteFile(files.CAFile, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(files); err == nil || !strings.Contains(err.Error(), files.CAFile) {
		t.Fatalf("error %v, want one naming %s", err, files.CAFile)
	}
	if _, err := LoadTLS(TLSFiles{CertFile: files.CertFile}); err == nil {
		t.Fatal("missing key and CA accepted")
	}
}

// readEach accepts connections on srv until it closes, as raft's
// transport does: one goroutine per connection reads a byte (the TLS
// handshake runs on the first read), closes it and sends the read's error
// to done (when not nil).
func readEach(srv *dnsStream, done chan<- error) {
	for {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		go func() {
			_, err := c.Read(make([]byte, 1))
			c.Close()
			if done != nil {
				done <- err
			}
		}()
	}
}

func rafts(nodes []*Node) []*raft.Raft {
	out := make([]*raft.Raft, len(nodes))
	for i, n := range nodes {
		out[i] = n.Raft
	}
	return out
}

// TestRaftListenerBoundsConnections: against the real raft listener, a
// client that connects and never completes the TLS handshake is dropped
// at the handshake deadline, and connections over the limit are closed on
// accept (idle connections cannot pile up).
func TestRaftListenerBoundsConnections(t *testing.T) {
	files := newTestCA(t, "joiner-ca").issue(t, t.TempDir(), "server")
	// serve starts a listener the way raft's transport uses it: an accept
	// loop and one goroutine per connection that reads.
	serve := func(slots int, handshake time.Duration) *dnsStream {
		srv, err := listenStream("127.0.0.1:0", "127.0.0.1:0", loadTLS(t, files))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		srv.slots, srv.handshake = make(chan struct{}, slots), handshake
		go readEach(srv, nil)
		return srv
	}
	dial := func(srv *dnsStream) net.Conn {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closed reports whether the server closed c (an EOF or reset, not our
	// own read deadline).
	closed := func(c net.Conn, wait time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}

	limited := serve(3, time.Hour)
	held := []net.Conn{dial(limited), dial(limited), dial(limited)}
	eventually(t, "three connections holding every slot", func() bool { return len(limited.slots) == 3 })
	extra := dial(limited)
	if !closed(extra, time.Minute) {
		t.Fatal("a connection over the limit was kept")
	}
	extra.Close()
	for _, c := range held {
		if closed(c, 50*time.Millisecond) {
			t.Fatal("a connection within the limit was closed")
		}
	}
	// A slot freed by a client is usable again.
	held[0].Close()
	eventually(t, "the closed connection's slot released", func() bool { return len(limited.slots) == 2 })
	held[0] = dial(limited)
	eventually(t, "the new connection accepted", func() bool { return len(limited.slots) == 3 })
	for _, c := range held {
		c.Close()
	}
	eventually(t, "every slot released", func() bool { return len(limited.slots) == 0 })

	// An idle client that never sends a ClientHello is dropped at the
	// handshake deadline.
	deadline := serve(3, 100*time.Millisecond)
	idle := dial(deadline)
	defer idle.Close()
	if !closed(idle, time.Minute) {
		t.Fatal("an idle connection outlived the handshake deadline")
	}
	eventually(t, "the idle connection's slot released", func() bool { return len(deadline.slots) == 0 })
}
