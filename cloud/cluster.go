package cloud

import (
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
)

// IP families of a cluster (EKS kubernetesNetworkConfig.ipFamily).
const (
	IPFamilyIPv4 = "ipv4"
	IPFamilyIPv6 = "ipv6"
)

// Cluster is what new nodes need to know about the Kubernetes cluster they
// join, as the cloud describes it (EKS DescribeCluster) with the
// operator's overrides in place.
type Cluster struct {
	Name string
	// Endpoint is the API server URL nodes join.
	Endpoint string
	// CABundle is the cluster's CA certificates, PEM.
	CABundle []byte
	// ServiceCIDR is the IPv4 service range, ServiceIPv6CIDR the IPv6 one
	// (an EKS cluster has the one of its IP family).
	ServiceCIDR     string
	ServiceIPv6CIDR string
	// KubernetesVersion is the control plane's major.minor ("1.34"): the
	// version of the EKS optimized AMIs aliases resolve to.
	KubernetesVersion string
	// IPFamily is IPFamilyIPv4 or IPFamilyIPv6.
	IPFamily string
}

// NodeServiceCIDR is the service range nodes are told (cluster DNS is its
// 10th address): the IPv6 range in an IPv6 cluster, else the IPv4 one;
// the other one when that is unknown.
func (c Cluster) NodeServiceCIDR() string {
	if c.IPFamily == IPFamilyIPv6 && c.ServiceIPv6CIDR != "" || c.ServiceCIDR == "" {
		return c.ServiceIPv6CIDR
	}
	return c.ServiceCIDR
}

// Override returns c with every field o sets in place of c's.
func (c Cluster) Override(o Cluster) Cluster {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Name, o.Name)
	set(&c.Endpoint, o.Endpoint)
	set(&c.ServiceCIDR, o.ServiceCIDR)
	set(&c.ServiceIPv6CIDR, o.ServiceIPv6CIDR)
	set(&c.KubernetesVersion, o.KubernetesVersion)
	set(&c.IPFamily, o.IPFamily)
	if len(o.CABundle) > 0 {
		c.CABundle = o.CABundle
	}
	return c
}

// Missing names the facts new nodes need that c lacks.
func (c Cluster) Missing() []string {
	var out []string
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"endpoint", c.Endpoint != ""},
		{"certificate authority", len(c.CABundle) > 0},
		{"service CIDR", c.NodeServiceCIDR() != ""},
		{"Kubernetes version", c.KubernetesVersion != ""},
	} {
		if !f.ok {
			out = append(out, f.name)
		}
	}
	return out
}

// minorVersion is a Kubernetes major.minor version.
var minorVersion = regexp.MustCompile(`^[1-9][0-9]*\.(0|[1-9][0-9]*)$`)

// Validate checks the fields that are set: an http(s) endpoint URL, a CA
// bundle of PEM certificates, service ranges of their family, a
// major.minor version and a known IP family.
func (c Cluster) Validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("endpoint %q: want an https:// URL", c.Endpoint)
		}
	}
	if len(c.CABundle) > 0 {
		if b, _ := pem.Decode(c.CABundle); b == nil || b.Type != "CERTIFICATE" {
			return fmt.Errorf("certificate authority: want PEM certificates")
		}
	}
	for _, r := range []struct {
		name, cidr string
		v6         bool
	}{{"service CIDR", c.ServiceCIDR, false}, {"service IPv6 CIDR", c.ServiceIPv6CIDR, true}} {
		if r.cidr == "" {
			continue
		}
		p, err := netip.ParsePrefix(r.cidr)
		if err != nil {
			return fmt.Errorf("%s %q: %w", r.name, r.cidr, err)
		}
		if p.Addr().Is6() != r.v6 {
			return fmt.Errorf("%s %q: wrong address family", r.name, r.cidr)
		}
	}
	if c.KubernetesVersion != "" && !minorVersion.MatchString(c.KubernetesVersion) {
		return fmt.Errorf("kubernetes version %q: want major.minor, e.g. 1.34", c.KubernetesVersion)
	}
	if c.IPFamily != "" && c.IPFamily != IPFamilyIPv4 && c.IPFamily != IPFamilyIPv6 {
		return fmt.Errorf("ip family %q: want %s or %s", c.IPFamily, IPFamilyIPv4, IPFamilyIPv6)
	}
	return nil
}
