package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/userdata"
)

// initialDiscoveryTimeout bounds the DescribeCluster a replica makes at
// start (the leader's cloud loop keeps trying after it).
const initialDiscoveryTimeout = 20 * time.Second

// clusterOverrides are the cluster facts the flags set (Karpenter's
// CLUSTER_ENDPOINT and CLUSTER_CA_BUNDLE semantics: a flag that is set
// wins, an empty one leaves the fact to EKS DescribeCluster). The CA is
// --cluster-ca-bundle, else --cluster-ca-file, else the kubeconfig's (what
// Karpenter hashes and gives nodes), else discovered.
func (f *coordinatorFlags) clusterOverrides(rc *rest.Config) (cloud.Cluster, error) {
	lf := &f.leader
	o := cloud.Cluster{Endpoint: f.clusterEndpoint, KubernetesVersion: lf.k8sVersion}
	if lf.serviceCIDR != "" {
		p, err := netip.ParsePrefix(lf.serviceCIDR)
		if err != nil {
			return cloud.Cluster{}, fmt.Errorf("--service-cidr %q: %w", lf.serviceCIDR, err)
		}
		if p.Addr().Is6() {
			o.ServiceIPv6CIDR, o.IPFamily = lf.serviceCIDR, cloud.IPFamilyIPv6
		} else {
			o.ServiceCIDR, o.IPFamily = lf.serviceCIDR, cloud.IPFamilyIPv4
		}
	}
	ca, flag := caBundle([]byte(lf.caBundle)), "--cluster-ca-bundle"
	if lf.caBundle == "" {
		var err error
		if ca, err = clusterCABundle(rc, lf.caFile); err != nil {
			return cloud.Cluster{}, err
		}
		flag = "--cluster-ca-file (or the kubeconfig's CA)"
	}
	if ca != "" {
		pem, err := base64.StdEncoding.DecodeString(ca)
		if err != nil {
			return cloud.Cluster{}, fmt.Errorf("%s: want a PEM or base64-encoded PEM CA bundle: %w", flag, err)
		}
		o.CABundle = pem
	}
	for _, c := range []struct {
		flag string
		c    cloud.Cluster
	}{
		{"--cluster-endpoint", cloud.Cluster{Endpoint: o.Endpoint}},
		{"--kubernetes-version", cloud.Cluster{KubernetesVersion: o.KubernetesVersion}},
		{flag, cloud.Cluster{CABundle: o.CABundle}},
	} {
		if err := c.c.Validate(); err != nil {
			return cloud.Cluster{}, fmt.Errorf("%s: %w", c.flag, err)
		}
	}
	return o, nil
}

// discoverCluster builds the cluster discovery of --cluster-name (the flags'
// overrides over EKS DescribeCluster) and describes the cluster once. A
// failure is logged, not returned: the coordinator runs, the leader's
// cloud loop retries, and until the facts are known every EC2NodeClass
// says why it is not ready.
func discoverCluster(ctx context.Context, f *coordinatorFlags, eks joineraws.EKSAPI, rc *rest.Config, log *zap.Logger) (*joineraws.ClusterDiscovery, error) {
	o, err := f.clusterOverrides(rc)
	if err != nil {
		return nil, err
	}
	d, err := joineraws.NewClusterDiscovery(eks, f.clusterName, o, log, nil)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, initialDiscoveryTimeout)
	defer cancel()
	if err := d.Refresh(dctx); err != nil {
		log.Error("discovering the cluster with EKS DescribeCluster (is eks:DescribeCluster allowed?); no node launches until it succeeds, "+
			"or set --cluster-endpoint, --cluster-ca-bundle, --service-cidr and --kubernetes-version", zap.String("cluster", f.clusterName), zap.Error(err))
	}
	if c, err := d.Cluster(); err == nil {
		log.Info("cluster", zap.String("cluster", c.Name), zap.String("endpoint", c.Endpoint), zap.String("kubernetes-version", c.KubernetesVersion),
			zap.String("service-cidr", c.NodeServiceCIDR()), zap.String("ip-family", c.IPFamily), zap.Strings("given", d.Status().Overridden))
	}
	return d, nil
}

