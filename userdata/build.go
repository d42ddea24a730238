package userdata

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// BuildOptions are the facts that come from outside the manifests.
type BuildOptions struct {
	Cluster Cluster
	// CapacityType of the launch ("" = the single value of a
	// karpenter.sh/capacity-type In requirement, else on-demand).
	CapacityType string
	// InstanceMaxPods and VCPU of the instance type (0 = unknown).
	InstanceMaxPods int32
	VCPU            int32
	BootstrapImage  string
	// JoinerImage: every image the launch may boot is Joiner-built
	// (cloud.AMI.Joiner; see Input.JoinerImage).
	JoinerImage bool
}

// FamilyOf returns the EC2NodeClass's AMI family: spec.amiFamily, else the
// family of an alias amiSelectorTerm ("al2023@latest" -> AL2023), else Custom.
func FamilyOf(nc *awsv1.EC2NodeClass) string {
	if nc.Spec.AMIFamily != nil && *nc.Spec.AMIFamily != "" {
		if f, err := NormaliseFamily(*nc.Spec.AMIFamily); err == nil {
			return f
		}
		return *nc.Spec.AMIFamily // Render reports it as unknown.
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias == "" {
			continue
		}
		name, _, _ := strings.Cut(t.Alias, "@")
		if f, err := NormaliseFamily(name); err == nil {
			return f
		}
	}
	return FamilyCustom
}

// AgentEnabled reports whether the EC2NodeClass allows the Joiner hook
// (annotation joiner.io/agent is not "false"; default true).
func AgentEnabled(nc *awsv1.EC2NodeClass) bool {
	return !strings.EqualFold(strings.TrimSpace(nc.Annotations[karpv1.AnnotationAgent]), "false")
}

// AgentForced reports whether the EC2NodeClass vouches that its nodes can
// run "joiner bootstrap" whatever their image's tags say (annotation
// joiner.io/agent: "true").
func AgentForced(nc *awsv1.EC2NodeClass) bool {
	return strings.EqualFold(strings.TrimSpace(nc.Annotations[karpv1.AnnotationAgent]), "true")
}

// FromNodePool builds the Input for a node launched from np with nc.
// Labels: the template labels, every requirement that resolves to one value
// (operator In with one value), karpenter.sh/nodepool, the nodeclass label
// and the capacity type.
func FromNodePool(nc *awsv1.EC2NodeClass, np *karpv1.NodePool, opts BuildOptions) Input {
	t := np.Spec.Template
	labels := map[string]string{}
	for k, v := range t.ObjectMeta.Labels {
		labels[k] = v
	}
	labels[karpv1.LabelNodePool] = np.Name
	return build(nc, labels, t.Spec.Requirements, t.Spec.Taints, t.Spec.StartupTaints, opts)
}

// FromNodeClaim builds the Input for a NodeClaim (its labels already carry
// the nodepool and template labels).
func FromNodeClaim(nc *awsv1.EC2NodeClass, claim *karpv1.NodeClaim, opts BuildOptions) Input {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	return build(nc, labels, claim.Spec.Requirements, claim.Spec.Taints, claim.Spec.StartupTaints, opts)
}

func build(nc *awsv1.EC2NodeClass, labels map[string]string, reqs []karpv1.NodeSelectorRequirementWithMinValues,
	taints, startup []corev1.Taint, opts BuildOptions) Input {
	for _, r := range reqs {
		if r.Operator == karpv1.OpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	if nc.Name != "" {
		labels[karpv1.LabelNodeClass] = nc.Name
	}
	switch {
	case opts.CapacityType != "":
		labels[karpv1.LabelCapacityType] = opts.CapacityType
	case labels[karpv1.LabelCapacityType] == "":
		labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeOnDemand
	}
	in := Input{
		Family:         FamilyOf(nc),
		Kubelet:        nc.Spec.Kubelet,
		Labels:         labels,
		Taints:         append([]corev1.Taint(nil), taints...),
		StartupTaints:  append([]corev1.Taint(nil), startup...),
		Cluster:        opts.Cluster,
		MaxPods:        opts.InstanceMaxPods,
		VCPU:           opts.VCPU,
		AgentEnabled:   AgentEnabled(nc),
		JoinerImage:    opts.JoinerImage || AgentForced(nc),
		BootstrapImage: opts.BootstrapImage,
	}
	if nc.Spec.UserData != nil {
		in.UserData = *nc.Spec.UserData
	}
	if nc.Spec.InstanceStorePolicy != nil {
		in.InstanceStorePolicy = string(*nc.Spec.InstanceStorePolicy)
	}
	return in
}
