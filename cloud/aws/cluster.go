package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// EKSAPI is the part of EKS Joiner calls (*eks.Client implements it).
type EKSAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// DescribeCluster reads what new nodes need to know about an EKS cluster:
// its endpoint, CA, service CIDRs, IP family and Kubernetes version. An
// unknown cluster is cloud.ErrNotFound; the values EKS gives are checked
// (cloud.Cluster.Validate).
func DescribeCluster(ctx context.Context, eksAPI EKSAPI, name string) (cloud.Cluster, error) {
	out, err := eksAPI.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return cloud.Cluster{}, fmt.Errorf("describing EKS cluster %s: %w", name, classify(err))
	}
	if out.Cluster == nil {
		return cloud.Cluster{}, fmt.Errorf("describing EKS cluster %s: empty answer: %w", name, cloud.ErrRetryable)
	}
	c := out.Cluster
	res := cloud.Cluster{Name: aws.ToString(c.Name), Endpoint: aws.ToString(c.Endpoint), KubernetesVersion: aws.ToString(c.Version)}
	if ca := c.CertificateAuthority; ca != nil && aws.ToString(ca.Data) != "" {
		if res.CABundle, err = base64.StdEncoding.DecodeString(aws.ToString(ca.Data)); err != nil {
			return cloud.Cluster{}, fmt.Errorf("EKS cluster %s: certificateAuthority.data: %w", name, err)
		}
	}
	if n := c.KubernetesNetworkConfig; n != nil {
		res.ServiceCIDR, res.ServiceIPv6CIDR = aws.ToString(n.ServiceIpv4Cidr), aws.ToString(n.ServiceIpv6Cidr)
		res.IPFamily = strings.ToLower(string(n.IpFamily))
	}
	if res.IPFamily == "" && res.ServiceCIDR == "" && res.ServiceIPv6CIDR != "" {
		res.IPFamily = cloud.IPFamilyIPv6
	}
	if err := res.Validate(); err != nil {
		return cloud.Cluster{}, fmt.Errorf("EKS cluster %s (status %s): %w", name, c.Status, err)
	}
	return res, nil
}

// ClusterDiscovery keeps the facts of one cluster: the operator's
// overrides in place of what EKS DescribeCluster last said. Refresh asks
// EKS again (unless the overrides leave nothing to ask); Cluster reads the
// current facts from any goroutine.
type ClusterDiscovery struct {
	eksAPI    EKSAPI
	name      string
	overrides cloud.Cluster
	log       *zap.Logger
	now       func() time.Time

	mu sync.RWMutex
	// discovered is what the last successful DescribeCluster said, at.
	discovered cloud.Cluster
	at         time.Time
	// err is the last refresh's error (nil after a success).
	err error
}

// ClusterStatus is what a ClusterDiscovery knows, for status output.
type ClusterStatus struct {
	// Cluster is the current facts (overrides in place).
	Cluster cloud.Cluster
	// Overridden names the facts the operator set.
	Overridden []string
	// DiscoveredAt is the last successful DescribeCluster (zero: none).
	DiscoveredAt time.Time
	// Err is the last refresh's error, or why the facts are incomplete.
	Err error
}

// NewClusterDiscovery returns the discovery of cluster name through eksAPI
// (nil: overrides only); overrides that are set win over what EKS says.
func NewClusterDiscovery(eksAPI EKSAPI, name string, overrides cloud.Cluster, log *zap.Logger, now func() time.Time) (*ClusterDiscovery, error) {
	if name == "" {
		return nil, errors.New("cluster discovery: cluster name is required")
	}
	if err := overrides.Validate(); err != nil {
		return nil, fmt.Errorf("cluster overrides: %w", err)
	}
	overrides.Name = name
	if overrides.IPFamily == "" { // a service CIDR given decides the family
		switch {
		case overrides.ServiceCIDR != "":
			overrides.IPFamily = cloud.IPFamilyIPv4
		case overrides.ServiceIPv6CIDR != "":
			overrides.IPFamily = cloud.IPFamilyIPv6
		}
	}
	defaults.Zero(&log, zap.NewNop())
	defaults.Clock(&now)
	return &ClusterDiscovery{eksAPI: eksAPI, name: name, overrides: overrides, log: log.Named("cluster"), now: now}, nil
}

// complete reports whether the overrides leave nothing to discover.
func (d *ClusterDiscovery) complete() bool { return len(d.overrides.Missing()) == 0 }

// Refresh describes the cluster again. On failure the facts discovered
// before stay (as Karpenter keeps its last Kubernetes version) and the
// error is returned and remembered.
func (d *ClusterDiscovery) Refresh(ctx context.Context) error {
	if d.complete() {
		return nil
	}
	if d.eksAPI == nil {
		err := fmt.Errorf("cluster %s: no EKS client to discover %s with", d.name, strings.Join(d.overrides.Missing(), ", "))
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
		return err
	}
	got, err := DescribeCluster(ctx, d.eksAPI, d.name)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
	if err != nil {
		return err
	}
	before := d.discovered.Override(d.overrides)
	d.discovered, d.at = got, d.now()
	after := d.discovered.Override(d.overrides)
	if before.KubernetesVersion != after.KubernetesVersion || before.Endpoint != after.Endpoint || before.NodeServiceCIDR() != after.NodeServiceCIDR() {
		d.log.Info("cluster discovered", zap.String("cluster", d.name), zap.String("endpoint", after.Endpoint),
			zap.String("kubernetes-version", after.KubernetesVersion), zap.String("service-cidr", after.NodeServiceCIDR()),
			zap.String("ip-family", after.IPFamily), zap.String("previous-kubernetes-version", before.KubernetesVersion))
	}
	return nil
}

// Cluster returns the current facts. The error (cloud.ErrClusterUnknown)
// names what new nodes need that is neither overridden nor discovered,
// with the last discovery error; once known, the facts stay known through
// failed refreshes.
func (d *ClusterDiscovery) Cluster() (cloud.Cluster, error) {
	st := d.Status()
	if missing := st.Cluster.Missing(); len(missing) > 0 {
		why := "not discovered yet"
		switch {
		case st.Err != nil:
			why = st.Err.Error()
		case !st.DiscoveredAt.IsZero():
			why = "EKS DescribeCluster gives none yet"
		}
		return st.Cluster, fmt.Errorf("cluster %s: %s neither given nor discovered (%s): %w", d.name, strings.Join(missing, ", "), why,
			cloud.ErrClusterUnknown)
	}
	return st.Cluster, nil
}

// Status returns the current facts, which of them are overridden, when
// EKS last answered and the last refresh's error.
func (d *ClusterDiscovery) Status() ClusterStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	st := ClusterStatus{Cluster: d.discovered.Override(d.overrides), DiscoveredAt: d.at, Err: d.err, Overridden: d.overridden()}
	if st.Cluster.IPFamily == "" {
		st.Cluster.IPFamily = cloud.IPFamilyIPv4
	}
	return st
}

// overridden names the facts the operator set.
func (d *ClusterDiscovery) overridden() []string {
	o := d.overrides
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"endpoint", o.Endpoint != ""}, {"certificate authority", len(o.CABundle) > 0},
		{"service CIDR", o.ServiceCIDR != "" || o.ServiceIPv6CIDR != ""}, {"Kubernetes version", o.KubernetesVersion != ""},
		{"IP family", o.IPFamily != ""},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// KubernetesVersion is the cluster's version ("" while unknown).
func (d *ClusterDiscovery) KubernetesVersion() string {
	c, _ := d.Cluster()
	return c.KubernetesVersion
}
