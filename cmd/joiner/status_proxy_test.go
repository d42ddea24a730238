package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
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

// statusReaderRules are the rules of the chart's status-reader Role
// (templates/coordinator-rbac.yaml; packaging TestStatusReaderRole checks
// the chart's own against the API server) for the coordinator Service svc.
func statusReaderRules(svc string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{svc + "-status"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{svc}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"services/proxy"}, ResourceNames: []string{"https:" + svc + ":http"}, Verbs: []string{"get"}},
	}
}

// TestStatusThroughAPIServerProxy: `joiner status` with only a kubeconfig
// reaches a coordinator through the real kube-apiserver's service proxy
// (and pods proxy with --pod). It requests a token of the status
// ServiceAccount for audience joiner-status and sends only that: the
// coordinator never sees the kubeconfig's credential. A user bound to the
// status-reader Role reads status (also through --as); one who may proxy
// but not mint that token gets the API server's 403 naming
// serviceaccounts/token; the coordinator's real TokenReview refuses the
// user's own token, another ServiceAccount's token for the status
// audience and the status ServiceAccount's token for another audience.
func TestStatusThroughAPIServerProxy(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ip := hostIP(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kc := env.Client
	const ns, svcName = "joiner", "joiner-coordinator"
	statusSA := svcName + "-status"

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
	auth := (&securityFlags{namespace: ns, statusAccount: statusSA}).statusAuthenticator(sec, &kube.Clients{Kube: kc})
	if auth == nil {
		t.Fatal("no status authenticator with --status-service-account")
	}
	srv := startStatusServerWith(t, filepath.Join(t.TempDir(), "tls"), statusServerOptions{host: ip, statusAuth: auth, wrap: record})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())

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
		{ObjectMeta: metav1.ObjectMeta{Name: svcName + "-peers", Labels: labels},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(int32(port))}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: svcName, Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(int32(port))}}}},
	} {
		_, err = kc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		must(err)
	}
	pod, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: svcName + "-0", Labels: labels},
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
		ObjectMeta:  metav1.ObjectMeta{Name: svcName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &p32}},
	}, metav1.CreateOptions{})
	must(err)

	// The chart's status ServiceAccount and status-reader Role; an
	// operator bound to it, an outsider who may only proxy, and "other", a
	// ServiceAccount that is not the status one.
	for _, sa := range []string{statusSA, "operator", "outsider", "other"} {
		_, err = kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
	}
	role := func(name, subject string, rules []rbacv1.PolicyRule) {
		t.Helper()
		_, err := kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		must(err)
		_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: subject, Namespace: ns}}}, metav1.CreateOptions{})
		must(err)
	}
	role(svcName+"-status-reader", "operator", statusReaderRules(svcName))
	role("proxy-only", "outsider", statusReaderRules(svcName)[1:])
	kubeconfig := func(sa string) (path, token string) {
		t.Helper()
		tok, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		must(err)
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthority: env.Config.CAFile}
		cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa, Namespace: ns}
		cfg.CurrentContext = sa
		path = filepath.Join(t.TempDir(), sa+".kubeconfig")
		must(clientcmd.WriteToFile(*cfg, path))
		return path, tok.Status.Token
	}
	operator, operatorToken := kubeconfig("operator")
	outsider, _ := kubeconfig("outsider")
	adminToken := env.Config.BearerToken

	// reviewsAsStatusToken: the token the coordinator got is the status
	// ServiceAccount's, for the status audience.
	reviewsAsStatusToken := func(t *testing.T, token string) {
		t.Helper()
		tr, err := kc.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
			Token: token, Audiences: []string{api.StatusTokenAudience}}}, metav1.CreateOptions{})
		must(err)
		if !tr.Status.Authenticated || tr.Status.User.Username != kube.ServiceAccountUser(ns, statusSA) {
			t.Errorf("the coordinator got a token of %q (authenticated %v for %s): want the status ServiceAccount's",
				tr.Status.User.Username, tr.Status.Authenticated, api.StatusTokenAudience)
		}
	}

	for _, tc := range []struct {
		name     string
		args     []string
		ownToken string // the kubeconfig's credential, which must not reach the coordinator
	}{
		{"service proxy, namespace from the context", []string{"--kubeconfig", operator}, operatorToken},
		{"service proxy, --service", []string{"--kubeconfig", operator, "-n", ns, "--service", svcName}, operatorToken},
		{"impersonating the operator", []string{"--kubeconfig", env.Kubeconfig, "-n", ns, "--as", kube.ServiceAccountUser(ns, "operator")}, adminToken},
		{"pods proxy, an admin", []string{"--kubeconfig", env.Kubeconfig, "-n", ns, "--pod", svcName + "-0", "--status-service-account", statusSA}, adminToken},
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
				for name, values := range h {
					for _, v := range values {
						if strings.Contains(v, tc.ownToken) {
							t.Errorf("the coordinator got the kubeconfig's own token in %s", name)
						}
					}
				}
				tok, ok := strings.CutPrefix(h.Get(api.ProxiedAuthorizationHeader), "Bearer ")
				if h.Get("Authorization") != "" || !ok {
					t.Fatalf("coordinator got Authorization %q, %s %q: want a token only in the latter",
						h.Get("Authorization"), api.ProxiedAuthorizationHeader, h.Get(api.ProxiedAuthorizationHeader))
				}
				reviewsAsStatusToken(t, tok)
			}
		})
	}

	// Not allowed to mint the status token: the API server's 403 names
	// the permission, and nothing reaches the coordinator.
	mu.Lock()
	seen = nil
	mu.Unlock()
	for _, args := range [][]string{
		{"--kubeconfig", outsider},
		{"--kubeconfig", env.Kubeconfig, "-n", ns, "--as", kube.ServiceAccountUser(ns, "outsider")},
	} {
		_, err = runStatus(t, args...)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), `"serviceaccounts/token"`) ||
			!strings.Contains(err.Error(), "statusReaders") {
			t.Fatalf("%v: a user who may not create the status token: %v", args, err)
		}
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("the coordinator got %d requests from users who may not mint the status token", len(seen))
	}
	mu.Unlock()

	// Other tokens, sent through the same proxy as the admin: refused by
	// the coordinator.
	token := func(sa string, audiences ...string) string {
		t.Helper()
		out, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		must(err)
		return out.Status.Token
	}
	target := "/api/v1/namespaces/" + ns + "/services/https:" + svcName + ":http/proxy"
	for _, tc := range []struct{ name, token, want string }{
		{"the user's own token", operatorToken, "401"},
		{"the status ServiceAccount's token for the API server", token(statusSA), "401"},
		{"the status ServiceAccount's token for the agents' audience", token(statusSA, karpv1.AgentTokenAudience), "401"},
		{"another ServiceAccount's token for the status audience", token("other", api.StatusTokenAudience), "403"},
		{"the status token", token(statusSA, api.StatusTokenAudience), ""},
	} {
		base, client, err := proxyClient(env.Config, tc.token)
		must(err)
		_, err = api.FetchStatus(ctx, client, base+target)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), "answered "+tc.want)) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}

	// Shell completion offers the coordinator's Services and pods.
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"--service", []string{svcName, svcName + "-peers"}},
		{"--pod", []string{svcName + "-0"}},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs([]string{cobra.ShellCompRequestCmd, "status", "--kubeconfig", env.Kubeconfig, "-n", ns, tc.flag, ""})
		must(root.Execute())
		if got, want := strings.Fields(out.String()), append(tc.want, ":4"); !slices.Equal(got, want) {
			t.Errorf("completing %s: %q, want %q", tc.flag, got, want)
		}
	}

	_, err = runStatus(t, "--kubeconfig", env.Kubeconfig, "-n", "default")
	if err == nil || !strings.Contains(err.Error(), "no coordinator Service in namespace default") {
		t.Fatalf("wrong namespace: %v", err)
	}
	_, err = runStatus(t, "--kubeconfig", env.Kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "no namespace: give the one Joiner is installed in with -n") {
		t.Fatalf("no namespace anywhere: %v", err)
	}
}

// TestStatusProxyClientRefusesRedirects: whatever answers behind the proxy
// cannot bounce the status token elsewhere with a redirect.
func TestStatusProxyClientRefusesRedirects(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get(api.ProxiedAuthorizationHeader))
		mu.Unlock()
	}))
	defer thief.Close()
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+"/v1/status", http.StatusFound)
	}))
	defer apiserver.Close()

	base, client, err := proxyClient(&rest.Config{Host: apiserver.URL, BearerToken: "kubeconfig-token"}, "status-token")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.FetchStatus(t.Context(), client, base+"/api/v1/namespaces/joiner/services/https:j:http/proxy")
	if err == nil || !strings.Contains(err.Error(), "refusing the redirect") {
		t.Fatalf("err %v, want the redirect refused", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Fatalf("the redirect target got %d requests (%q)", len(elsewhere), elsewhere)
	}
}
