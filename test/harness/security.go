package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/kube"
)

// The harness runs the coordinators as the chart does: mutual TLS from the
// CA in a Secret, agents authenticated by projected ServiceAccount tokens
// bound to their DaemonSet pod (so each may report only about its node).
const (
	SystemNamespace = "kube-system"
	CASecret        = "joiner-coordinator-tls"
	CAConfigMap     = "joiner-coordinator-ca"
	AgentName       = "joiner-agent"
	agentUser       = "system:serviceaccount:" + SystemNamespace + ":" + AgentName
)

// setupTLS creates the CA the coordinators will find (as the first
// coordinator would), writes its certificate for agents, and gives the
// harness's own HTTP client a certificate from it (a peer's view, for
// /v1/status).
func (h *Harness) setupTLS(ctx context.Context) error {
	ca, err := kube.EnsureCA(ctx, h.Env.Client, SystemNamespace, CASecret, CAConfigMap, time.Now())
	if err != nil {
		return fmt.Errorf("harness CA: %w", err)
	}
	h.caFile = filepath.Join(h.opts.Dir, "coordinator-ca.crt")
	if err := os.WriteFile(h.caFile, ca.CertPEM, 0o600); err != nil {
		return err
	}
	me, err := cluster.TLSFromCA(ca, "harness", nil)
	if err != nil {
		return err
	}
	h.http = &http.Client{Timeout: h.http.Timeout, Transport: &http.Transport{TLSClientConfig: me.HTTPClientConfig()}}
	return nil
}

// coordinatorTLSArgs are the coordinator flags of the secure default.
func coordinatorTLSArgs() []string {
	return []string{"--tls-ca-secret", CASecret, "--tls-ca-configmap", CAConfigMap, "--namespace", SystemNamespace,
		"--agent-service-account", agentUser}
}

// setupAgentDaemonSet creates the agents' ServiceAccount and a DaemonSet
// like the chart's (no container runs: the kubelet stand-in marks its pods
// running), whose pods the agents' tokens are bound to.
func (h *Harness) setupAgentDaemonSet(ctx context.Context) error {
	kc := h.Env.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: AgentName, Namespace: SystemNamespace}}
	if _, err := kc.CoreV1().ServiceAccounts(SystemNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("agent service account: %w", err)
	}
	lbl := map[string]string{"app.kubernetes.io/name": AgentName}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: AgentName, Namespace: SystemNamespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{ServiceAccountName: AgentName, PriorityClassName: "system-node-critical",
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpExists}}}}}}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "agent", Image: "joiner"}}}}}}
	if _, err := kc.AppsV1().DaemonSets(SystemNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("agent daemonset: %w", err)
	}
	return nil
}

// agentToken writes a token bound to the agent pod on node (audience
// joiner.io) and returns its path; ok is false while no agent pod is on
// the node yet.
func (h *Harness) agentToken(ctx context.Context, node string) (string, bool, error) {
	kc := h.Env.Client
	pods, err := kc.CoreV1().Pods(SystemNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=" + AgentName, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", false, err
	}
	if len(pods.Items) == 0 {
		return "", false, nil
	}
	pod := pods.Items[0]
	hour := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts(SystemNamespace).CreateToken(ctx, AgentName, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{karpv1.AgentTokenAudience}, ExpirationSeconds: &hour,
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		return "", false, fmt.Errorf("agent token for node %s: %w", node, err)
	}
	path := filepath.Join(h.opts.Dir, "agent-token-"+node)
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		return "", false, err
	}
	return path, true, nil
}
