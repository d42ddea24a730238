package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// TestClusterCABundle: the bundle comes from --cluster-ca-file, else the
// kubeconfig's CA data, else its CA file. A kubeconfig that names its CA by
// path (testenv's, in-cluster configs) used to give `joiner migrate check`
// an empty bundle, so every EC2NodeClass hash differed from Karpenter's and
// every NodeClaim was reported drifted (NodeClassDrift).
func TestClusterCABundle(t *testing.T) {
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.b64")
	if err := os.WriteFile(other, []byte("b3RoZXI=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := base64.StdEncoding.EncodeToString(pem)
	for _, tc := range []struct {
		name   string
		rc     rest.Config
		caFile string
		want   string
		err    bool
	}{
		{name: "kubeconfig CA file", rc: rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: file}}, want: want},
		{name: "kubeconfig CA data", rc: rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: pem, CAFile: "/nonexistent"}}, want: want},
		{name: "flag wins", rc: rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: pem}}, caFile: other, want: "b3RoZXI="},
		{name: "unreadable CA file", rc: rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "missing")}}, err: true},
		{name: "unreadable flag", caFile: filepath.Join(dir, "missing"), err: true},
		{name: "no CA", want: ""},
	} {
		got, err := clusterCABundle(&tc.rc, tc.caFile)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %q, %v; want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
