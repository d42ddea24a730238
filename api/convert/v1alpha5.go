package convert

import (
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
	v1alpha5 "github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
)

// provisioner converts a v1alpha5 Provisioner to a NodePool and, when it
// carries an inline provider block, an EC2NodeClass of the same name.
func (c *converter) provisioner(what string, p *v1alpha5.Provisioner) (*karpv1.NodePool, *awsv1.EC2NodeClass, error) {
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

	// Requirements, with the defaults the v1alpha5 AWS webhook persisted on
	// create (os linux, arch amd64, capacity type on-demand, and categories
	// c/m/r of generation > 2 unless instance types are constrained), so the
	// nodes launched do not change.
	t.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{}
	has := map[string]bool{}
	for i, r := range s.Requirements {
		req := c.requirement(what, fmt.Sprintf("spec.requirements[%d]", i), r.Key, string(r.Operator), r.Values, nil)
		has[req.Key] = true
		t.Spec.Requirements = append(t.Spec.Requirements, req)
	}
	t.Spec.Requirements = append(t.Spec.Requirements, v1alpha5Defaults(has)...)

	// Node class.
	var nc *awsv1.EC2NodeClass
	switch {
	case s.Provider != nil && s.ProviderRef != nil:
		return nil, nil, fmt.Errorf("spec.provider and spec.providerRef are both set; v1alpha5 allowed only one")
	case s.ProviderRef != nil:
		if s.ProviderRef.Name == "" {
			return nil, nil, fmt.Errorf("spec.providerRef.name is empty")
		}
		t.Spec.NodeClassRef = nodeClassRef(s.ProviderRef.APIVersion, s.ProviderRef.Kind, s.ProviderRef.Name)
	case s.Provider != nil:
		spec, err := c.provider(what, "spec.provider.", s.Provider, providerExtras{})
		if err != nil {
			return nil, nil, err
		}
		nc = &awsv1.EC2NodeClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec:       spec,
		}
		c.warnf(what, "spec.provider written as EC2NodeClass %s", p.Name)
		t.Spec.NodeClassRef = nodeClassRef(awsv1.SchemeGroupVersion.String(), "EC2NodeClass", p.Name)
	default:
		return nil, nil, fmt.Errorf("neither spec.provider nor spec.providerRef is set; v1 requires spec.template.spec.nodeClassRef")
	}
	c.users[t.Spec.NodeClassRef.Name] = append(c.users[t.Spec.NodeClassRef.Name], what)

	if s.KubeletConfiguration != nil {
		k, err := c.kubeletV1alpha5(what, "spec.kubeletConfiguration", s.KubeletConfiguration)
		if err != nil {
			return nil, nil, err
		}
		if k != nil {
			c.kubelets[t.Spec.NodeClassRef.Name] = append(c.kubelets[t.Spec.NodeClassRef.Name],
				kubeletUse{from: what, path: "spec.kubeletConfiguration", kubelet: k})
		}
	}

	// Disruption: v1alpha5 either consolidated (consolidation.enabled),
	// deleted empty nodes after a TTL, or neither.
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
			return nil, nil, fmt.Errorf("spec.ttlSecondsAfterEmpty: must be >= 0, got %d", *s.TTLSecondsAfterEmpty)
		}
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = seconds(*s.TTLSecondsAfterEmpty)
	default:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = karpv1.NeverDuration()
	}
	// Expiry: without a TTL v1alpha5 nodes never expired.
	if s.TTLSecondsUntilExpired != nil {
		if *s.TTLSecondsUntilExpired < 0 {
			return nil, nil, fmt.Errorf("spec.ttlSecondsUntilExpired: must be >= 0, got %d", *s.TTLSecondsUntilExpired)
		}
		t.Spec.ExpireAfter = seconds(*s.TTLSecondsUntilExpired)
	} else {
		t.Spec.ExpireAfter = karpv1.NeverDuration()
	}

	if s.Limits != nil && len(s.Limits.Resources) > 0 {
		np.Spec.Limits = karpv1.Limits(s.Limits.Resources.DeepCopy())
	}
	if s.Weight != nil {
		w := *s.Weight
		np.Spec.Weight = &w
	}
	return np, nc, nil
}

