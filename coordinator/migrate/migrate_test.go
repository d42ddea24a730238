package migrate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

const ca = "test-ca-bundle"

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func pool(name string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: karpv1.OpIn, Values: []string{"amd64"}}}
	np.SetDefaults()
	np.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: np.Hash(), karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}
	return np
}

func class() *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-demo",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
	}}
	nc.SetDefaults()
	nc.Annotations = map[string]string{karpv1.AnnotationEC2NodeClassHash: nc.Hash(ca), karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	nc.Status.AMIs = []awsv1.AMI{{ID: "ami-new", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	return nc
}

// claim is a NodeClaim as Karpenter v1.14 leaves it: launched, with the
// hashes of its pool and class.
func claim(name string, np *karpv1.NodePool, nc *awsv1.EC2NodeClass, image string) *karpv1.NodeClaim {
	c := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Labels: map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelArchStable: "amd64", corev1.LabelInstanceTypeStable: "m5.large"},
		Annotations: map[string]string{
			karpv1.AnnotationNodePoolHash: np.Annotations[karpv1.AnnotationNodePoolHash], karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion,
			karpv1.AnnotationEC2NodeClassHash: nc.Annotations[karpv1.AnnotationEC2NodeClassHash], karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion,
		}}}
	c.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
	c.Status.ProviderID = "aws:///us-east-1a/i-" + name
	c.Status.ImageID = image
	return c
}

func TestCheck(t *testing.T) {
	np, nc := pool("default"), class()
	changed := pool("changed")
	changed.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "new"} // edited after Karpenter hashed it
	invalid := pool("invalid")
	invalid.Spec.Template.Spec.Requirements = append(invalid.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelNodePool, Operator: karpv1.OpIn, Values: []string{"x"}})
	orphan := claim("orphan", pool("gone"), nc, "ami-new")
	foreign := claim("foreign", np, nc, "ami-new")
	delete(foreign.Labels, karpv1.LabelNodePool)
	in := Input{Now: now, CABundle: ca, NodePools: []*karpv1.NodePool{np, changed, invalid}, NodeClasses: []*awsv1.EC2NodeClass{nc},
		NodeClaims: []*karpv1.NodeClaim{
			claim("same", np, nc, "ami-new"),
			claim("old-image", np, nc, "ami-old"),
			claim("old-template", changed, nc, "ami-new"),
			orphan, foreign,
		}}
	want := map[string][2]string{
		"NodePool/default":       {Adopt, ""},
		"NodePool/changed":       {Adopt, "HashChanged"},
		"NodePool/invalid":       {Reject, "ValidationFailed"},
		"EC2NodeClass/default":   {Adopt, ""},
		"NodeClaim/same":         {Adopt, ""},
		"NodeClaim/old-image":    {Drift, "AMIDrift"},
		"NodeClaim/old-template": {Drift, "NodePoolDrifted"},
		"NodeClaim/orphan":       {Adopt, "NodePoolNotFound"},
		"NodeClaim/foreign":      {Ignore, "NoNodePool"},
	}
	got := Check(in)
	if len(got) != len(want) {
		t.Fatalf("%d findings, want %d: %+v", len(got), len(want), got)
	}
	for _, f := range got {
		w, ok := want[f.Kind+"/"+f.Name]
		if !ok || f.Action != w[0] || f.Reason != w[1] {
			t.Errorf("%s/%s: %s %s (%s), want %v", f.Kind, f.Name, f.Action, f.Reason, f.Detail, w)
		}
	}
	// Another CA bundle than Karpenter's makes every class hash differ:
	// the check says so rather than drifting silently.
	in.CABundle = "other"
	for _, f := range Check(in) {
		if f.Kind == "EC2NodeClass" && f.Reason != "HashChanged" {
			t.Errorf("with another CA bundle: %+v", f)
		}
	}
}
