package convert

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
	v1alpha5 "github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
)

// provisioner converts a v1alpha5 Provisioner to a NodePool and, when it
// carries an inline provider block, an EC2NodeClass of the same name, as
// karpenter-convert (v0.32) and then Karpenter v1.0's conversion do.
func (c *converter) provisioner(what string, p *v1alpha5.Provisioner) ([]Object, error) {
	s := p.Spec
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: objectMeta(p.ObjectMeta),
	}
	t := &np.Spec.Template
	t.ObjectMeta.Labels = copyMap(s.Labels)
	t.ObjectMeta.Annotations = copyMap(s.Annotations)
	t.Spec.Taints = copyTaints(s.Taints)
	t.Spec.StartupTaints = copyTaints(s.StartupTaints)
	t.Spec.Requirements = c.provisionerRequirements(what, s.Requirements)

	nc, err := c.provisionerClass(what, p, &t.Spec)
	if err != nil {
		return nil, err
	}
	pool := Object{NodePool: np}
	if s.KubeletConfiguration != nil {
		const path = "spec.kubeletConfiguration"
		k, err := c.kubeletV1alpha5(what, path, s.KubeletConfiguration)
		if err != nil {
			return nil, err
		}
		pool.kubelet, pool.kubeletPath = k, path
	}
	if err := c.provisionerDisruption(what, s, np); err != nil {
		return nil, err
	}
	if s.Limits != nil && len(s.Limits.Resources) > 0 {
		np.Spec.Limits = karpv1.Limits(s.Limits.Resources.DeepCopy())
	}
	if s.Weight != nil {
		w := *s.Weight
		np.Spec.Weight = &w
	}
	if nc == nil {
		return []Object{pool}, nil
	}
	return []Object{pool, {EC2NodeClass: nc}}, nil
}

// provisionerRequirements copies the requirements and adds those the
// v1alpha5 AWS defaulting webhook persisted on create (os linux, arch
// amd64, capacity type on-demand, and categories c/m/r of generation > 2
// unless instance types are constrained), so the nodes launched do not
// change; karpenter-convert adds them too unless --ignore-defaults.
func (c *converter) provisionerRequirements(what string, in []corev1.NodeSelectorRequirement) []karpv1.NodeSelectorRequirementWithMinValues {
	out := []karpv1.NodeSelectorRequirementWithMinValues{}
	has := map[string]bool{}
	for i, r := range in {
		req := c.requirement(what, fmt.Sprintf("spec.requirements[%d]", i), r.Key, string(r.Operator), r.Values, nil)
		has[req.Key] = true
		out = append(out, req)
	}
	if c.opts.IgnoreDefaults {
		return out
	}
	return append(out, v1alpha5Defaults(has)...)
}

// provisionerClass sets the template's nodeClassRef and returns the
// EC2NodeClass of an inline provider block (nil for a providerRef).
func (c *converter) provisionerClass(what string, p *v1alpha5.Provisioner, t *karpv1.NodeClaimTemplateSpec) (*awsv1.EC2NodeClass, error) {
	s := p.Spec
	switch {
	case s.Provider != nil && s.ProviderRef != nil:
		return nil, fmt.Errorf("spec.provider and spec.providerRef are both set; v1alpha5 allowed only one")
	case s.ProviderRef != nil:
		if s.ProviderRef.Name == "" {
			return nil, fmt.Errorf("spec.providerRef.name is required")
		}
		t.NodeClassRef = nodeClassRef(s.ProviderRef.APIVersion, s.ProviderRef.Kind, s.ProviderRef.Name)
		return nil, nil
	case s.Provider != nil:
		nc := &awsv1.EC2NodeClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		}
		if err := c.provider(what, "spec.provider.", s.Provider, providerExtras{}, nc); err != nil {
			return nil, err
		}
		c.warnf(what, "spec.provider written as EC2NodeClass %s", p.Name)
		t.NodeClassRef = nodeClassRef(awsv1.SchemeGroupVersion.String(), "EC2NodeClass", p.Name)
		return nc, nil
	}
	return nil, fmt.Errorf("neither spec.provider nor spec.providerRef is set; v1 requires spec.template.spec.nodeClassRef")
}

