package httpauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// SelfSigned serves a self-signed certificate for Hosts (DNS names or IP
// addresses), made in memory when first asked for and made again when a
// third of its Lifetime is left (kube-rbac-proxy's and kubebuilder's
// default: scrapers skip verification, the token is what authenticates).
type SelfSigned struct {
	Hosts []string
	// Lifetime of a certificate (default one year).
	Lifetime time.Duration
	Now      func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

// TLSConfig serves the certificate (TLS 1.2 at least).
func (s *SelfSigned) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return s.Certificate()
	}}
}

// Certificate returns the current certificate, making one when none is
// fresh.
func (s *SelfSigned) Certificate() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defaults.Positive(&s.Lifetime, 365*24*time.Hour)
	defaults.Clock(&s.Now)
	now := s.Now()
	if s.cert != nil && now.Before(s.cert.Leaf.NotAfter.Add(-s.Lifetime/3)) {
		return s.cert, nil
	}
	c, err := selfSigned(s.Hosts, now, s.Lifetime)
	if err != nil {
		return nil, err
	}
	s.cert = c
	return c, nil
}

func selfSigned(hosts []string, now time.Time, lifetime time.Duration) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "joiner-agent"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if len(hosts) > 0 {
		tmpl.Subject.CommonName = hosts[0]
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate for %v: %w", hosts, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate for %v: %w", hosts, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// IsLoopback reports whether addr, a bound listener's address
// (net.Listener.Addr), is a loopback one: judged by what was bound, so a
// host name such as localhost counts by the address it resolved to.
func IsLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
