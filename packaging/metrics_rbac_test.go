package packaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestMetricsReaderRBAC: against a real kube-apiserver (RBAC), the chart's
// metrics-reader ClusterRole and metricsReaders binding and the
// coordinators' and agents' ClusterRoles are applied as rendered. Through
// either ServiceAccount's client (what a coordinator and an agent review
// with), a metrics reader's token may get /metrics and a ServiceAccount not
// bound may not; the reader may do nothing else.
func TestMetricsReaderRBAC(t *testing.T) {
	const ns = "joiner"
	ctx, env := rbacEnv(t, 2*time.Minute, ns, "monitoring")
	kc := env.Client
	out := renderDefault(t, "metricsReaders[0].kind=ServiceAccount", "metricsReaders[0].name=prometheus", "metricsReaders[0].namespace=monitoring")
	applied := applyObjects(ctx, t, env, objects(t, out), func(o *unstructured.Unstructured) bool {
		k := o.GetKind()
		return k == "ClusterRole" || k == "ClusterRoleBinding"
	})
	for _, want := range []string{"ClusterRole/joiner-metrics-reader", "ClusterRoleBinding/joiner-metrics-reader",
		"ClusterRoleBinding/joiner-coordinator", "ClusterRoleBinding/joiner-agent"} {
		if !applied[want] {
			t.Fatalf("applied %v: no %s", applied, want)
		}
	}
	rules, _, _ := unstructured.NestedSlice(find(objects(t, out), "ClusterRole", "joiner-metrics-reader").Object, "rules")
	if got, _ := json.Marshal(rules); string(got) != `[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]` {
		t.Errorf("metrics-reader rules %s: want exactly get on /metrics", got)
	}

	reader := kubetest.Token(ctx, t, kc, "monitoring", "prometheus")
	stranger := kubetest.Token(ctx, t, kc, "monitoring", "grafana")
	for _, sa := range []string{"joiner-coordinator", "joiner-agent"} {
		r := &kube.AccessReviewer{Client: kubetest.ClientAs(t, env.Config, kubetest.Token(ctx, t, kc, ns, sa))}
		if id, err := r.Review(ctx, reader); err != nil || id.User != "system:serviceaccount:monitoring:prometheus" {
			t.Errorf("%s reviews the metrics reader: %q, %v; want allowed", sa, id.User, err)
		}
		if _, err := r.Review(ctx, stranger); !errors.Is(err, kube.ErrAccessDenied) {
			t.Errorf("%s reviews an unbound ServiceAccount: %v, want denied", sa, err)
		}
	}
	rc := kubetest.ClientAs(t, env.Config, reader)
	_, err := rc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("metrics reader lists pods: %v, want forbidden", err)
	}
	if err := rc.CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx).Error(); err != nil {
		t.Errorf("metrics reader gets the API server's /metrics: %v, want allowed (the same non-resource URL)", err)
	}
}

// rbacEnv starts a kube-apiserver authorizing as EKS does (Node and RBAC,
// NodeRestriction) for a test of the chart's RBAC, which needs helm, and
// creates namespaces. Its context ends after timeout or with the test.
func rbacEnv(t *testing.T, timeout time.Duration, namespaces ...string) (context.Context, *testenv.Env) {
	t.Helper()
	tool(t, "helm")
	env := testenv.Start(t, testenv.Options{APIServerArgs: testenv.NodeAuthorization})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	for _, n := range namespaces {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, env
}

// applyObjects server-side applies the objects keep selects and returns
// kind/name of each.
func applyObjects(ctx context.Context, t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) map[string]bool {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	applied := map[string]bool{}
	for _, o := range objs {
		if !keep(o) {
			continue
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(o.Object)
		force := true
		_, err = env.Dynamic().Resource(m.Resource).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "test", Force: &force})
		if err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		applied[o.GetKind()+"/"+o.GetName()] = true
	}
	return applied
}
