package convert

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1beta1 "github.com/joiner-dev/joiner/api/legacy/aws/v1beta1"
	corev1beta1 "github.com/joiner-dev/joiner/api/legacy/core/v1beta1"
)

// nodePoolV1beta1 converts a v1beta1 NodePool as Karpenter v1.0's
// conversion does (kubernetes-sigs/karpenter pkg/apis/v1
// nodepool_conversion.go), reading unset fields as the v1beta1 CRD
// defaulted them. Its kubelet block moves to the EC2NodeClass it references
// (see finish) instead of the compatibility annotation Karpenter keeps it in
// until v1.1.
func (c *converter) nodePoolV1beta1(what string, p *corev1beta1.NodePool) ([]Object, error) {
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: objectMeta(p.ObjectMeta),
	}
	in, t := p.Spec.Template, &np.Spec.Template
	t.ObjectMeta.Labels = copyMap(in.ObjectMeta.Labels)
	t.ObjectMeta.Annotations = copyMap(in.ObjectMeta.Annotations)
	t.Spec.Taints = copyTaints(in.Spec.Taints)
	t.Spec.StartupTaints = copyTaints(in.Spec.StartupTaints)
	t.Spec.Requirements = c.requirementsV1beta1(what, "spec.template.spec.requirements", in.Spec.Requirements)
	if in.Spec.Resources != nil && len(in.Spec.Resources.Requests) > 0 {
		c.warnf(what, "spec.template.spec.resources has no v1 equivalent (v1 NodePool templates carry no requests); dropped")
	}
	ref := in.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("spec.template.spec.nodeClassRef.name is required")
	}
	t.Spec.NodeClassRef = nodeClassRef(ref.APIVersion, ref.Kind, ref.Name)
	if err := c.disruptionV1beta1(what, p.Spec.Disruption, np); err != nil {
		return nil, err
	}
	if len(p.Spec.Limits) > 0 {
		np.Spec.Limits = karpv1.Limits(p.Spec.Limits.DeepCopy())
	}
	if p.Spec.Weight != nil {
		w := *p.Spec.Weight
		np.Spec.Weight = &w
	}
	pool := Object{NodePool: np}
	if in.Spec.Kubelet != nil {
		pool.kubelet, pool.kubeletPath = kubeletV1beta1(in.Spec.Kubelet), "spec.template.spec.kubelet"
	}
	return []Object{pool}, nil
}

// requirementsV1beta1 copies requirements with their minValues.
func (c *converter) requirementsV1beta1(what, path string, in []corev1beta1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	out := []karpv1.NodeSelectorRequirementWithMinValues{}
	for i, r := range in {
		var mv *int
		if r.MinValues != nil {
			v := *r.MinValues
			mv = &v
		}
		out = append(out, c.requirement(what, fmt.Sprintf("%s[%d]", path, i), r.Key, r.Operator, r.Values, mv))
	}
	return out
}

// disruptionV1beta1 maps the disruption block. An absent block or policy is
// the v1beta1 default WhenUnderutilized, which v1 writes as
// WhenEmptyOrUnderutilized after 0s; WhenEmpty keeps consolidateAfter;
// expireAfter moves to the template (absent, it stays v1's default 720h,
// which was v1beta1's too).
func (c *converter) disruptionV1beta1(what string, pd *corev1beta1.Disruption, np *karpv1.NodePool) error {
	d := &np.Spec.Disruption
	if pd == nil {
		pd = &corev1beta1.Disruption{}
	}
	switch pd.ConsolidationPolicy {
	case corev1beta1.ConsolidationPolicyWhenUnderutilized, "":
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = seconds(0)
		if pd.ConsolidateAfter != nil && !pd.ConsolidateAfter.IsZero() {
			c.warnf(what, "spec.disruption.consolidateAfter %s with consolidationPolicy WhenUnderutilized (v1beta1 rejected the pair): written as 0s, as Karpenter's conversion does", pd.ConsolidateAfter)
		}
	case corev1beta1.ConsolidationPolicyWhenEmpty:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		if pd.ConsolidateAfter != nil && !pd.ConsolidateAfter.IsZero() {
			d.ConsolidateAfter = *pd.ConsolidateAfter
		} else {
			d.ConsolidateAfter = karpv1.NeverDuration()
			c.warnf(what, "spec.disruption.consolidateAfter is unset with consolidationPolicy WhenEmpty (v1beta1 required it): written as Never, as Karpenter's conversion does")
		}
	default:
		return fmt.Errorf("spec.disruption.consolidationPolicy: %q: expected WhenEmpty or WhenUnderutilized", pd.ConsolidationPolicy)
	}
	if pd.ExpireAfter != nil && !pd.ExpireAfter.IsZero() {
		np.Spec.Template.Spec.ExpireAfter = *pd.ExpireAfter
	}
	for _, b := range pd.Budgets {
		d.Budgets = append(d.Budgets, karpv1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration})
	}
	return nil
}

