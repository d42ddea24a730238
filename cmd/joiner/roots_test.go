package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// TestRootsWithoutASystemBundle: in the FROM-scratch image there is no CA
// bundle, and the binary still trusts the public roots AWS's endpoints
// chain to (Amazon Root CA 1-4). The check runs in a child process whose
// SSL_CERT_FILE and SSL_CERT_DIR name nothing, as in the image, since Go
// loads the system roots once per process.
func TestRootsWithoutASystemBundle(t *testing.T) {
	if os.Getenv("JOINER_TEST_NO_SYSTEM_ROOTS") == "1" {
		checkAmazonRootsTrusted(t)
		return
	}
	empty := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRootsWithoutASystemBundle$", "-test.v")
	cmd.Env = append(os.Environ(), "JOINER_TEST_NO_SYSTEM_ROOTS=1",
		"SSL_CERT_FILE="+filepath.Join(empty, "none.pem"), "SSL_CERT_DIR="+empty)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child without system roots: %v\n%s", err, out)
	}
}

func checkAmazonRootsTrusted(t *testing.T) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		t.Fatalf("no system pool: %v", err)
	}
	found := 0
	for r := range bundle.Roots() {
		c, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Subject.CommonName, "Amazon Root CA ") {
			continue
		}
		found++
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
			t.Errorf("%s not trusted without a system bundle: %v", c.Subject.CommonName, err)
		}
	}
	if found != 4 {
		t.Errorf("the bundle holds %d Amazon roots, want 4", found)
	}
}
