package userdata

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// AMI families. They match the EC2NodeClass amiFamily values.
const (
	FamilyAL2          = awsv1.AMIFamilyAL2
	FamilyAL2023       = awsv1.AMIFamilyAL2023
	FamilyBottlerocket = awsv1.AMIFamilyBottlerocket
	FamilyUbuntu       = awsv1.AMIFamilyUbuntu
	FamilyWindows2019  = awsv1.AMIFamilyWindows2019
	FamilyWindows2022  = awsv1.AMIFamilyWindows2022
	FamilyWindows2025  = awsv1.AMIFamilyWindows2025
	FamilyCustom       = awsv1.AMIFamilyCustom
)

// Families lists every supported family, sorted.
var Families = []string{FamilyAL2, FamilyAL2023, FamilyBottlerocket, FamilyCustom, FamilyUbuntu,
	FamilyWindows2019, FamilyWindows2022, FamilyWindows2025}

// DefaultMaxPods is the pod density when neither the NodeClass nor the
// instance type says otherwise (and always on Windows).
const DefaultMaxPods = 110

// DefaultBootstrapImage is the container image of the Bottlerocket bootstrap
// container that runs "joiner bootstrap": a fixed release, never a moving
// tag, so every node of a cluster runs the same, reviewed code as root
// before kubelet. It is the Helm chart's image at its appVersion (a
// packaging test keeps the two equal); the coordinator's --bootstrap-image
// (chart: settings.bootstrapImage, default the chart's own image, by
// digest when image.digest is set) replaces it.
const DefaultBootstrapImage = "ghcr.io/joiner-dev/joiner:0.1.0"

// Sentinel errors callers can branch on.
var (
	// ErrServiceCIDRUnknown: AL2023 needs the cluster service CIDR.
	ErrServiceCIDRUnknown = errors.New("cluster service CIDR is unknown")
	// ErrUnknownFamily: the AMI family is not one of Families.
	ErrUnknownFamily = errors.New("unknown AMI family")
	// ErrInvalidUserData: the user's userData cannot be merged.
	ErrInvalidUserData = errors.New("invalid userData")
)

// Cluster holds the facts about the cluster a node joins.
type Cluster struct {
	Name     string
	Endpoint string
	// CABundle is the cluster CA, base64 encoded (as EKS DescribeCluster
	// returns it).
	CABundle string
	// ServiceCIDR is the Kubernetes service CIDR (required by AL2023).
	ServiceCIDR string
	// DNSIP is the kube-dns service IP; when empty it is the 10th address
	// of ServiceCIDR, as EKS does.
	DNSIP string
	// IPFamily is "ipv4" or "ipv6". AL2/Ubuntu derive --ip-family from the
	// cluster DNS address, as Karpenter does; this is used when no DNS
	// address is known.
	IPFamily string
}

// Input is everything a renderer needs. Build it with FromNodePool or
// FromNodeClaim, or by hand in tests.
type Input struct {
	Family string
	// UserData is the EC2NodeClass spec.userData ("" = none).
	UserData string
	// Kubelet is the EC2NodeClass spec.kubelet (nil = none).
	Kubelet             *awsv1.KubeletConfiguration
	InstanceStorePolicy string
	// BottlerocketVersion is the Bottlerocket release the EC2NodeClass
	// selects ("latest", "v1.46.0"; "" = unknown; see BottlerocketVersion).
	// With instanceStorePolicy RAID0, SupportsDefaultBind releases bind
	// their ephemeral storage to the default directories; older or unknown
	// ones are given the directories.
	BottlerocketVersion string
	// Labels of the node (the NodeClaim's labels and the capacity type; see
	// FromNodeClaim). Restricted-domain labels are dropped when rendering.
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	Cluster       Cluster
	// MaxPods is the instance type's ENI-limited pod count (0 = unknown).
	MaxPods int32
	// VCPU is the instance type's vCPU count, for podsPerCore (0 = unknown).
	VCPU int32
	// AgentEnabled: the EC2NodeClass does not opt out of the Joiner hook
	// (joiner.io/agent is not "false").
	AgentEnabled bool
	// JoinerImage: the node can run "joiner bootstrap" before the kubelet:
	// every image of the launch is Joiner-built (tagged joiner.io/ami=true),
	// or the EC2NodeClass vouches for it (joiner.io/agent: "true"; on
	// Bottlerocket, for the bootstrap container image). The hook is
	// rendered only when both this and AgentEnabled hold; otherwise the
	// user data joins the node exactly as on a stock EKS image and the
	// agent runs as the chart's DaemonSet.
	JoinerImage bool
	// BootstrapImage is the Bottlerocket bootstrap container image
	// ("" = DefaultBootstrapImage).
	BootstrapImage string
}

// resolved is the Input after the resolver rules every family shares.
type resolved struct {
	in         Input
	labels     map[string]string
	taints     []corev1.Taint
	maxPods    int32
	clusterDNS []string
	kubelet    awsv1.KubeletConfiguration
}

// hook reports whether the user data calls "joiner bootstrap".
func (r resolved) hook() bool { return r.in.AgentEnabled && r.in.JoinerImage }

