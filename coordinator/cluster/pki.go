package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// The coordinators' own PKI, for installs without cert-manager: one CA
// (its key only in the coordinators' Secret) and a leaf per replica that
// the replica issues itself, in memory, for its own names, and re-issues
// before it expires. Agents get the CA certificate (never the key).
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 30 * 24 * time.Hour
	// A leaf is re-issued once this fraction of its validity has passed.
	leafRenewAt = 2.0 / 3
)

// CA is a certificate authority: PEM certificate and key.
type CA struct {
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             crypto.Signer
}

// NewCA creates a self-signed ECDSA P-256 CA.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// ParseCA reads a CA from PEM; errors say which part is wrong.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate and key: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("CA certificate %q is not a CA (basicConstraints CA:FALSE)", cert.Subject.CommonName)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	return &CA{CertPEM: certPEM, KeyPEM: keyPEM, cert: cert, key: signer}, nil
}

// Issue signs a leaf for names (DNS names or IP addresses) valid for
// server and client authentication, with a fresh key.
func (ca *CA) Issue(commonName string, names []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing certificate for %v: %w", names, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// issuer keeps a replica's leaf current: it re-issues the leaf once two
// thirds of its validity have passed (checked at each handshake).
type issuer struct {
	ca    *CA
	name  string
	names []string
	now   func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

func (is *issuer) current() (*tls.Certificate, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	now := is.now()
	if is.cert != nil {
		l := is.cert.Leaf
		if now.Before(l.NotBefore.Add(time.Duration(float64(l.NotAfter.Sub(l.NotBefore)) * leafRenewAt))) {
			return is.cert, nil
		}
	}
	c, err := is.ca.Issue(is.name, is.names, now)
	if err != nil {
		if is.cert != nil {
			return is.cert, nil // keep the one that still works
		}
		return nil, err
	}
	is.cert = &c
	return is.cert, nil
}

// TLSFromCA is mutual TLS material from the coordinators' CA: this
// replica's leaf for names, issued now and re-issued before it expires.
func TLSFromCA(ca *CA, commonName string, names []string) (*TLS, error) {
	is := &issuer{ca: ca, name: commonName, names: names, now: time.Now}
	if _, err := is.current(); err != nil {
		return nil, err
	}
	return &TLS{issuer: is, pool: ca.Pool()}, nil
}
