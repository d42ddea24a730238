package nodeclass_test

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/coordinator/nodeclass"
)

// Ports of Karpenter's "NodeClass Validation Status Controller" suite
// (validation_test.go) that apply to Joiner, which makes none of
// Karpenter's dry-run calls (its class is valid once its parts resolved
// and its tags pass; a refused permission shows at launch). The
// preconditions table is ported in cloud (TestValidationPreconditionsAsKarpenter),
// the cluster CIDR cases by cloud/aws's cluster discovery tests.

// Karpenter's table "should update status condition on nodeClass as
// NotReady when tag validation fails" and "should update status condition
// as Ready when tags are valid": a restricted key in spec.tags fails
// ValidationSucceeded (TagValidationFailed, Karpenter's message naming the
// key) once the parts resolved, and Ready is False naming it alone; the
// class is not published.
func TestTagValidationAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		entry string
		tags  map[string]string
	}{
		{"kubernetes.io/cluster*", map[string]string{"kubernetes.io/cluster/acluster": "owned"}},
		{"karpenter.sh/nodepool", map[string]string{"karpenter.sh/nodepool": "testnodepool"}},
		{"eks:eks-cluster-name", map[string]string{"eks:eks-cluster-name": "acluster"}},
		{"karpenter.k8s.aws/ec2nodeclass", map[string]string{"karpenter.k8s.aws/ec2nodeclass": "testnodeclass"}},
		{"karpenter.sh/nodeclaim", map[string]string{"karpenter.sh/nodeclaim": "testnodeclaim"}},
		{"should update status condition as Ready when tags are valid", map[string]string{}},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			w := newWorld(t)
			nc := ec2NodeClass("default")
			nc.Spec.Tags = tc.tags
			w.apply(nc)
			w.reconcile()
			v, ready := w.condition("default", awsv1.ConditionValidationSucceeded), w.condition("default", awsv1.ConditionReady)
			if len(tc.tags) == 0 {
				if v.Status != metav1.ConditionTrue || ready.Status != metav1.ConditionTrue || !w.published("default") {
					t.Errorf("ValidationSucceeded %+v, Ready %+v; want True, published", v, ready)
				}
				return
			}
			var key string
			for k := range tc.tags {
				key = k
			}
			wantMsg := "tags failed validation requirements (tags=" + strconv.Quote(key) + ")"
			if v.Status != metav1.ConditionFalse || v.Reason != nodeclass.ReasonTagValidationFailed || v.Message != wantMsg {
				t.Errorf("ValidationSucceeded %s/%s %q, want False/TagValidationFailed %q", v.Status, v.Reason, v.Message, wantMsg)
			}
			if ready.Status != metav1.ConditionFalse || ready.Message != "ValidationSucceeded=False" || w.published("default") {
				t.Errorf("Ready %+v, published %v; want False, \"ValidationSucceeded=False\", not published", ready, w.published("default"))
			}
			for _, typ := range []string{awsv1.ConditionAMIsReady, awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady,
				awsv1.ConditionInstanceProfileReady} {
				if !w.isTrue("default", typ) {
					t.Errorf("%s %+v: the parts resolve as Karpenter's do", typ, w.condition("default", typ))
				}
			}
			// The tags fixed: valid, published.
			nc.Spec.Tags = nil
			w.apply(nc)
			w.reconcile()
			if !w.isTrue("default", awsv1.ConditionValidationSucceeded) || !w.isTrue("default", awsv1.ConditionReady) || !w.published("default") {
				t.Errorf("fixed: ValidationSucceeded %+v, Ready %+v", w.condition("default", awsv1.ConditionValidationSucceeded),
					w.condition("default", awsv1.ConditionReady))
			}
		})
	}
}

// Karpenter's "should pass validation when the validation controller is
// disabled" is Joiner's only behaviour: the class is valid and Ready
// without a CreateLaunchTemplate, CreateFleet or RunInstances call.
func TestValidationWithoutDryRunsAsKarpenter(t *testing.T) {
	w := newWorld(t)
	w.apply(ec2NodeClass("default"))
	w.reconcile()
	if !w.isTrue("default", awsv1.ConditionValidationSucceeded) || !w.isTrue("default", awsv1.ConditionReady) {
		t.Errorf("ValidationSucceeded %+v, Ready %+v", w.condition("default", awsv1.ConditionValidationSucceeded), w.condition("default", awsv1.ConditionReady))
	}
	for _, a := range []string{"CreateLaunchTemplate", "CreateFleet", "RunInstances"} {
		if n := w.sim.Calls(a); n != 0 {
			t.Errorf("%d %s calls", n, a)
		}
	}
}
