package kube

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/joiner-dev/joiner/internal/httpauth"
	"github.com/joiner-dev/joiner/test/kubetest"
)

// TestAccessReviewerMetricsReaders: against the real kube-apiserver
// (RBAC), a token for the API server's audience whose user may get
// /metrics passes; a user without that rule is denied; a token for another
// audience, a forged one and none are rejected. A reviewer that may create
// TokenReviews but not SubjectAccessReviews says which permission it
// lacks, and that answer is not cached.
func TestAccessReviewerMetricsReaders(t *testing.T) {
	env, ctx := startAPIServer(t, 2*time.Minute)
	const ns = "monitoring"
	s := kubetest.SetUpMetricsRBAC(ctx, t, env.Client, env.Config, ns)
	r := &AccessReviewer{Client: s.Reviewer}
	reader := ServiceAccountUser(ns, "reader")
	for _, tc := range []struct {
		name, token string
		want        error
		httpErr     error
		user, msg   string
	}{
		{name: "metrics reader", token: s.Reader, user: reader},
		{name: "reader by its namespace's group", token: s.GroupReader, user: ServiceAccountUser(ns+"-team", "scraper")},
		{name: "stranger", token: s.Stranger, want: ErrAccessDenied, httpErr: httpauth.ErrForbidden,
			user: ServiceAccountUser(ns, "stranger"), msg: `user "system:serviceaccount:monitoring:stranger" may not get /metrics`},
		{name: "reader's token for another audience", token: kubetest.Token(ctx, t, env.Client, ns, "reader", "joiner-status"),
			want: ErrTokenRejected, httpErr: httpauth.ErrUnauthenticated},
		{name: "forged", token: "not-a-token", want: ErrTokenRejected, httpErr: httpauth.ErrUnauthenticated},
		{name: "none", token: "", want: ErrTokenRejected, httpErr: httpauth.ErrUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := r.Review(ctx, tc.token)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || id.User != tc.user {
				t.Fatalf("user %q, err %v; want %q, %v", id.User, err, tc.user, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			// Cached: the same again, and the HTTP guard's vocabulary.
			user, herr := r.Authorize(ctx, tc.token)
			if user != tc.user || !errors.Is(herr, tc.httpErr) || (tc.httpErr == nil) != (herr == nil) {
				t.Errorf("Authorize: %q, %v; want %q, %v", user, herr, tc.user, tc.httpErr)
			}
		})
	}

	// A reviewer that may create TokenReviews only.
	kc := env.Client
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tokenreviews-only"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tokenreviews-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tokenreviews-only"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "weak", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wr := &AccessReviewer{Client: kubetest.ClientAs(t, env.Config, kubetest.Token(ctx, t, kc, ns, "weak"))}
	for range 2 {
		_, err := wr.Review(ctx, s.Reader)
		if err == nil || errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrTokenRejected) ||
			!strings.Contains(err.Error(), "may not create subjectaccessreviews.authorization.k8s.io") {
			t.Fatalf("err %v, want one naming the missing permission", err)
		}
		if herr := HTTPAuthError(err); !errors.Is(herr, err) {
			t.Fatalf("HTTPAuthError(%v) = %v: a failed review must stay a failure (503)", err, herr)
		}
	}
	if len(wr.reviews.cache) != 0 {
		t.Errorf("a failed review was cached: %d entries", len(wr.reviews.cache))
	}
}

// fakeAccessReviews is an API server for AccessReviewer: tokens[token]
// authenticates as that user, who may get /metrics when allowed; it counts
// the token reviews made.
func fakeAccessReviews(tokens map[string]string, allowed string, reviews *int) *fake.Clientset {
	kc := fake.NewClientset()
	kc.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		user, ok := tokens[tr.Spec.Token]
		tr.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: authnv1.UserInfo{Username: user}}
		return true, tr, nil
	})
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == allowed
		return true, sar, nil
	})
	return kc
}