// kubeletV1alpha5 converts a Provisioner's kubeletConfiguration to the v1
// EC2NodeClass kubelet block; containerRuntime has no v1 home.
func (c *converter) kubeletV1alpha5(what, path string, k *v1alpha5.KubeletConfiguration) (*awsv1.KubeletConfiguration, error) {
	if k.ContainerRuntime != nil {
		c.warnf(what, "%s.containerRuntime has no v1 equivalent (containerd is the only runtime); dropped", path)
	}
	out := &awsv1.KubeletConfiguration{
		ClusterDNS:                  append([]string(nil), k.ClusterDNS...),
		MaxPods:                     k.MaxPods,
		PodsPerCore:                 k.PodsPerCore,
		SystemReserved:              copyMap(k.SystemReserved),
		KubeReserved:                copyMap(k.KubeReserved),
		EvictionHard:                copyMap(k.EvictionHard),
		EvictionSoft:                copyMap(k.EvictionSoft),
		EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
		ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
		ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
		CPUCFSQuota:                 k.CPUCFSQuota,
	}
	if len(out.ClusterDNS) == 0 {
		out.ClusterDNS = nil
	}
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoftGracePeriod)) {
		d, err := karpv1.ParseDuration(k.EvictionSoftGracePeriod[key])
		if err != nil || d.IsNever() {
			return nil, fmt.Errorf("%s.evictionSoftGracePeriod[%s]: %q is not a duration", path, key, k.EvictionSoftGracePeriod[key])
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

// providerExtras are the AWSNodeTemplate fields an inline provider lacks.
type providerExtras struct {
	userData           *string
	amiSelector        map[string]string
	detailedMonitoring *bool
}

// provider converts a v1alpha1 AWS provider block (inline in a Provisioner
// or the body of an AWSNodeTemplate) to an EC2NodeClass spec. prefix is the
// field path of the block ("spec.provider." or "spec.").
func (c *converter) provider(what, prefix string, p *awsv1alpha1.Provider, x providerExtras) (awsv1.EC2NodeClassSpec, error) {
	var spec awsv1.EC2NodeClassSpec
	var err error
	if spec.SubnetSelectorTerms, err = c.subnetTerms(what, prefix+"subnetSelector", p.SubnetSelector); err != nil {
		return spec, err
	}
	if spec.SecurityGroupSelectorTerms, err = c.securityGroupTerms(what, prefix+"securityGroupSelector", p.SecurityGroupSelector); err != nil {
		return spec, err
	}
	amiTerms, err := c.amiTerms(what, "spec.amiSelector", x.amiSelector)
	if err != nil {
		return spec, err
	}
	selectorPath := "spec.amiSelector is empty"
	if prefix != "spec." {
		selectorPath = "an inline provider cannot select AMIs: use an AWSNodeTemplate with spec.amiSelector"
	}
	spec.AMIFamily, spec.AMISelectorTerms, err = c.amiFamily(what, prefix+"amiFamily", p.AMIFamily, amiTerms, selectorPath)
	if err != nil {
		return spec, err
	}
	if p.InstanceProfile != nil && *p.InstanceProfile != "" {
		spec.InstanceProfile = stringPtr(*p.InstanceProfile)
	} else {
		c.warnf(what, "%sinstanceProfile is unset: v1alpha1 fell back to the aws.defaultInstanceProfile setting, v1 requires spec.role or spec.instanceProfile; set one", prefix)
	}
	if p.LaunchTemplateName != nil {
		c.warnf(what, "%slaunchTemplate has no v1 equivalent (v1 always builds its own launch template from the EC2NodeClass); dropped", prefix)
	}
	spec.Context = p.Context
	spec.Tags = copyMap(p.Tags)
	spec.UserData = x.userData
	spec.DetailedMonitoring = x.detailedMonitoring
	if m := p.MetadataOptions; m != nil {
		spec.MetadataOptions = &awsv1.MetadataOptions{
			HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens,
		}
	}
	for i, b := range p.BlockDeviceMappings {
		if b == nil {
			return spec, fmt.Errorf("%sblockDeviceMappings[%d]: empty mapping", prefix, i)
		}
		m := &awsv1.BlockDeviceMapping{DeviceName: b.DeviceName}
		if e := b.EBS; e != nil {
			m.EBS = &awsv1.BlockDevice{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
				KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
				VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
			}
		}
		spec.BlockDeviceMappings = append(spec.BlockDeviceMappings, m)
	}
	return spec, nil
}

// awsNodeTemplate converts a v1alpha1 AWSNodeTemplate to an EC2NodeClass.
func (c *converter) awsNodeTemplate(what string, t *awsv1alpha1.AWSNodeTemplate) (*awsv1.EC2NodeClass, error) {
	spec, err := c.provider(what, "spec.", &t.Spec.Provider, providerExtras{
		userData: t.Spec.UserData, amiSelector: t.Spec.AMISelector, detailedMonitoring: t.Spec.DetailedMonitoring,
	})
	if err != nil {
		return nil, err
	}
	return &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: objectMeta(t.ObjectMeta),
		Spec:       spec,
	}, nil
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
