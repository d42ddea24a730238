package convert

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	corev1beta1 "github.com/joiner-dev/joiner/api/legacy/core/v1beta1"
)

// nodeClaimV1beta1 converts a v1beta1 NodeClaim's spec as Karpenter v1.0's
// conversion does (kubernetes-sigs/karpenter pkg/apis/v1
// nodeclaim_conversion.go); expireAfter comes from its NodePool in finish.
// The status is not written (as for every converted object), so the result
// describes a node to launch, not the one the legacy NodeClaim owns.
func (c *converter) nodeClaimV1beta1(what string, in *corev1beta1.NodeClaim) (*karpv1.NodeClaim, error) {
	out := &karpv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: objectMeta(in.ObjectMeta),
	}
	s, o := in.Spec, &out.Spec
	o.Taints = copyTaints(s.Taints)
	o.StartupTaints = copyTaints(s.StartupTaints)
	o.Requirements = c.requirementsV1beta1(what, "spec.requirements", s.Requirements)
	if s.Resources != nil && len(s.Resources.Requests) > 0 {
		o.Resources.Requests = s.Resources.Requests.DeepCopy()
	}
	if s.NodeClassRef == nil || s.NodeClassRef.Name == "" {
		return nil, fmt.Errorf("spec.nodeClassRef.name is required")
	}
	o.NodeClassRef = nodeClassRef(s.NodeClassRef.APIVersion, s.NodeClassRef.Kind, s.NodeClassRef.Name)
	if s.Kubelet != nil {
		c.warnf(what, "spec.kubelet has no v1 NodeClaim field (v1 keeps kubelet on the EC2NodeClass; the node keeps what it booted with); dropped")
	}
	c.warnf(what, "status is not written: applied, this NodeClaim asks for a new node; NodeClaims already in the cluster need no conversion")
	return out, nil
}

// claimExpiry gives each converted NodeClaim the expireAfter of the
// NodePool its karpenter.sh/nodepool label names, as Karpenter's conversion
// does; a NodePool not in the input leaves v1's default (720h), as there.
func (c *converter) claimExpiry() {
	pools := map[string]karpv1.Duration{}
	for _, o := range c.out {
		switch {
		case o.NodePool != nil:
			pools[o.NodePool.Name] = o.NodePool.Spec.Template.Spec.ExpireAfter
		case o.Raw != nil:
			if name, d, ok := rawPoolExpiry(o.Raw); ok {
				pools[name] = d
			}
		}
	}
	for _, o := range c.out {
		nc := o.NodeClaim
		if nc == nil {
			continue
		}
		pool, ok := nc.Labels[karpv1.LabelNodePool]
		if !ok {
			continue
		}
		d, ok := pools[pool]
		if !ok {
			c.warnf(o.what, "spec.expireAfter: NodePool %s is not in the input; left to v1's default %s (Karpenter's conversion copies the NodePool's)", pool, karpv1.DefaultExpireAfter)
			continue
		}
		nc.Spec.ExpireAfter = d
	}
}

// rawPoolExpiry reads the name and expireAfter of a v1 NodePool passed
// through.
func rawPoolExpiry(raw []byte) (string, karpv1.Duration, bool) {
	tm, ok := rawTypeMeta(raw)
	if !ok || tm.APIVersion != karpv1.SchemeGroupVersion.String() || tm.Kind != "NodePool" {
		return "", karpv1.Duration{}, false
	}
	var np struct {
		Spec struct {
			Template struct {
				Spec struct {
					ExpireAfter karpv1.Duration `json:"expireAfter"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if yaml.Unmarshal(raw, &np) != nil {
		return "", karpv1.Duration{}, false
	}
	return tm.Metadata.Name, np.Spec.Template.Spec.ExpireAfter, true
}
