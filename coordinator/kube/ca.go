package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/cluster"
)

// Keys of the CA Secret and ConfigMap.
const (
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
	// GossipKeyKey holds the memberlist encryption key (32 random bytes)
	// the coordinators share when no keyring file is given.
	GossipKeyKey = "gossip.key"
)

// EnsureCA returns the coordinators' CA from Secret namespace/secret,
// creating it when absent (create-if-absent: when replicas start together,
// the API server lets one create win and the others read what it wrote),
// and publishes its certificate, never its key, in ConfigMap
// namespace/configMap for agents and tools.
func EnsureCA(ctx context.Context, kc kubernetes.Interface, namespace, secret, configMap string, now time.Time) (*cluster.CA, error) {
	ca, _, err := EnsureSecrets(ctx, kc, namespace, secret, configMap, now)
	return ca, err
}

// EnsureSecrets is EnsureCA that also returns the coordinators' gossip
// key, created with the CA (nil when the Secret predates it).
func EnsureSecrets(ctx context.Context, kc kubernetes.Interface, namespace, secret, configMap string, now time.Time) (*cluster.CA, []byte, error) {
	ca, gossip, err := readOrCreateCA(ctx, kc, namespace, secret, now)
	if err != nil {
		return nil, nil, err
	}
	if configMap == "" {
		return ca, gossip, nil
	}
	if err := PublishCA(ctx, kc, namespace, configMap, ca.CertPEM); err != nil {
		return nil, nil, err
	}
	return ca, gossip, nil
}

// PublishCA writes the CA certificate (PEM) into ConfigMap
// namespace/name under ca.crt, creating or updating it.
func PublishCA(ctx context.Context, kc kubernetes.Interface, namespace, name string, certPEM []byte) error {
	cms := kc.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{karpv1.LabelManagedBy: karpv1.ManagedByJoiner}},
			Data: map[string]string{CACertKey: string(certPEM)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CA configmap %s/%s: %w", namespace, name, err)
		}
	case err != nil:
		return fmt.Errorf("reading CA configmap %s/%s: %w", namespace, name, err)
	case cm.Data[CACertKey] != string(certPEM):
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[CACertKey] = string(certPEM)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating CA configmap %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}

func readOrCreateCA(ctx context.Context, kc kubernetes.Interface, namespace, name string, now time.Time) (*cluster.CA, []byte, error) {
	secrets := kc.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ca, gerr := cluster.NewCA("joiner-coordinators", now)
		if gerr != nil {
			return nil, nil, gerr
		}
		gossip := make([]byte, 32)
		if _, gerr := rand.Read(gossip); gerr != nil {
			return nil, nil, gerr
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{karpv1.LabelManagedBy: karpv1.ManagedByJoiner}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{CACertKey: ca.CertPEM, CAKeyKey: ca.KeyPEM, GossipKeyKey: gossip}}
		if _, err = secrets.Create(ctx, s, metav1.CreateOptions{}); err == nil {
			return ca, gossip, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("creating CA secret %s/%s: %w", namespace, name, err)
		}
		s, err = secrets.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading CA secret %s/%s: %w", namespace, name, err)
	}
	certPEM, keyPEM := s.Data[CACertKey], s.Data[CAKeyKey]
	if len(bytes.TrimSpace(certPEM)) == 0 || len(bytes.TrimSpace(keyPEM)) == 0 {
		return nil, nil, fmt.Errorf("CA secret %s/%s: want keys %s and %s", namespace, name, CACertKey, CAKeyKey)
	}
	ca, err := cluster.ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA secret %s/%s: %w", namespace, name, err)
	}
	gossip := s.Data[GossipKeyKey]
	if n := len(gossip); n != 0 && n != 16 && n != 24 && n != 32 {
		return nil, nil, fmt.Errorf("CA secret %s/%s: %s is %d bytes, want 16, 24 or 32", namespace, name, GossipKeyKey, n)
	}
	return ca, gossip, nil
}
