package kubetest

import (
	"context"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Token creates ServiceAccount sa in ns when absent and returns a token
// the API server issues for it (audiences: none, the API server's own).
func Token(ctx context.Context, t testing.TB, c kubernetes.Interface, ns, sa string, audiences ...string) string {
	t.Helper()
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("ServiceAccount %s/%s: %v", ns, sa, err)
	}
	out, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, sa, err)
	}
	return out.Status.Token
}

// ClientAs is a client of the API server at cfg that sends token alone.
func ClientAs(t testing.TB, cfg *rest.Config, token string) kubernetes.Interface {
	t.Helper()
	rc := rest.AnonymousClientConfig(cfg)
	rc.BearerToken = token
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// MetricsScrapers are ServiceAccounts of a metrics test, set up by
// SetUpMetricsRBAC in the namespace it names.
type MetricsScrapers struct {
	// Reviewer's client may create tokenreviews and subjectaccessreviews
	// (what a coordinator's and an agent's ServiceAccount hold).
	Reviewer kubernetes.Interface
	// Reader's token is bound to a ClusterRole allowing get on /metrics;
	// Stranger's to nothing.
	Reader, Stranger string
	// GroupReader's ServiceAccount, in namespace <ns>-team, is allowed
	// through its group system:serviceaccounts:<ns>-team only (a review
	// must pass the user's groups).
	GroupReader string
}

// SetUpMetricsRBAC creates namespace ns, a reviewer ServiceAccount that
// may create token and subject access reviews, a reader bound to a
// ClusterRole that may get /metrics, a group reader in namespace
// <ns>-team bound to it by its namespace's ServiceAccount group, and a
// stranger bound to nothing, as the chart does (packaging's test applies
// the chart's own objects).
func SetUpMetricsRBAC(ctx context.Context, t testing.TB, c kubernetes.Interface, cfg *rest.Config, ns string) MetricsScrapers {
	t.Helper()
	team := ns + "-team"
	for _, n := range []string{ns, team} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	bind := func(name string, rules []rbacv1.PolicyRule, subjects ...rbacv1.Subject) {
		t.Helper()
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind(ns+"-reviewer", []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "reviewer", Namespace: ns})
	bind(ns+"-metrics-reader", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + team})
	return MetricsScrapers{
		Reviewer:    ClientAs(t, cfg, Token(ctx, t, c, ns, "reviewer")),
		Reader:      Token(ctx, t, c, ns, "reader"),
		Stranger:    Token(ctx, t, c, ns, "stranger"),
		GroupReader: Token(ctx, t, c, team, "scraper"),
	}
}
