package disruption

import (
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterExpiration ports Karpenter v1.14.1's
// pkg/controllers/nodeclaim/expiration/suite_test.go (expiration left the
// disruption controller in v1: a NodeClaim past expireAfter is deleted at
// once, forcefully).
func TestKarpenterExpiration(t *testing.T) {
	const file = "pkg/controllers/nodeclaim/expiration/suite_test.go"
	pool := func() []*karpv1.NodePool { return kPools(kPool("default")) }
	// expiring is a busy node whose NodeClaim has expireAfter d.
	expiring := func(name string, d karpv1.Duration) *Node {
		n := testNode(name, "default", od, 4, rsPod("p-"+name, "1"))
		n.NodeClaim.Spec.ExpireAfter = d
		return n
	}
	thirtySeconds := karpv1.NewDuration(30 * time.Second)

	runKarpenterCases(t, []karpCase{
		{
			name: "a NodeClaim past expireAfter is expired",
			from: file + ` Expiration "should remove nodeclaims that are expired"`,
			in:   func() *Input { return kIn(pool(), expiring("n", thirtySeconds)) },
			want: allOf(decides(MethodExpiration, "n"), replacing(0)),
		},
		{
			name: "expireAfter Never disables expiration",
			from: file + ` Expiration "should not remove the NodeClaims when expiration is disabled"`,
			in:   func() *Input { return kIn(pool(), expiring("n", karpv1.NeverDuration())) },
			want: noMethod(MethodExpiration),
		},
		{
			name: "a NodeClaim within expireAfter is not expired",
			from: file + ` Expiration "should not remove non-expired NodeClaims"`,
			in: func() *Input {
				in := kIn(pool(), expiring("n", karpv1.NewDuration(200*time.Second)))
				in.Now = t0.Add(100 * time.Second)
				return in
			},
			want: allOf(noMethod(MethodExpiration), afterwards(clockAt(t0.Add(200*time.Second)), decides(MethodExpiration, "n"))),
		},
		{
			name: "a NodeClaim expires even though its node is not initialized or Ready",
			from: file + ` Expiration "should delete NodeClaims if the nodeClaim is expired but the node isn't"`,
			in: func() *Input {
				n := uninitializedNode(expiring("n", thirtySeconds))
				n.Ready = false
				return kIn(pool(), n)
			},
			want: decides(MethodExpiration, "n"),
		},
		{
			name: "a NodeClaim already being deleted is not expired again",
			from: file + ` Expiration "shouldn't expire the same NodeClaim multiple times"`,
			in:   func() *Input { return kIn(pool(), beingDeleted(expiring("n", thirtySeconds))) },
			want: noMethod(MethodExpiration),
		},
		{
			name: "a node Joiner does not manage never expires",
			from: file + ` Expiration "should ignore expired NodeClaims that are not managed by this Karpenter instance"`,
			in:   func() *Input { return kIn(pool(), unmanagedNode("foreign", 4, rsPod("p", "1"))) },
			want: decidesNothing(),
		},
		{
			name: "expiration is forceful: budgets, do-not-disrupt and PDBs do not hold it",
			from: `pkg/controllers/nodeclaim/expiration/controller.go Reconcile (deletes without consulting budgets, do-not-disrupt or PDBs), with ` + file + ` "should remove nodeclaims that are expired"`,
			in: func() *Input {
				p := kPool("default", withNodesBudget("0"))
				n := nodeAnnotated(testNode("n", "default", od, 4, withDoNotDisrupt(rsPod("web", "1"), "true")), karpv1.AnnotationDoNotDisrupt, "true")
				n.NodeClaim.Spec.ExpireAfter = thirtySeconds
				in := kIn(kPools(p), n)
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("web", "web"))
				return in
			},
			want: decides(MethodExpiration, "n"),
		},
		{
			name: "the NodeClaim's own expireAfter counts from its creation",
			from: file + ` Expiration "should return the requeue interval for the time between now and when the nodeClaim expires"`,
			in: func() *Input {
				n := createdAt(expiring("n", karpv1.NewDuration(200*time.Second)), kNow.Add(-100*time.Second))
				return kIn(pool(), n)
			},
			want: allOf(noMethod(MethodExpiration),
				afterwards(clockAt(kNow.Add(99*time.Second)), noMethod(MethodExpiration)),
				afterwards(clockAt(kNow.Add(100*time.Second)), decides(MethodExpiration, "n"))),
		},
	})
}
