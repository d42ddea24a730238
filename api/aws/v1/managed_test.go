package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Karpenter's IsManaged: only a reference to the provider's own node class
// (group and kind) is managed.
func TestManages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ref      *karpv1.NodeClassReference
		launched bool
		pool     bool // Manages
		claim    bool // ManagesNodeClaim
	}{
		{"an EC2NodeClass", &karpv1.NodeClassReference{Group: Group, Kind: Kind, Name: "default"}, false, true, true},
		{"no group (written before it was required)", &karpv1.NodeClassReference{Kind: Kind, Name: "default"}, false, true, true},
		{"another provider's class", &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}, false, false, false},
		{"another kind of the same group", &karpv1.NodeClassReference{Group: Group, Kind: "OtherNodeClass", Name: "default"}, false, false, false},
		{"no reference", nil, false, false, true},
		{"launched by Joiner, whatever it names", &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Manages(tc.ref); got != tc.pool {
				t.Errorf("Manages = %v, want %v", got, tc.pool)
			}
			nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{NodeClassRef: tc.ref}}
			if tc.launched {
				nc.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{karpv1.AnnotationLaunchID: "intent-1"}}
			}
			if got := ManagesNodeClaim(nc); got != tc.claim {
				t.Errorf("ManagesNodeClaim = %v, want %v", got, tc.claim)
			}
		})
	}
}