// provisionerDisruption maps the TTLs and consolidation as karpenter-convert
// does (consolidation wins over ttlSecondsAfterEmpty; neither leaves the
// policy to v1beta1's default WhenUnderutilized), then v1's conversion
// (WhenUnderutilized is WhenEmptyOrUnderutilized after 0s). Without
// ttlSecondsUntilExpired nodes never expire.
func (c *converter) provisionerDisruption(what string, s v1alpha5.ProvisionerSpec, np *karpv1.NodePool) error {
	d := &np.Spec.Disruption
	consolidate := s.Consolidation != nil && s.Consolidation.Enabled != nil && *s.Consolidation.Enabled
	switch {
	case consolidate:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = seconds(0)
		if s.TTLSecondsAfterEmpty != nil {
			c.warnf(what, "spec.ttlSecondsAfterEmpty conflicts with spec.consolidation.enabled (v1alpha5 rejected both); dropped in favour of consolidation")
		}
	case s.TTLSecondsAfterEmpty != nil:
		if *s.TTLSecondsAfterEmpty < 0 {
			return fmt.Errorf("spec.ttlSecondsAfterEmpty: %d: must be >= 0", *s.TTLSecondsAfterEmpty)
		}
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = seconds(*s.TTLSecondsAfterEmpty)
	default:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = seconds(0)
		c.warnf(what, "neither spec.consolidation.enabled nor spec.ttlSecondsAfterEmpty is set: written as consolidationPolicy WhenEmptyOrUnderutilized after 0s, as Karpenter's conversion does (v1beta1's default policy); v1alpha5 did not remove these nodes, which consolidationPolicy WhenEmpty with consolidateAfter Never would keep")
	}
	if s.TTLSecondsUntilExpired == nil {
		np.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
		return nil
	}
	if *s.TTLSecondsUntilExpired < 0 {
		return fmt.Errorf("spec.ttlSecondsUntilExpired: %d: must be >= 0", *s.TTLSecondsUntilExpired)
	}
	np.Spec.Template.Spec.ExpireAfter = seconds(*s.TTLSecondsUntilExpired)
	return nil
}

// kubeletV1alpha5 converts a Provisioner's kubeletConfiguration to the v1
// EC2NodeClass kubelet block; containerRuntime has no v1 home. Nil when
// nothing is left.
func (c *converter) kubeletV1alpha5(what, path string, k *v1alpha5.KubeletConfiguration) (*awsv1.KubeletConfiguration, error) {
	if k.ContainerRuntime != nil {
		c.warnf(what, "%s.containerRuntime has no v1 equivalent (containerd is the only runtime); dropped", path)
	}
	out := kubeletSettings(&k.KubeletSettings)
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoftGracePeriod)) {
		v := k.EvictionSoftGracePeriod[key]
		d, err := karpv1.ParseDuration(v)
		if err != nil || d.IsNever() {
			return nil, fmt.Errorf("%s.evictionSoftGracePeriod[%s]: %q: expected a duration such as 90s, 5m or 1h30m", path, key, v)
		}
		if out.EvictionSoftGracePeriod == nil {
			out.EvictionSoftGracePeriod = map[string]karpv1.Duration{}
		}
		out.EvictionSoftGracePeriod[key] = d
	}
	if isEmptyKubelet(out) {
		return nil, nil
	}
	return out, nil
}

// kubeletSettings converts the kubelet fields v1alpha5 and v1beta1 share.
func kubeletSettings(k *v1alpha5.KubeletSettings) *awsv1.KubeletConfiguration {
	out := &awsv1.KubeletConfiguration{
		MaxPods:                     k.MaxPods,
		PodsPerCore:                 k.PodsPerCore,
		SystemReserved:              amounts(k.SystemReserved),
		KubeReserved:                amounts(k.KubeReserved),
		EvictionHard:                copyMap(k.EvictionHard),
		EvictionSoft:                copyMap(k.EvictionSoft),
		EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
		ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
		CPUCFSQuota:                 k.CPUCFSQuota,
	}
	if len(k.ClusterDNS) > 0 {
		out.ClusterDNS = append([]string(nil), k.ClusterDNS...)
	}
	return out
}

// amounts writes kubelet reservations as v1's strings.
func amounts(m map[string]v1alpha5.Amount) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// providerExtras are the AWSNodeTemplate fields an inline provider lacks.
type providerExtras struct {
	userData           *string
	amiSelector        map[string]string
	detailedMonitoring *bool
}

