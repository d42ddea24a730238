package termination

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/test/observe"
)

// TestDrainedReasons: the coordinator's drains count each pod they evict
// in karpenter_pods_drained_total with Karpenter's reason: the NodeClaim's
// voluntary disruption reason (Empty, Drifted, Underutilized), "Forceful
// Termination" for every other deletion (expiration, interruption, by
// hand); each eviction also counts in
// karpenter_pods_eviction_requests_total as 200.
func TestDrainedReasons(t *testing.T) {
	for _, tc := range []struct {
		name, annotation, want string
	}{
		{"emptiness", "Empty", "Empty"},
		{"drift", "Drifted", "Drifted"},
		{"consolidation", "Underutilized", "Underutilized"},
		{"expiration", "Expired", drain.ReasonForceful},
		{"interruption", "interrupted", drain.ReasonForceful},
		{"deleted by hand", "", drain.ReasonForceful},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{}, nil, nil)
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Annotations: map[string]string{}}}
			if tc.annotation != "" {
				nc.Annotations[karpv1.AnnotationDisruptionReason] = tc.annotation
			}
			kube := evictingClient(t,
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1"}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "uid-web-1"},
					Spec: corev1.PodSpec{NodeName: "n-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
			d := drain.New(kube, zaptest.NewLogger(t), drain.Options{Observer: r.c.metrics, PollInterval: time.Millisecond})
			req := r.c.drainRequest(nc, "n-1", Reason(nc), time.Now().Add(time.Minute))
			if _, err := d.Drain(context.Background(), req); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			if got, ok := observe.Sample(t, r.reg, "karpenter_pods_drained_total", map[string]string{"reason": tc.want}); !ok || got != 1 {
				t.Errorf("karpenter_pods_drained_total{reason=%q} = %v (found %v), want 1", tc.want, got, ok)
			}
			if got, ok := observe.Sample(t, r.reg, "karpenter_pods_eviction_requests_total", map[string]string{"code": "200"}); !ok || got != 1 {
				t.Errorf(`karpenter_pods_eviction_requests_total{code="200"} = %v (found %v), want 1`, got, ok)
			}
		})
	}
}

// evictingClient is a fake clientset whose evictions delete the pod (as
// the API server does when no budget forbids it).
func evictingClient(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		return true, nil, c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), ev.Name)
	})
	return c
}