// NormaliseFamily maps a family name case-insensitively to its canonical
// spelling.
func NormaliseFamily(f string) (string, error) {
	for _, k := range Families {
		if strings.EqualFold(k, f) {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownFamily, f, strings.Join(Families, ", "))
}

func isWindows(f string) bool { return strings.HasPrefix(f, "Windows") }

// eniLimited reports whether the family uses the instance type's ENI-limited
// pod density.
func eniLimited(f string) bool { return !isWindows(f) }

// honoursPodsPerCore reports whether the family applies podsPerCore.
func honoursPodsPerCore(f string) bool { return f != FamilyBottlerocket }

// EffectiveMaxPods is the max pods the user data gives the kubelet of a
// node of the family: the NodeClass kubelet maxPods as given when set
// (Karpenter keeps it; the kubelet itself applies podsPerCore on top);
// else the instance type's ENI-limited count (instanceMaxPods > 0, not on
// Windows), or 110, capped at podsPerCore x vCPU where the family honours
// podsPerCore.
func EffectiveMaxPods(family string, k *awsv1.KubeletConfiguration, instanceMaxPods, vcpu int32) int32 {
	if k != nil && k.MaxPods != nil {
		return *k.MaxPods
	}
	mp := int32(DefaultMaxPods)
	if eniLimited(family) && instanceMaxPods > 0 {
		mp = instanceMaxPods
	}
	if k != nil && k.PodsPerCore != nil && *k.PodsPerCore > 0 && vcpu > 0 && honoursPodsPerCore(family) {
		if c := *k.PodsPerCore * vcpu; c < mp {
			mp = c
		}
	}
	return mp
}

// ClusterDNSIP returns the 10th address of a service CIDR (10.100.0.10 for
// 10.100.0.0/16; fd00::a for fd00::/108), the address EKS gives kube-dns.
func ClusterDNSIP(serviceCIDR string) (string, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(serviceCIDR))
	if err != nil {
		return "", fmt.Errorf("service CIDR %q: %w", serviceCIDR, err)
	}
	base := p.Masked().Addr()
	n := new(big.Int).SetBytes(base.AsSlice())
	n.Add(n, big.NewInt(10))
	b := n.Bytes()
	out := make([]byte, len(base.AsSlice()))
	if len(b) > len(out) {
		return "", fmt.Errorf("service CIDR %q: too small for a DNS address", serviceCIDR)
	}
	copy(out[len(out)-len(b):], b)
	a, _ := netip.AddrFromSlice(out)
	if !p.Contains(a) {
		return "", fmt.Errorf("service CIDR %q: too small for a DNS address", serviceCIDR)
	}
	return a.String(), nil
}

// restrictedLabel reports whether kubelet would refuse to set the label
// (domain is or ends with kubernetes.io or k8s.io).
func restrictedLabel(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// resolve applies the rules every family shares (Karpenter's resolver).
func resolve(in Input) (resolved, error) {
	fam, err := NormaliseFamily(in.Family)
	if err != nil {
		return resolved{}, err
	}
	in.Family = fam
	r := resolved{in: in}
	if in.Kubelet != nil {
		r.kubelet = *in.Kubelet.DeepCopy()
	}
	if fam == FamilyCustom {
		return r, nil
	}
	r.labels = map[string]string{}
	for k, v := range in.Labels {
		if !restrictedLabel(k) {
			r.labels[k] = v
		}
	}
	r.labels[karpv1.LabelDoNotSync] = "true"

	r.taints = append(append([]corev1.Taint{}, in.Taints...), in.StartupTaints...)
	hasUnreg := false
	for _, t := range r.taints {
		if t.Key == karpv1.TaintUnregisteredKey && t.Effect == corev1.TaintEffectNoExecute {
			hasUnreg = true
		}
	}
	if !hasUnreg {
		r.taints = append(r.taints, corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute})
	}

	r.maxPods = EffectiveMaxPods(fam, in.Kubelet, in.MaxPods, in.VCPU)
	r.kubelet.MaxPods = &r.maxPods
	if !honoursPodsPerCore(fam) {
		r.kubelet.PodsPerCore = nil
	}

	r.clusterDNS = append([]string(nil), r.kubelet.ClusterDNS...)
	if len(r.clusterDNS) == 0 {
		dns := in.Cluster.DNSIP
		if dns == "" && in.Cluster.ServiceCIDR != "" {
			if dns, err = ClusterDNSIP(in.Cluster.ServiceCIDR); err != nil {
				return resolved{}, fmt.Errorf("cluster.serviceCIDR: %w", err)
			}
		}
		if dns != "" {
			r.clusterDNS = []string{dns}
		}
	}
	r.kubelet.ClusterDNS = r.clusterDNS
	return r, nil
}

// taintString is corev1.Taint.ToString: key[=value]:Effect.
func taintString(t corev1.Taint) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + string(t.Effect)
}

// ParseTaint is the inverse of the kubelet --register-with-taints form.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, eff, ok := strings.Cut(s, ":")
	if i := strings.LastIndex(s, ":"); i >= 0 {
		kv, eff, ok = s[:i], s[i+1:], true
	}
	if !ok || kv == "" || eff == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:Effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(eff)}, nil
}