// The Service whose cluster IP nodes are given as cluster DNS (Karpenter's
// KubeDNSIP).
const kubeDNSNamespace, kubeDNSService = "kube-system", "kube-dns"

// kubeDNSIP reads the cluster IP of the kube-system/kube-dns Service once,
// at start, as Karpenter does. It returns "" when the Service cannot be
// read or has no cluster IP (a custom DNS setup may have none): nodes are
// then given the 10th address of the service CIDR.
func kubeDNSIP(ctx context.Context, kube kubernetes.Interface, log *zap.Logger) string {
	ctx, cancel := context.WithTimeout(ctx, initialDiscoveryTimeout)
	defer cancel()
	svc, err := kube.CoreV1().Services(kubeDNSNamespace).Get(ctx, kubeDNSService, metav1.GetOptions{})
	if err != nil {
		log.Info("cannot read the kube-dns Service; nodes get the 10th address of the service CIDR as cluster DNS",
			zap.String("service", kubeDNSNamespace+"/"+kubeDNSService), zap.Error(err))
		return ""
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		log.Info("the kube-dns Service has no cluster IP; nodes get the 10th address of the service CIDR as cluster DNS",
			zap.String("service", kubeDNSNamespace+"/"+kubeDNSService), zap.String("cluster-ip", svc.Spec.ClusterIP))
		return ""
	}
	log.Info("discovered kube-dns", zap.String("kube-dns-ip", ip.String()))
	return ip.String()
}

// nodeFacts is what the coordinator tells nodes about the cluster: the
// cluster discovery's facts and the kube-dns Service's cluster IP read at
// start ("" = unknown).
type nodeFacts struct {
	discovery *joineraws.ClusterDiscovery
	dnsIP     string
}

// nodeCluster is what the user data of a new node says about the cluster
// it joins (cluster DNS: the kube-dns Service's cluster IP dnsIP, else the
// 10th address of the service CIDR).
func nodeCluster(c cloud.Cluster, dnsIP string) userdata.Cluster {
	out := userdata.Cluster{Name: c.Name, Endpoint: c.Endpoint, ServiceCIDR: c.NodeServiceCIDR(), IPFamily: c.IPFamily, DNSIP: dnsIP}
	if len(c.CABundle) > 0 {
		out.CABundle = base64.StdEncoding.EncodeToString(c.CABundle)
	}
	return out
}

// leaderCluster is leader.Deps.NodeCluster over a discovery.
func leaderCluster(n *nodeFacts) func() (userdata.Cluster, string, error) {
	return func() (userdata.Cluster, string, error) {
		c, err := n.discovery.Cluster()
		return nodeCluster(c, n.dnsIP), c.KubernetesVersion, err
	}
}

// statusCluster is what /v1/status says of the cluster.
func statusCluster(n *nodeFacts) func() *api.ClusterFacts {
	return func() *api.ClusterFacts {
		d := n.discovery
		st := d.Status()
		c := st.Cluster
		out := &api.ClusterFacts{Name: c.Name, Endpoint: c.Endpoint, KubernetesVersion: c.KubernetesVersion, ServiceCIDR: c.NodeServiceCIDR(),
			IPFamily: c.IPFamily, Overridden: st.Overridden, ClusterDNS: n.dnsIP}
		if out.ClusterDNS == "" && out.ServiceCIDR != "" {
			out.ClusterDNS, _ = userdata.ClusterDNSIP(out.ServiceCIDR)
		}
		if !st.DiscoveredAt.IsZero() {
			t := st.DiscoveredAt.UTC()
			out.DiscoveredAt = &t
		}
		if _, err := d.Cluster(); err != nil {
			out.Error = err.Error()
		} else if st.Err != nil {
			out.Error = st.Err.Error()
		}
		return out
	}
}
