package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestAccessReviewStatusReaders: against the real kube-apiserver (RBAC), a
// ServiceAccount's ordinary token (the API server's audience) that may
// list nodeclaims.karpenter.sh reads status; one that may not is denied,
// naming the permission; an agent's token for Joiner's audience and a
// forged one are rejected; a coordinator that may not create
// SubjectAccessReviews says so, and that answer is not cached.
func TestAccessReviewStatusReaders(t *testing.T) {
	env, ctx := startAPIServer(t, 2*time.Minute)
	kc := env.Client
	const ns = "kube-system"
	for _, sa := range []string{"viewer", "nobody", "reviewer-without-sar"} {
		if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(name, sa string, rules []rbacv1.PolicyRule) {
		t.Helper()
		if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
		if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("nodeclaim-viewer", "viewer", []rbacv1.PolicyRule{{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodeclaims"}, Verbs: []string{"get", "list", "watch"}}})
	bind("reviews-without-sar", "reviewer-without-sar", []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}})
	token := func(sa string, audiences ...string) string {
		t.Helper()
		out, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status.Token
	}

	r := &AccessReviewer{Client: kc, Access: StatusAccess}
	for _, tc := range []struct {
		name, token string
		want        error
		user, msg   string
	}{
		{name: "may list nodeclaims", token: token("viewer"), user: "system:serviceaccount:kube-system:viewer"},
		{name: "may not", token: token("nobody"), want: ErrAccessDenied, msg: `user "system:serviceaccount:kube-system:nobody" may not list nodeclaims.karpenter.sh`},
		{name: "agent audience", token: token("viewer", karpv1.AgentTokenAudience), want: ErrTokenRejected},
		{name: "forged", token: "not-a-token", want: ErrTokenRejected},
		{name: "none", token: "", want: ErrTokenRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := r.Review(ctx, tc.token)
			if !errors.Is(err, tc.want) || (tc.want == nil && id.User != tc.user) {
				t.Fatalf("user %q, err %v; want %q, %v", id.User, err, tc.user, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			// The answer is cached: the same again.
			if id2, err2 := r.Review(ctx, tc.token); id2 != id || !errors.Is(err2, tc.want) {
				t.Errorf("second review: %q, %v", id2.User, err2)
			}
		})
	}

	// A coordinator without RBAC for SubjectAccessReviews.
	weak := rest.AnonymousClientConfig(env.Config)
	weak.BearerToken = token("reviewer-without-sar")
	wc, err := kubernetes.NewForConfig(weak)
	if err != nil {
		t.Fatal(err)
	}
	wr := &AccessReviewer{Client: wc, Access: StatusAccess}
	viewer := token("viewer")
	for range 2 {
		_, err := wr.Review(ctx, viewer)
		if err == nil || errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrTokenRejected) ||
			!strings.Contains(err.Error(), "may not create subjectaccessreviews.authorization.k8s.io") {
			t.Fatalf("err %v, want one naming the missing permission", err)
		}
	}
	if len(wr.reviews.cache) != 0 {
		t.Errorf("a failed review was cached: %d entries", len(wr.reviews.cache))
	}
}
