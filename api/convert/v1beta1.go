package convert

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1beta1 "github.com/joiner-dev/joiner/api/legacy/aws/v1beta1"
	corev1beta1 "github.com/joiner-dev/joiner/api/legacy/core/v1beta1"
)

// nodePoolV1beta1 converts a v1beta1 NodePool. Its kubelet block moves to
// the EC2NodeClass it references (see finish).
func (c *converter) nodePoolV1beta1(what string, p *corev1beta1.NodePool) (*karpv1.NodePool, error) {
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: objectMeta(p.ObjectMeta),
	}
	in, t := p.Spec.Template, &np.Spec.Template
	t.ObjectMeta.Labels = copyMap(in.ObjectMeta.Labels)
	t.ObjectMeta.Annotations = copyMap(in.ObjectMeta.Annotations)
	t.Spec.Taints = copyTaints(in.Spec.Taints)
	t.Spec.StartupTaints = copyTaints(in.Spec.StartupTaints)
	t.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{}
	for i, r := range in.Spec.Requirements {
		var mv *int
		if r.MinValues != nil {
			v := *r.MinValues
			mv = &v
		}
		t.Spec.Requirements = append(t.Spec.Requirements,
			c.requirement(what, fmt.Sprintf("spec.template.spec.requirements[%d]", i), r.Key, r.Operator, r.Values, mv))
	}
	if in.Spec.Resources != nil && len(in.Spec.Resources.Requests) > 0 {
		c.warnf(what, "spec.template.spec.resources has no v1 equivalent (v1 NodePool templates carry no requests); dropped")
	}
	ref := in.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("spec.template.spec.nodeClassRef.name is required")
	}
	t.Spec.NodeClassRef = nodeClassRef(ref.APIVersion, ref.Kind, ref.Name)
	c.users[ref.Name] = append(c.users[ref.Name], what)
	if in.Spec.Kubelet != nil {
		k := kubeletV1beta1(in.Spec.Kubelet)
		if k != nil {
			c.kubelets[ref.Name] = append(c.kubelets[ref.Name], kubeletUse{from: what, path: "spec.template.spec.kubelet", kubelet: k})
		}
	}

	d := &np.Spec.Disruption
	if pd := p.Spec.Disruption; pd != nil {
		switch pd.ConsolidationPolicy {
		case corev1beta1.ConsolidationPolicyWhenUnderutilized, "":
			d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		case corev1beta1.ConsolidationPolicyWhenEmpty:
			d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		default:
			return nil, fmt.Errorf("spec.disruption.consolidationPolicy: unknown policy %q (v1beta1 had WhenEmpty, WhenUnderutilized)", pd.ConsolidationPolicy)
		}
		if pd.ConsolidateAfter != nil && !pd.ConsolidateAfter.IsZero() {
			d.ConsolidateAfter = *pd.ConsolidateAfter
		} else if d.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			// v1beta1 WhenUnderutilized acted at once.
			d.ConsolidateAfter = seconds(0)
		}
		if pd.ExpireAfter != nil && !pd.ExpireAfter.IsZero() {
			t.Spec.ExpireAfter = *pd.ExpireAfter
		}
		for _, b := range pd.Budgets {
			nb := karpv1.Budget{Nodes: b.Nodes, Schedule: b.Schedule, Duration: b.Duration}
			for _, r := range b.Reasons {
				nb.Reasons = append(nb.Reasons, karpv1.DisruptionReason(r))
			}
			d.Budgets = append(d.Budgets, nb)
		}
	} else {
		// v1beta1 defaults: WhenUnderutilized, expireAfter 720h (also v1's).
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = seconds(0)
	}
	if len(p.Spec.Limits) > 0 {
		np.Spec.Limits = karpv1.Limits(p.Spec.Limits.DeepCopy())
	}
	if p.Spec.Weight != nil {
		w := *p.Spec.Weight
		np.Spec.Weight = &w
	}
	return np, nil
}

func kubeletV1beta1(k *corev1beta1.Kubelet) *awsv1.KubeletConfiguration {
	out := &awsv1.KubeletConfiguration{
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
	if len(k.ClusterDNS) > 0 {
		out.ClusterDNS = append([]string(nil), k.ClusterDNS...)
	}
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

// ec2NodeClassV1beta1 converts a v1beta1 EC2NodeClass.
func (c *converter) ec2NodeClassV1beta1(what string, in *awsv1beta1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	s := in.Spec
	out := &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: objectMeta(in.ObjectMeta),
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
	var err error
	o.AMIFamily, o.AMISelectorTerms, err = c.amiFamily(what, "spec.amiFamily", s.AMIFamily, terms, "spec.amiSelectorTerms is empty")
	if err != nil {
		return nil, err
	}
	o.AssociatePublicIPAddress = s.AssociatePublicIPAddress
	o.UserData = s.UserData
	o.Role = s.Role
	o.InstanceProfile = s.InstanceProfile
	o.Tags = copyMap(s.Tags)
	o.DetailedMonitoring = s.DetailedMonitoring
	o.Context = s.Context
	if s.InstanceStorePolicy != nil {
		p := awsv1.InstanceStorePolicy(*s.InstanceStorePolicy)
		o.InstanceStorePolicy = &p
	}
	if m := s.MetadataOptions; m != nil {
		o.MetadataOptions = &awsv1.MetadataOptions{
			HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens,
		}
	}
	for i, b := range s.BlockDeviceMappings {
		if b == nil {
			return nil, fmt.Errorf("spec.blockDeviceMappings[%d]: empty mapping", i)
		}
		m := &awsv1.BlockDeviceMapping{DeviceName: b.DeviceName, RootVolume: b.RootVolume}
		if e := b.EBS; e != nil {
			m.EBS = &awsv1.BlockDevice{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
				KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
				VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
			}
		}
		o.BlockDeviceMappings = append(o.BlockDeviceMappings, m)
	}
	return out, nil
}