// TestAccessReviewerCacheLifetimes: an allow is cached for the TTL (a
// minute by default), a denial and a rejection for a tenth of it; a token
// that is not a JWT is refused without a review and spends no review rate.
func TestAccessReviewerCacheLifetimes(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	const reader, stranger, forged = "eyJh.cmVhZGVy.c2ln", "eyJh.c3RyYW5nZXI.c2ln", "eyJh.Zm9yZ2Vk.c2ln"
	reviews := 0
	kc := fakeAccessReviews(map[string]string{reader: "system:serviceaccount:monitoring:prometheus", stranger: "system:serviceaccount:default:x"},
		"system:serviceaccount:monitoring:prometheus", &reviews)
	r := &AccessReviewer{Client: kc, ReviewLimits: ReviewLimits{ReviewsPerSecond: 1000, Now: func() time.Time { return now }}}
	for _, tc := range []struct {
		token string
		want  error
		ttl   time.Duration
	}{
		{token: reader, ttl: time.Minute},
		{token: stranger, want: ErrAccessDenied, ttl: 6 * time.Second},
		{token: forged, want: ErrTokenRejected, ttl: 6 * time.Second},
	} {
		start := now
		review := func(at time.Duration, wantReviews int) {
			t.Helper()
			now = start.Add(at)
			before := reviews
			if _, err := r.Review(t.Context(), tc.token); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("%s at %v: %v, want %v", tc.token, at, err, tc.want)
			}
			if got := reviews - before; got != wantReviews {
				t.Fatalf("%s at %v: %d reviews, want %d", tc.token, at, got, wantReviews)
			}
		}
		review(0, 1)
		review(tc.ttl-time.Second, 0) // cached
		review(tc.ttl, 1)             // expired: reviewed again
		now = start.Add(2 * tc.ttl)
	}

	// Not JWTs: refused unreviewed, however many, and the one review the
	// rate allows is still there for a real token.
	slow := &AccessReviewer{Client: kc, ReviewLimits: ReviewLimits{ReviewsPerSecond: 0.1, Now: func() time.Time { return now }}}
	before := reviews
	for _, junk := range []string{"forged", "a.b", "a..c", ".b.c", "a.b.c.d", "a.b.c=", "a.b/c.d", "a b.c.d", "Bearer a.b.c"} {
		for range 3 {
			if _, err := slow.Review(t.Context(), junk); !errors.Is(err, ErrTokenRejected) || !strings.Contains(err.Error(), "not a JWT") {
				t.Fatalf("%q: %v, want rejected as not a JWT", junk, err)
			}
		}
	}
	if reviews != before {
		t.Fatalf("%d reviews of tokens that are not JWTs", reviews-before)
	}
	if _, err := slow.Review(t.Context(), reader); err != nil {
		t.Fatalf("reader after junk: %v, want allowed (junk spent the review rate?)", err)
	}
}

// TestAccessReviewerStaleAllow: while forged tokens spend the review rate,
// a token allowed before is still allowed for 5 TTLs after its answer
// expired (nothing new cached), then gets busy; a denial is never served
// stale.
func TestAccessReviewerStaleAllow(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := t0
	const reader, stranger = "eyJh.cmVhZGVy.c2ln", "eyJh.c3RyYW5nZXI.c2ln"
	reviews := 0
	kc := fakeAccessReviews(map[string]string{reader: "system:serviceaccount:monitoring:prometheus", stranger: "system:serviceaccount:default:x"},
		"system:serviceaccount:monitoring:prometheus", &reviews)
	// 0.1 reviews a second, burst 1.
	r := &AccessReviewer{Client: kc, ReviewLimits: ReviewLimits{ReviewsPerSecond: 0.1, Now: func() time.Time { return now }}}
	forgeries := 0
	spendRate := func() {
		t.Helper()
		forgeries++
		if _, err := r.Review(t.Context(), fmt.Sprintf("eyJh.Zm9yZ2Vk%d.c2ln", forgeries)); !errors.Is(err, ErrTokenRejected) {
			t.Fatalf("forgery: %v, want rejected", err)
		}
		if _, err := r.Review(t.Context(), fmt.Sprintf("eyJh.Zm9yZ2Vk%d.c2ln", forgeries+1000)); !errors.Is(err, ErrReviewBusy) {
			t.Fatalf("second forgery: %v, want busy", err)
		}
	}
	if _, err := r.Review(t.Context(), reader); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(30 * time.Second)
	if _, err := r.Review(t.Context(), stranger); !errors.Is(err, ErrAccessDenied) {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte(reader))
	cachedUntil := r.reviews.cache[key].expires

	for _, at := range []time.Duration{61 * time.Second, 3 * time.Minute, 6*time.Minute - time.Second} {
		now = t0.Add(at)
		spendRate()
		before, entries := reviews, len(r.reviews.cache)
		id, err := r.Review(t.Context(), reader)
		if err != nil || id.User != "system:serviceaccount:monitoring:prometheus" {
			t.Fatalf("reader at %v, rate spent: %+v, %v; want its stale allow", at, id, err)
		}
		if reviews != before || len(r.reviews.cache) != entries || r.reviews.cache[key].expires != cachedUntil {
			t.Fatalf("reader at %v: a stale answer reviewed or cached something", at)
		}
		if _, err := r.Review(t.Context(), stranger); !errors.Is(err, ErrReviewBusy) {
			t.Fatalf("stranger at %v, rate spent: %v, want busy (denials are not served stale)", at, err)
		}
	}
	now = t0.Add(6 * time.Minute) // the allow expired 5 TTLs ago; the rate is still spent (1 s ago)
	if _, err := r.Review(t.Context(), reader); !errors.Is(err, ErrReviewBusy) {
		t.Fatalf("reader 5 TTLs after expiry, rate spent: %v, want busy", err)
	}
	now = now.Add(10 * time.Second) // the rate refilled: reviewed and cached afresh
	if _, err := r.Review(t.Context(), reader); err != nil || !r.reviews.cache[key].expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("reader with the rate back: %v, cached until %v", err, r.reviews.cache[key].expires)
	}
}
