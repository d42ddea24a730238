package kubetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// claimWriter is the part of the coordinator's Kubernetes clients a test
// needs to stand up a launched NodeClaim.
type claimWriter interface {
	CreateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// NodeClaim is a NodeClaim named name with the termination finalizer, the
// given annotations, one requirement (key In values) and the "default"
// EC2NodeClass.
func NodeClaim(name string, annotations map[string]string, key string, values ...string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer}, Annotations: annotations},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: key,
				Operator: karpv1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: values}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
}

// CreateLaunched creates nc and records providerID and nodeName (either may
// be empty) in its status, as the lifecycle controller does once the
// instance is launched and its Node registered.
func CreateLaunched(ctx context.Context, t testing.TB, c claimWriter, nc *karpv1.NodeClaim, providerID, nodeName string) *karpv1.NodeClaim {
	t.Helper()
	created, err := c.CreateNodeClaim(ctx, nc)
	if err != nil {
		t.Fatalf("creating nodeclaim %s: %v", nc.Name, err)
	}
	created.Status.ProviderID, created.Status.NodeName = providerID, nodeName
	updated, err := c.UpdateNodeClaimStatus(ctx, created)
	if err != nil {
		t.Fatalf("nodeclaim %s status: %v", nc.Name, err)
	}
	return updated
}
