package integration

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestStaleNominationIsReplanned is the 1000-pod provisioning stall in
// small: a pod nominated to a node that something else filled before
// kube-scheduler bound it (here a DaemonSet created while the node was
// launching) must get new capacity. Before nominations were hints with a
// lifetime, the pod waited out its nomination, was planned again, and from
// then on every plan was refused as a whole because the pod was still
// nominated to the launched node: nothing was provisioned any more.
func TestStaleNominationIsReplanned(t *testing.T) {
	// Generous for a loaded machine (it takes about 30 s); the old code
	// never got there.
	h, ctx := harness.StartReady(t, harness.Options{BootDelay: 5 * time.Second, Kubelet: true}, 6*time.Minute)
	objs, err := testenv.ReadObjects("../../examples/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "NodePool" {
			// One instance type with 4 vCPUs: three 1-cpu pods fill a node.
			o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["requirements"] = []any{
				map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []any{"c5.xlarge"}},
				map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
			}
			o.Object["spec"].(map[string]any)["disruption"] = map[string]any{"consolidateAfter": "Never"}
		}
	}
	if err := h.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	kc := h.Env.Client
	three := int32(3)
	lbl := map[string]string{"app": "inflate"}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{Requests: cpu}}}}}}}
	if _, err := kc.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The plan is committed (a NodeClaim exists) and its node is still
	// booting: a DaemonSet appears, and its pod takes a third of the node.
	waitFor(ctx, t, h, "the first nodeclaim", nil, func(s *harness.State) bool { return len(s.NodeClaims) == 1 && len(s.Nodes) == 0 })
	dsLbl := map[string]string{"app": "node-daemon"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-daemon", Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLbl},
				Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					PriorityClassName: "system-node-critical",
					Containers:        []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{Requests: cpu}}}}}}}
	if _, err := kc.AppsV1().DaemonSets(namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One inflate pod no longer fits the node it was planned for; it gets
	// a node of its own, and that well before its nomination would have
	// expired (one minute after the first node was ready).
	st := waitFor(ctx, t, h, "every inflate pod running", nil, func(s *harness.State) bool {
		return s.Pods == 3 && s.Running == 3 && len(s.Nodes) == 2
	})
	if len(st.NodeClaims) != 2 {
		t.Fatalf("%d nodeclaims, want 2", len(st.NodeClaims))
	}
	for _, c := range h.Coordinators {
		if p := h.Process(c.Name); p != nil && strings.Contains(p.LogTail(2000), "pod already nominated") {
			t.Errorf("%s refused a plan because of a nomination:\n%s", c.Name, p.LogTail(20))
		}
	}
}
