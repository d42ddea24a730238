package packaging_test

import (
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/test/kubetest"
)

// TestStatusReaderRole: against a real kube-apiserver (RBAC), the chart's
// status ServiceAccount, status-reader Role and statusReaders binding are
// applied as rendered. A status reader may mint the status ServiceAccount's
// token and proxy to the coordinator Service as `joiner status` does
// (https:<service>:http), and nothing else: not the coordinators' own
// ServiceAccount's token, not another Service, not Secrets. Someone not
// bound may mint nothing, and the status ServiceAccount's own token may do
// nothing at all.
func TestStatusReaderRole(t *testing.T) {
	const ns = "joiner"
	ctx, env := rbacEnv(t, 2*time.Minute, ns)
	kc := env.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	objs := objects(t, renderDefault(t, "statusReaders[0].kind=ServiceAccount", "statusReaders[0].name=reader"))
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" && o.GetLabels()["app.kubernetes.io/component"] == "status" {
			var sa corev1.ServiceAccount
			into(t, o, &sa)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("status ServiceAccount %s mounts its token into pods", sa.Name)
			}
		}
	}
	applied := applyObjects(ctx, t, env, objs, func(o *unstructured.Unstructured) bool {
		return o.GetLabels()["app.kubernetes.io/component"] == "status"
	})
	for _, want := range []string{"ServiceAccount/joiner-coordinator-status", "Role/joiner-coordinator-status-reader", "RoleBinding/joiner-coordinator-status-reader"} {
		if !applied[want] {
			t.Fatalf("applied %v: no %s", applied, want)
		}
	}
	// The coordinators' ServiceAccount and Service (no endpoints: a proxied
	// request that passes authorization ends in 503), another Service.
	for _, sa := range []string{"joiner-coordinator", "reader", "stranger"} {
		_, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
	}
	for _, svc := range []string{"joiner-coordinator", "other"} {
		_, err := kc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}, metav1.CreateOptions{})
		must(err)
	}

	as := func(sa string) kubernetes.Interface {
		t.Helper()
		return kubetest.ClientAs(t, env.Config, kubetest.Token(ctx, t, kc, ns, sa))
	}
	mint := func(cs kubernetes.Interface, sa string) error {
		exp := int64(600)
		_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
			Audiences: []string{"joiner-status"}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		return err
	}
	proxy := func(cs kubernetes.Interface, svc string) error {
		return cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/" + ns + "/services/https:" + svc + ":http/proxy/v1/status").Do(ctx).Error()
	}
	reader, stranger := as("reader"), as("stranger")
	statusSA := as("joiner-coordinator-status")

	allowed := func(what string, err error) {
		t.Helper()
		if apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want allowed", what, err)
		}
	}
	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want forbidden", what, err)
		}
	}
	allowed("reader mints the status token", mint(reader, "joiner-coordinator-status"))
	_, err := reader.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=coordinator"})
	allowed("reader lists Services", err)
	_, err = reader.CoreV1().Services(ns).Get(ctx, "joiner-coordinator", metav1.GetOptions{})
	allowed("reader gets the coordinator Service", err)
	if err := proxy(reader, "joiner-coordinator"); err == nil || apierrors.IsForbidden(err) {
		t.Errorf("reader proxies to the coordinator Service: %v, want past authorization (no endpoints: 503)", err)
	}

	denied("reader mints the coordinators' token", mint(reader, "joiner-coordinator"))
	denied("reader proxies to another Service", proxy(reader, "other"))
	_, err = reader.CoreV1().Services(ns).Get(ctx, "other", metav1.GetOptions{})
	denied("reader gets another Service", err)
	_, err = reader.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	denied("reader lists Secrets", err)
	denied("stranger mints the status token", mint(stranger, "joiner-coordinator-status"))
	_, err = statusSA.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	denied("the status ServiceAccount lists Services", err)
	denied("the status ServiceAccount mints its own token", mint(statusSA, "joiner-coordinator-status"))
}