// kubeletV1beta1 converts a v1beta1 kubelet block; nil when empty.
func kubeletV1beta1(k *corev1beta1.Kubelet) *awsv1.KubeletConfiguration {
	out := kubeletSettings(&k.KubeletSettings)
	if len(k.EvictionSoftGracePeriod) > 0 {
		out.EvictionSoftGracePeriod = map[string]karpv1.Duration{}
		for key, v := range k.EvictionSoftGracePeriod {
			out.EvictionSoftGracePeriod[key] = v
		}
	}
	if isEmptyKubelet(out) {
		return nil
	}
	return out
}

// ec2NodeClassV1beta1 converts a v1beta1 EC2NodeClass as Karpenter v1.0's
// conversion does (aws/karpenter-provider-aws pkg/apis/v1
// ec2nodeclass_conversion.go), reading unset metadata options as the
// v1beta1 CRD defaulted them.
func (c *converter) ec2NodeClassV1beta1(what string, in *awsv1beta1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	s := in.Spec
	out := &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: objectMeta(in.ObjectMeta),
	}
	aliasVersion := "latest"
	if v, ok := out.Annotations[AnnotationAliasVersion]; ok {
		aliasVersion = v
		delete(out.Annotations, AnnotationAliasVersion)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
	}
	o := &out.Spec
	for _, t := range s.SubnetSelectorTerms {
		o.SubnetSelectorTerms = append(o.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{Tags: copyMap(t.Tags), ID: t.ID})
	}
	for _, t := range s.SecurityGroupSelectorTerms {
		o.SecurityGroupSelectorTerms = append(o.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{Tags: copyMap(t.Tags), ID: t.ID, Name: t.Name})
	}
	var terms []awsv1.AMISelectorTerm
	for _, t := range s.AMISelectorTerms {
		terms = append(terms, awsv1.AMISelectorTerm{Tags: copyMap(t.Tags), ID: t.ID, Name: t.Name, Owner: t.Owner})
	}
	for i, b := range s.BlockDeviceMappings {
		if b == nil {
			return nil, fmt.Errorf("spec.blockDeviceMappings[%d]: null: expected a block device mapping", i)
		}
		o.BlockDeviceMappings = append(o.BlockDeviceMappings, &awsv1.BlockDeviceMapping{DeviceName: b.DeviceName, RootVolume: b.RootVolume, EBS: blockDevice(b.EBS)})
	}
	if s.AMIFamily == nil {
		c.warnf(what, "spec.amiFamily is unset (v1beta1 required it): read as AL2")
	}
	sel, err := c.selectAMIs(what, "spec.amiFamily", s.AMIFamily, terms, len(o.BlockDeviceMappings), aliasVersion, "spec.amiSelectorTerms is empty")
	if err != nil {
		return nil, err
	}
	sel.apply(o, &out.ObjectMeta)
	c.identity(what, o, s.Role, s.InstanceProfile, "spec.role and spec.instanceProfile are unset (v1beta1 required one)")
	o.AssociatePublicIPAddress = s.AssociatePublicIPAddress
	o.UserData = s.UserData
	o.Tags = copyMap(s.Tags)
	o.DetailedMonitoring = s.DetailedMonitoring
	o.Context = s.Context
	if s.InstanceStorePolicy != nil {
		p := awsv1.InstanceStorePolicy(*s.InstanceStorePolicy)
		o.InstanceStorePolicy = &p
	}
	o.MetadataOptions = metadataOptions(s.MetadataOptions)
	return out, nil
}
