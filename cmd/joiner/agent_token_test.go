package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBearerTokenFromKubeconfig: a systemd-mode agent identifies its node
// with the kubelet's credential: a static token, or what the exec plugin
// (EKS: `aws eks get-token`) prints; a client-certificate kubeconfig has
// none, and says so.
func TestBearerTokenFromKubeconfig(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "get-token")
	if err := os.WriteFile(plugin, []byte(`#!/bin/sh
echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"k8s-aws-v1.exec-token"}}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(name, user string) string {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".kubeconfig")
		body := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: ` + user + `}]
`
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, user, want, inErr string
	}{
		{name: "static token", user: `{token: static-token}`, want: "static-token"},
		{name: "exec plugin", user: `{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ` + plugin + `, interactiveMode: Never}}`, want: "k8s-aws-v1.exec-token"},
		{name: "no token (basic auth)", user: `{username: "x", password: "pw"}`, inErr: "no bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := kubeConfig(kubeconfig(tc.name, tc.user))
			if err != nil {
				t.Fatal(err)
			}
			got, err := bearerToken(rc)()
			if tc.inErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.inErr) {
					t.Fatalf("token %q, error %v; want one containing %q", got, err, tc.inErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("token %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
