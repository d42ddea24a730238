package packaging_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/test/kubetest"
)

// TestAgentHoldsOnlyItsOwnNode: against a real kube-apiserver with
// --authorization-mode=Node,RBAC and NodeRestriction, the chart's agent
// RBAC and admission policy are applied as rendered; an agent whose token
// is bound to its pod on node-a may cordon and taint node-a, but not
// node-b, may not delete node-b's pods, and (default: the coordinator
// drains) may not evict any pod. With agent.localDrain it may delete
// node-a's pods but still not node-b's.
func TestAgentHoldsOnlyItsOwnNode(t *testing.T) {
	ctx, env := rbacEnv(t, 3*time.Minute, "joiner")
	kc := env.Client
	applyAgent := func(t *testing.T, sets ...string) {
		applied := applyObjects(ctx, t, env, objects(t, renderDefault(t, sets...)), func(o *unstructured.Unstructured) bool {
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				return strings.Contains(o.GetName(), "agent")
			}
			return false
		})
		if len(applied) < 5 {
			t.Fatalf("applied %d agent objects, want the service account, roles, bindings and policy", len(applied))
		}
	}
	applyAgent(t)

	pods := map[string]*corev1.Pod{}
	for _, node := range []string{"node-a", "node-b"} {
		if _, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ ns, name, sa string }{{"joiner", "agent-" + node, "joiner-agent"}, {"default", "app-" + node, ""}} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns},
				Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: p.sa, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			got, err := kc.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods[p.name] = got
		}
	}
	// The agent of node-a, as the kubelet would mount its token.
	tr, err := kc.CoreV1().ServiceAccounts("joiner").CreateToken(ctx, "joiner-agent", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "agent-node-a", UID: pods["agent-node-a"].UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent := kubetest.ClientAs(t, env.Config, tr.Status.Token)
	cordon := func(node string) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":true,"taints":[{"key":"joiner.io/interruption","effect":"NoSchedule"}]}}`)
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	// The policy takes effect asynchronously: wait until it denies.
	for {
		err := cordon("node-b")
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "only its own node") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cordoning node-b as node-a's agent: %v; want the admission policy's denial", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cordon("node-a"); err != nil {
		t.Fatalf("the agent cannot cordon its own node: %v", err)
	}
	if err := agent.CoreV1().Pods("default").Delete(ctx, "app-node-b", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting node-b's pod: %v, want forbidden", err)
	}
	for _, pod := range []string{"app-node-a", "app-node-b"} {
		err := agent.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("evicting %s with the coordinator draining: %v, want forbidden", pod, err)
		}
	}

	t.Run("localDrain", func(t *testing.T) {
		applyAgent(t, "agent.localDrain=true")
		// RBAC updates are immediate; node-a's pods may go, node-b's not.
		for {
			err := agent.CoreV1().Pods("default").Delete(ctx, "app-node-a", metav1.DeleteOptions{})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("deleting its own node's pod with localDrain: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := agent.CoreV1().Pods("default").Delete(ctx, "app-node-b", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) ||
			!strings.Contains(err.Error(), "only its own node") {
			t.Fatalf("deleting node-b's pod with localDrain: %v, want the admission policy's denial", err)
		}
	})
}
