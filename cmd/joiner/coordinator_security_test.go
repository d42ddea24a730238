package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestSecurityFlagsBuild(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "keyring")
	if err := os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		f       securityFlags
		wantErr string
	}{
		{name: "nothing set: plaintext with warnings", f: securityFlags{}},
		{name: "partial TLS", f: securityFlags{tlsCert: "c.pem"}, wantErr: "set all three or none"},
		{name: "missing TLS files", f: securityFlags{tlsCert: filepath.Join(dir, "c.pem"), tlsKey: "k", tlsCA: "ca"}, wantErr: "c.pem"},
		{name: "bad keyring names file and line", f: securityFlags{keyringFile: bad}, wantErr: bad + " line 1: key is 5 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, kr, err := tc.f.build(zap.NewNop())
			if tc.wantErr == "" {
				if err != nil || tl != nil || kr != nil {
					t.Fatalf("got %v %v %v", tl, kr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
