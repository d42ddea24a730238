package main

import (
	"context"
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
		{name: "nothing set: refuses to start", f: securityFlags{}, wantErr: "need TLS"},
		{name: "insecure dev: plaintext with warnings", f: securityFlags{insecureDev: true}},
		{name: "secret and files", f: securityFlags{caSecret: "ca", tlsCert: "c", tlsKey: "k", tlsCA: "a"}, wantErr: "set one of them"},
		{name: "partial TLS", f: securityFlags{tlsCert: "c.pem"}, wantErr: "set all three or none"},
		{name: "missing TLS files", f: securityFlags{tlsCert: filepath.Join(dir, "c.pem"), tlsKey: "k", tlsCA: "ca"}, wantErr: "c.pem"},
		{name: "bad keyring names file and line", f: securityFlags{insecureDev: true, keyringFile: bad}, wantErr: bad + " line 1: key is 5 bytes"},
		{name: "malformed status ServiceAccount", f: securityFlags{insecureDev: true, statusAccount: "system:serviceaccount:joiner"},
			wantErr: "--status-service-account: ServiceAccount user \"system:serviceaccount:joiner\""},
		{name: "status ServiceAccount by name", f: securityFlags{insecureDev: true, statusAccount: "joiner-coordinator-status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := tc.f.build(context.Background(), nil, "c0.example:7000", zap.NewNop())
			if tc.wantErr == "" {
				if err != nil || sec.tls != nil || sec.keyring != nil {
					t.Fatalf("got %+v %v", sec, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestStatusServiceAccountUser(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"", ""},
		{"joiner-coordinator-status", "system:serviceaccount:joiner:joiner-coordinator-status"},
		{"system:serviceaccount:ops:reader", "system:serviceaccount:ops:reader"},
	} {
		f := securityFlags{namespace: "joiner", statusAccount: tc.flag}
		if got, err := f.statusUser(); got != tc.want || err != nil {
			t.Errorf("--status-service-account=%q: %q, %v; want %q", tc.flag, got, err, tc.want)
		}
	}
}
