package kubetest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// PauseContainers is the one container of the tests' pods (no kubelet runs
// it).
func PauseContainers() []corev1.Container {
	return []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}
}

// CreateWeb creates the Deployment web of ns (pods labelled app=web, a
// 5 s grace period) with replicas pods, under the PDB web that allows one
// of them to be unavailable.
func CreateWeb(ctx context.Context, t testing.TB, c kubernetes.Interface, ns string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	grace := int64(5)
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: PauseContainers(), TerminationGracePeriodSeconds: &grace}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ReadyOn counts the pods of ns on node that are Ready and not being
// deleted (-1 when they cannot be listed).
func ReadyOn(ctx context.Context, c kubernetes.Interface, ns, node string) int {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return -1
	}
	n := 0
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil && PodReady(&pods.Items[i]) {
			n++
		}
	}
	return n
}

// ByName selects the object name.
func ByName(name string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
}

// Watch calls fn with each event of w, on a goroutine of its own, until
// ctx ends or w closes; the test's cleanup waits for it.
func Watch(ctx context.Context, t testing.TB, w watch.Interface, fn func(watch.Event)) {
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				fn(ev)
			}
		}
	}()
}

// MinReadyReplicas watches the Deployment ns/name and returns the fewest
// ready replicas its updates reported (replicas until one does).
func MinReadyReplicas(ctx context.Context, t testing.TB, c kubernetes.Interface, ns, name string, replicas int32) func() int32 {
	t.Helper()
	w, err := c.AppsV1().Deployments(ns).Watch(ctx, ByName(name))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	least := replicas
	Watch(ctx, t, w, func(ev watch.Event) {
		if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type == watch.Modified {
			mu.Lock()
			least = min(least, d.Status.ReadyReplicas)
			mu.Unlock()
		}
	})
	return func() int32 {
		mu.Lock()
		defer mu.Unlock()
		return least
	}
}

// Unstructured is obj (a typed object or a map) as an unstructured object,
// its integers int64 as the API machinery wants them.
func Unstructured(t testing.TB, obj any) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}