// provider converts a v1alpha1 AWS provider block (inline in a Provisioner
// or the body of an AWSNodeTemplate) into nc, as karpenter-convert
// (pkg/utils/nodeclass New) and then Karpenter v1.0's conversion do. prefix
// is the field path of the block ("spec.provider." or "spec.").
func (c *converter) provider(what, prefix string, p *awsv1alpha1.Provider, x providerExtras, nc *awsv1.EC2NodeClass) error {
	if p.LaunchTemplateName != nil {
		// karpenter-convert: cannot convert with "spec.launchTemplate"
		return fmt.Errorf("%slaunchTemplate: %q: %w: v1 builds its own launch template from the EC2NodeClass; move the template's settings (AMI, user data, block devices, metadata options, security groups) into the class, remove launchTemplate and convert again",
			prefix, *p.LaunchTemplateName, ErrUnsupported)
	}
	spec := &nc.Spec
	var err error
	if spec.SubnetSelectorTerms, err = c.subnetTerms(what, prefix+"subnetSelector", p.SubnetSelector); err != nil {
		return err
	}
	if spec.SecurityGroupSelectorTerms, err = c.securityGroupTerms(what, prefix+"securityGroupSelector", p.SecurityGroupSelector); err != nil {
		return err
	}
	amiTerms, err := c.amiTerms(what, "spec.amiSelector", x.amiSelector)
	if err != nil {
		return err
	}
	selectorPath := "spec.amiSelector is empty"
	if prefix != "spec." {
		selectorPath = "an inline provider cannot select AMIs: use an AWSNodeTemplate with spec.amiSelector"
	}
	for i, b := range p.BlockDeviceMappings {
		if b == nil {
			return fmt.Errorf("%sblockDeviceMappings[%d]: null: expected a block device mapping", prefix, i)
		}
		spec.BlockDeviceMappings = append(spec.BlockDeviceMappings, &awsv1.BlockDeviceMapping{DeviceName: b.DeviceName, EBS: blockDevice(b.EBS)})
	}
	sel, err := c.selectAMIs(what, prefix+"amiFamily", p.AMIFamily, amiTerms, len(spec.BlockDeviceMappings), "latest", selectorPath)
	if err != nil {
		return err
	}
	sel.apply(spec, &nc.ObjectMeta)
	c.identity(what, spec, "", p.InstanceProfile, prefix+"instanceProfile is unset (v1alpha1 then used the aws.defaultInstanceProfile setting)")
	spec.Context = p.Context
	spec.Tags = copyMap(p.Tags)
	spec.UserData = x.userData
	spec.DetailedMonitoring = x.detailedMonitoring
	spec.MetadataOptions = metadataOptions(p.MetadataOptions)
	return nil
}

// awsNodeTemplate converts a v1alpha1 AWSNodeTemplate to an EC2NodeClass.
func (c *converter) awsNodeTemplate(what string, t *awsv1alpha1.AWSNodeTemplate) (*awsv1.EC2NodeClass, error) {
	nc := &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: objectMeta(t.ObjectMeta),
	}
	err := c.provider(what, "spec.", &t.Spec.Provider, providerExtras{
		userData: t.Spec.UserData, amiSelector: t.Spec.AMISelector, detailedMonitoring: t.Spec.DetailedMonitoring,
	}, nc)
	if err != nil {
		return nil, err
	}
	return nc, nil
}

// v1alpha5Defaults returns the requirements the v1alpha5 AWS defaulting
// webhook added to a Provisioner lacking them; has holds the keys present.
func v1alpha5Defaults(has map[string]bool) []karpv1.NodeSelectorRequirementWithMinValues {
	var out []karpv1.NodeSelectorRequirementWithMinValues
	add := func(key string, op karpv1.NodeSelectorOperator, values ...string) {
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
	if !has[karpv1.LabelOS] {
		add(karpv1.LabelOS, karpv1.OpIn, "linux")
	}
	if !has[karpv1.LabelArch] {
		add(karpv1.LabelArch, karpv1.OpIn, "amd64")
	}
	if !has[karpv1.LabelCapacityType] {
		add(karpv1.LabelCapacityType, karpv1.OpIn, karpv1.CapacityTypeOnDemand)
	}
	if !has[karpv1.LabelInstanceType] && !has[karpv1.LabelInstanceFamily] &&
		!has[karpv1.LabelInstanceCategory] && !has[karpv1.LabelInstanceGeneration] {
		add(karpv1.LabelInstanceCategory, karpv1.OpIn, "c", "m", "r")
		add(karpv1.LabelInstanceGeneration, karpv1.OpGt, "2")
	}
	return out
}
