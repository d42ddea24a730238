package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestTokenReviewNamesTheCallersNode: against the real kube-apiserver,
// the agent's projected token (our audience, bound to its pod) resolves to
// the pod's node; tokens for another audience, another ServiceAccount, not
// bound to a pod, or not tokens at all are rejected; a flood of distinct
// forged tokens is cut by the review rate.
func TestTokenReviewNamesTheCallersNode(t *testing.T) {
	env, ctx := startAPIServer(t, 2*time.Minute)
	kc := env.Client
	const ns = "kube-system"
	for _, sa := range []string{"joiner-agent", "other"} {
		if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range []struct{ name, sa, node string }{{"agent-a", "joiner-agent", "node-a"}, {"agent-b", "joiner-agent", "node-b"}, {"other-a", "other", "node-a"}} {
		if _, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.node}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "exists") {
			t.Fatal(err)
		}
		pod, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: corev1.PodSpec{ServiceAccountName: p.sa, NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "agent"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[p.name] = pod
	}
	token := func(sa, audience string, pod *corev1.Pod) string {
		req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}}}
		if pod != nil {
			req.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
		}
		out, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status.Token
	}
	r := &TokenReviewer{Client: kc, Audience: karpv1.AgentTokenAudience, Users: []string{"system:serviceaccount:kube-system:joiner-agent"}}
	for _, tc := range []struct {
		name     string
		token    string
		wantNode string
		inErr    string
	}{
		{name: "agent of node-a", token: token("joiner-agent", karpv1.AgentTokenAudience, pods["agent-a"]), wantNode: "node-a"},
		{name: "agent of node-b", token: token("joiner-agent", karpv1.AgentTokenAudience, pods["agent-b"]), wantNode: "node-b"},
		{name: "API server's audience", token: token("joiner-agent", "https://kubernetes.default.svc", pods["agent-a"]), inErr: "token rejected"},
		{name: "another service account on node-a", token: token("other", karpv1.AgentTokenAudience, pods["other-a"]), inErr: "is not an agent"},
		{name: "not bound to a pod", token: token("joiner-agent", karpv1.AgentTokenAudience, nil), inErr: "not bound to a pod"},
		{name: "garbage", token: "not-a-jwt", inErr: "token rejected"},
		{name: "none", token: "", inErr: "no bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := r.Review(ctx, tc.token)
			if tc.inErr != "" {
				if !errors.Is(err, ErrTokenRejected) || !strings.Contains(err.Error(), tc.inErr) {
					t.Fatalf("identity %+v, error %v; want a rejection containing %q", id, err, tc.inErr)
				}
				return
			}
			if err != nil || id.Node != tc.wantNode {
				t.Fatalf("identity %+v, error %v; want node %s", id, err, tc.wantNode)
			}
		})
	}

	// A flood of distinct forged tokens: the reviews stop at the rate (a
	// frozen clock: no refill), the rest are told to come back.
	frozen := time.Now()
	flood := &TokenReviewer{Client: kc, Audience: karpv1.AgentTokenAudience, Users: r.Users,
		ReviewLimits: ReviewLimits{ReviewsPerSecond: 5, Now: func() time.Time { return frozen }}}
	busy := 0
	for i := range 50 {
		if _, err := flood.Review(ctx, fmt.Sprintf("forged-%d", i)); errors.Is(err, ErrReviewBusy) {
			busy++
		}
	}
	if busy != 40 {
		t.Fatalf("%d of 50 forged tokens refused as busy, want 40 (burst 10)", busy)
	}
}

// TestTokenReviewNodeCredential: with NodeUsers, a node's own credential
// (as EKS's authenticator maps the kubelet's token: system:node:<name> in
// system:nodes) names that node; a user merely named like a node, or any
// other user, is rejected; without NodeUsers the node's credential is not
// accepted.
func TestTokenReviewNodeCredential(t *testing.T) {
	users := map[string]authnv1.UserInfo{
		"kubelet-a":  {Username: "system:node:ip-10-0-0-1.ec2.internal", Groups: []string{"system:nodes", "system:authenticated"}},
		"look-alike": {Username: "system:node:ip-10-0-0-2.ec2.internal", Groups: []string{"system:authenticated"}},
		"admin":      {Username: "kubernetes-admin", Groups: []string{"system:masters"}},
	}
	kc := fake.NewClientset()
	kc.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		u, ok := users[tr.Spec.Token]
		// Node credentials are not audience-scoped: only a review for the
		// API server's own audience (none asked) authenticates them.
		tr.Status = authnv1.TokenReviewStatus{Authenticated: ok && len(tr.Spec.Audiences) == 0, User: u}
		return true, tr, nil
	})
	for _, tc := range []struct {
		token     string
		nodeUsers bool
		wantNode  string
	}{
		{"kubelet-a", true, "ip-10-0-0-1.ec2.internal"},
		{"kubelet-a", false, ""},
		{"look-alike", true, ""},
		{"admin", true, ""},
	} {
		r := &TokenReviewer{Client: kc, Audience: karpv1.AgentTokenAudience, Users: []string{"system:serviceaccount:kube-system:joiner-agent"}, NodeUsers: tc.nodeUsers}
		id, err := r.Review(context.Background(), tc.token)
		switch {
		case tc.wantNode == "" && !errors.Is(err, ErrTokenRejected):
			t.Errorf("%s (node users %v): %+v, %v; want rejected", tc.token, tc.nodeUsers, id, err)
		case tc.wantNode != "" && (err != nil || id.Node != tc.wantNode):
			t.Errorf("%s: %+v, %v; want node %s", tc.token, id, err, tc.wantNode)
		}
	}
}
