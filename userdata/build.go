package userdata

import (
	"slices"
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
// Labels: those of the NodeClaim Karpenter creates from np (the template
// labels, karpenter.sh/nodepool, the nodeclass label, and every
// requirement on a custom label, one that is neither well known nor
// restricted, that resolves to one value: operator In with one value),
// and the capacity type.
func FromNodePool(nc *awsv1.EC2NodeClass, np *karpv1.NodePool, opts BuildOptions) Input {
	t := np.Spec.Template
	labels := map[string]string{}
	for k, v := range t.ObjectMeta.Labels {
		labels[k] = v
	}
	labels[karpv1.LabelNodePool] = np.Name
	if nc.Name != "" {
		labels[karpv1.LabelNodeClass] = nc.Name
	}
	return build(nc, labels, t.Spec.Requirements, t.Spec.Taints, t.Spec.StartupTaints, opts)
}

// customLabel reports whether Karpenter copies a single-valued requirement
// on key into the NodeClaim's labels: it is not well known, not restricted
// and not one of the scheduling-only registered/initialized labels.
func customLabel(key string) bool {
	return !karpv1.WellKnownLabels[key] && !slices.Contains(karpv1.RestrictedLabels, key) &&
		key != karpv1.LabelRegistered && key != karpv1.LabelInitialized
}

// FromNodeClaim builds the Input for a NodeClaim. Labels: the NodeClaim's
// labels and the capacity type, as Karpenter passes them. Its requirements
// add only the custom labels a NodeClaim created by Karpenter (or Joiner)
// carries already: a single-valued requirement on a well-known label, such
// as the zone, the instance type or a capacity reservation, is the
// kubelet's or the launch's to set, not the user data's.
func FromNodeClaim(nc *awsv1.EC2NodeClass, claim *karpv1.NodeClaim, opts BuildOptions) Input {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	return build(nc, labels, claim.Spec.Requirements, claim.Spec.Taints, claim.Spec.StartupTaints, opts)
}

// build completes the Input: labels gain every custom-label requirement
// (customLabel) with one value (operator In, one value) they lack, and the
// capacity type: opts.CapacityType, else the labels', else the single value
// of a capacity-type requirement, else on-demand.
func build(nc *awsv1.EC2NodeClass, labels map[string]string, reqs []karpv1.NodeSelectorRequirementWithMinValues,
	taints, startup []corev1.Taint, opts BuildOptions) Input {
	for _, r := range reqs {
		if _, set := labels[r.Key]; !set && r.Operator == karpv1.OpIn && len(r.Values) == 1 && customLabel(r.Key) {
			labels[r.Key] = r.Values[0]
		}
	}
	switch {
	case opts.CapacityType != "":
		labels[karpv1.LabelCapacityType] = opts.CapacityType
	case labels[karpv1.LabelCapacityType] == "":
		labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeOnDemand
		for _, r := range reqs {
			if r.Key == karpv1.LabelCapacityType && r.Operator == karpv1.OpIn && len(r.Values) == 1 {
				labels[karpv1.LabelCapacityType] = r.Values[0]
			}
		}
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
	if in.Family == FamilyBottlerocket {
		in.BottlerocketVersion = BottlerocketVersion(nc)
	}
	return in
}
