package kube

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/test/testenv"
)

// startAPIServer starts a kube-apiserver for the test (skipped under
// -short); the context ends after timeout or with the test.
func startAPIServer(t *testing.T, timeout time.Duration) (*testenv.Env, context.Context) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return env, ctx
}

// TestEnsureSecretsOneCAForAll: three replicas starting together against
// the real API server end with one CA and one gossip key (create-if-absent:
// the losers read the winner's); the ConfigMap carries the certificate and
// never the key; a later start reads the same.
func TestEnsureSecretsOneCAForAll(t *testing.T) {
	env, ctx := startAPIServer(t, time.Minute)
	type got struct {
		cert, gossip []byte
		err          error
	}
	out := make([]got, 3)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			ca, gossip, err := EnsureSecrets(ctx, env.Client, "kube-system", "joiner-ca", "joiner-ca", time.Now())
			if err == nil {
				out[i] = got{cert: ca.CertPEM, gossip: gossip}
			} else {
				out[i].err = err
			}
		})
	}
	wg.Wait()
	for i, g := range out {
		if g.err != nil {
			t.Fatalf("replica %d: %v", i, g.err)
		}
		if !bytes.Equal(g.cert, out[0].cert) || !bytes.Equal(g.gossip, out[0].gossip) || len(g.gossip) != 32 {
			t.Fatalf("replica %d got another CA or gossip key (%d bytes)", i, len(g.gossip))
		}
	}
	cm, err := env.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "joiner-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[CACertKey] != string(out[0].cert) || len(cm.Data) != 1 {
		t.Fatalf("configmap data keys %d: want only the CA certificate", len(cm.Data))
	}
	ca, gossip, err := EnsureSecrets(ctx, env.Client, "kube-system", "joiner-ca", "joiner-ca", time.Now())
	if err != nil || !bytes.Equal(ca.CertPEM, out[0].cert) || !bytes.Equal(gossip, out[0].gossip) {
		t.Fatalf("a later start: %v, same CA %v", err, err == nil && bytes.Equal(ca.CertPEM, out[0].cert))
	}
}
