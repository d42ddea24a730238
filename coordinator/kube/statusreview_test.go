package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestStatusReviewerStatusReaders: against the real kube-apiserver, only a
// token the API server issued for the status ServiceAccount with the
// status audience reads status. The same ServiceAccount's token for the
// API server's audience (what a kubeconfig sends) or the agents', another
// ServiceAccount's token for the status audience, a user's own token and a
// forged one are refused; a coordinator that may not create TokenReviews
// says so, and that answer is not cached.
func TestStatusReviewerStatusReaders(t *testing.T) {
	env, ctx := startAPIServer(t, 2*time.Minute)
	kc := env.Client
	const ns, audience = "joiner", "joiner-status"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"joiner-coordinator-status", "other", "no-reviews"} {
		if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token := func(sa string, audiences ...string) string {
		t.Helper()
		out, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status.Token
	}
	statusUser := ServiceAccountUser(ns, "joiner-coordinator-status")

	r := &StatusReviewer{Client: kc, Audience: audience, User: statusUser}
	for _, tc := range []struct {
		name, token string
		want        error
		msg         string
	}{
		{name: "status token", token: token("joiner-coordinator-status", audience)},
		{name: "the status ServiceAccount's token for the API server", token: token("joiner-coordinator-status"), want: ErrTokenRejected, msg: "want a token for audience joiner-status"},
		{name: "the agents' audience", token: token("joiner-coordinator-status", karpv1.AgentTokenAudience), want: ErrTokenRejected},
		{name: "another ServiceAccount, status audience", token: token("other", audience), want: ErrAccessDenied,
			msg: `user "system:serviceaccount:joiner:other" is not the status ServiceAccount system:serviceaccount:joiner:joiner-coordinator-status`},
		{name: "the admin's own token", token: env.Config.BearerToken, want: ErrTokenRejected},
		{name: "forged", token: "not-a-token", want: ErrTokenRejected},
		{name: "none", token: "", want: ErrTokenRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := r.Review(ctx, tc.token)
			if !errors.Is(err, tc.want) || (tc.want == nil && id.User != statusUser) {
				t.Fatalf("user %q, err %v; want %q, %v", id.User, err, statusUser, tc.want)
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

	// A coordinator without RBAC for TokenReviews.
	weak := rest.AnonymousClientConfig(env.Config)
	weak.BearerToken = token("no-reviews")
	wc, err := kubernetes.NewForConfig(weak)
	if err != nil {
		t.Fatal(err)
	}
	wr := &StatusReviewer{Client: wc, Audience: audience, User: statusUser}
	good := token("joiner-coordinator-status", audience)
	for range 2 {
		_, err := wr.Review(ctx, good)
		if err == nil || errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrTokenRejected) ||
			!strings.Contains(err.Error(), "may not create tokenreviews.authentication.k8s.io") {
			t.Fatalf("err %v, want one naming the missing permission", err)
		}
	}
	if len(wr.reviews.cache) != 0 {
		t.Errorf("a failed review was cached: %d entries", len(wr.reviews.cache))
	}

	// Unconfigured: no review at all.
	if _, err := (&StatusReviewer{Client: kc, Audience: audience}).Review(ctx, good); err == nil || errors.Is(err, ErrTokenRejected) {
		t.Errorf("no user configured: %v", err)
	}
}

// TestStatusReviewerSlowRate: a review rate below one every two seconds
// still allows one review (the burst is at least 1), then answers busy
// until the bucket refills.
func TestStatusReviewerSlowRate(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	calls := 0
	r := &StatusReviewer{Audience: "joiner-status", User: "system:serviceaccount:joiner:s", ReviewLimits: ReviewLimits{ReviewsPerSecond: 0.1, Now: func() time.Time { return now }}}
	review := func(token string) error {
		_, err := r.reviews.do(t.Context(), token, r.limits, func(context.Context, string) (TokenIdentity, error) {
			calls++
			return TokenIdentity{User: r.User}, nil
		}, ErrTokenRejected, ErrAccessDenied)
		return err
	}
	if err := review("a"); err != nil {
		t.Fatalf("first review: %v", err)
	}
	if err := review("b"); !errors.Is(err, ErrReviewBusy) {
		t.Fatalf("second review at once: %v, want busy", err)
	}
	now = now.Add(10 * time.Second)
	if err := review("b"); err != nil {
		t.Fatalf("after 10 s: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d reviews, want 2", calls)
	}
}

func TestParseServiceAccountUser(t *testing.T) {
	for _, tc := range []struct{ in, ns, name string }{
		{"system:serviceaccount:joiner:joiner-coordinator-status", "joiner", "joiner-coordinator-status"},
		{"joiner-coordinator-status", "", ""},
		{"system:serviceaccount:joiner", "", ""},
		{"system:serviceaccount::x", "", ""},
		{"system:serviceaccount:a:b:c", "", ""},
	} {
		ns, name, err := ParseServiceAccountUser(tc.in)
		if ns != tc.ns || name != tc.name || (err == nil) != (tc.ns != "") {
			t.Errorf("%q: %q, %q, %v", tc.in, ns, name, err)
		}
	}
}
