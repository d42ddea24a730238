package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/testenv"
)

// hostIP is an address of this machine the API server may proxy to (it
// refuses loopback and link-local addresses).
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address for the API server to proxy to")
	return ""
}

// TestStatusThroughAPIServerProxy: `joiner status` with only a kubeconfig
// reaches a coordinator through the real kube-apiserver's service proxy
// (and pods proxy with --pod): the API server drops Authorization, the
// token arrives in X-Joiner-Authorization, and the coordinator's real
// TokenReview + SubjectAccessReview let a user who may list NodeClaims in
// and refuse one who may only proxy.
func TestStatusThroughAPIServerProxy(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ip := hostIP(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kc := env.Client

	var mu sync.Mutex
	var seen []http.Header
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	sec := security{tls: &cluster.TLS{}} // only "TLS is on" matters to the authenticator
	auth := (&securityFlags{}).statusAuthenticator(sec, &kube.Clients{Kube: kc})
	srv := startStatusServerWith(t, filepath.Join(t.TempDir(), "tls"), statusServerOptions{host: ip, statusAuth: auth, wrap: record})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())

	const ns = "joiner"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	labels := map[string]string{"app.kubernetes.io/name": "joiner", "app.kubernetes.io/component": "coordinator"}
	// The chart's two Services: headless for peers (skipped), ClusterIP for
	// clients. No selector: the endpoints point at the test's server.
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "joiner-coordinator-peers", Labels: labels},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(int32(port))}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "joiner-coordinator", Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(int32(port))}}}},
	} {
		_, err = kc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		must(err)
	}
	pod, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "joiner-coordinator-0", Labels: labels},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "coordinator", Image: "joiner",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}}}}, metav1.CreateOptions{})
	must(err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	_, err = kc.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	must(err)
	// The API server's service proxy picks a ready endpoint of the slices
	// (one with a target ref).
	ready, portName, p32 := true, "http", int32(port)
	_, err = kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "joiner-coordinator-1", Labels: map[string]string{discoveryv1.LabelServiceName: "joiner-coordinator"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &p32}},
	}, metav1.CreateOptions{})
	must(err)

	// Two users: an operator who may proxy and list NodeClaims, and one
	// who may only proxy.
	for _, sa := range []string{"operator", "proxy-only"} {
		_, err = kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
		subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
		_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-proxy"},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "coordinator-proxy"}, Subjects: subject}, metav1.CreateOptions{})
		must(err)
	}
	_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "coordinator-proxy"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"services/proxy", "pods/proxy"}, Verbs: []string{"get"}},
	}}, metav1.CreateOptions{})
	must(err)
	_, err = kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodeclaim-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodeclaims"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	must(err)
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "operator-nodeclaims"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodeclaim-viewer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: ns}}}, metav1.CreateOptions{})
	must(err)
	kubeconfig := func(sa string) string {
		t.Helper()
		tok, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		must(err)
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthority: env.Config.CAFile}
		cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa, Namespace: ns}
		cfg.CurrentContext = sa
		path := filepath.Join(t.TempDir(), sa+".kubeconfig")
		must(clientcmd.WriteToFile(*cfg, path))
		return path
	}
	operator, proxyOnly := kubeconfig("operator"), kubeconfig("proxy-only")

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"service proxy, namespace from the context", []string{"--kubeconfig", operator}},
		{"service proxy, -n and --service", []string{"--kubeconfig", operator, "-n", ns, "--service", "joiner-coordinator"}},
		{"pods proxy", []string{"--kubeconfig", operator, "--pod", "joiner-coordinator-0"}},
		{"no namespace anywhere: found in every namespace", []string{"--kubeconfig", env.Kubeconfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			out, err := runStatus(t, append(tc.args, "-o", "json")...)
			if err != nil {
				t.Fatal(err)
			}
			var st api.Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if st.ServedBy != "coordinator-0" || len(st.Instances) != 1 {
				t.Fatalf("status %+v", st)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the coordinator saw no request")
			}
			for _, h := range seen {
				if h.Get("Authorization") != "" || !strings.HasPrefix(h.Get(api.ProxiedAuthorizationHeader), "Bearer ") {
					t.Errorf("coordinator got Authorization %q, %s %q: want the token only in the latter",
						h.Get("Authorization"), api.ProxiedAuthorizationHeader, h.Get(api.ProxiedAuthorizationHeader))
				}
			}
		})
	}

	_, err = runStatus(t, "--kubeconfig", proxyOnly)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), `may not list nodeclaims.karpenter.sh`) {
		t.Fatalf("a user who may not list NodeClaims: %v", err)
	}
	_, err = runStatus(t, "--kubeconfig", env.Kubeconfig, "-n", "default")
	if err == nil || !strings.Contains(err.Error(), "no coordinator Service in namespace default") {
		t.Fatalf("wrong namespace: %v", err)
	}
}
