package sim

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// EKSCluster is the simulated EKS cluster (Config.Cluster).
type EKSCluster struct {
	Name string `json:"name"`
	// Endpoint is the API server URL nodes join.
	Endpoint string `json:"endpoint"`
	// CA is the cluster CA certificate, PEM (DescribeCluster returns it
	// base64 encoded, as certificateAuthority.data).
	CA string `json:"ca"`
	// Version is the Kubernetes minor version ("1.34").
	Version         string `json:"version"`
	PlatformVersion string `json:"platformVersion"`
	// ServiceIPv4CIDR and ServiceIPv6CIDR are the service ranges (EKS sets
	// the one of IPFamily).
	ServiceIPv4CIDR string `json:"serviceIpv4Cidr,omitempty"`
	ServiceIPv6CIDR string `json:"serviceIpv6Cidr,omitempty"`
	// IPFamily is ipv4 or ipv6.
	IPFamily string `json:"ipFamily"`
	// Status is ACTIVE, CREATING, UPDATING, DELETING or FAILED.
	Status string `json:"status"`
}

// DefaultClusterVersion is the default cluster's Kubernetes version (the
// sim publishes images for every version in KubernetesVersions).
const DefaultClusterVersion = "1.34"

// DefaultServiceCIDR is the default cluster's service range: what EKS
// picks when the VPC is within 10.0.0.0/8, as the sim's is.
const DefaultServiceCIDR = "172.20.0.0/16"

// DefaultClusterCA is the default cluster's CA certificate (a self-signed
// P-256 CA whose key was thrown away).
const DefaultClusterCA = `-----BEGIN CERTIFICATE-----
MIIBfjCCASSgAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDDAprdWJlcm5l
dGVzMCAXDTI2MTEyMzIyMjkxM1oYDzIxMjYxMDMwMjIyOTEzWjAVMRMwEQYDVQQD
DAprdWJlcm5ldGVzMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQcyUufcDFAPP
io4SsUCHCizQzzEv6MfeDjqPD+qPYPRG0B8KNFARnVBoRollhkvS6vz9anufUTXX
S/HD3ZkmhKNjMGEwHQYDVR0OBBYEFNmWXyK34hEQoLtHkQINRWuUqCTrMB8GA1Ud
IwQYMBaAFNmWXyK34hEQoLtHkQINRWuUqCTrMA8GA1UdEwEB/wQFMAMBAf8wDgYD
VR0PAQH/BAQDAgKkMAoGCCqGSM49BAMCA0gAMEUCIQCowulHEbnZ072mBVmyfyDm
x7wx9kFy9ms8pWOjAsS/WAIgTZ6x1V+8eE/LXkkwdrKmEM+2feDMVZ5xbp5BGqcQ
oJQ=
-----END CERTIFICATE-----
`

// DefaultCluster is the default EKS cluster: named "sim" (DiscoveryTag's
// value on the default subnets), ACTIVE, IPv4 with DefaultServiceCIDR,
// running DefaultClusterVersion.
func DefaultCluster() EKSCluster {
	return EKSCluster{
		Name: "sim", Endpoint: "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
		CA: DefaultClusterCA, Version: DefaultClusterVersion, PlatformVersion: "eks.1",
		ServiceIPv4CIDR: DefaultServiceCIDR, IPFamily: "ipv4", Status: "ACTIVE",
	}
}

// clusterCreated is when every simulated cluster was created.
var clusterCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// serveEKS answers the EKS REST API; only DescribeCluster
// (GET /clusters/{name}) is simulated.
func (s *Sim) serveEKS(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/")
	name, err := url.PathUnescape(rest)
	if r.Method != http.MethodGet || rest == "" || strings.Contains(rest, "/") || err != nil {
		writeJSONError(w, http.StatusBadRequest, "InvalidRequestException", fmt.Sprintf("%s %s is not simulated", r.Method, r.URL.Path))
		return
	}
	s.mu.Lock()
	s.calls["DescribeCluster"]++
	c := s.cfg.Cluster
	body := s.describeCluster(c)
	s.mu.Unlock()
	if c.Name == "" || name != c.Name {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"clusterName": name, "message": "No cluster found for name: " + name + "."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"cluster": body})
}

// describeCluster is the DescribeCluster body of c: its VPC config lists
// the region's subnets and security groups. s.mu is held.
func (s *Sim) describeCluster(c EKSCluster) map[string]any {
	var subnets, groups []string
	for _, sn := range s.cfg.Subnets {
		subnets = append(subnets, sn.ID)
	}
	clusterSG := ""
	for _, g := range s.cfg.SecurityGroups {
		groups = append(groups, g.ID)
		clusterSG = cmp.Or(clusterSG, g.ID)
	}
	network := map[string]any{"ipFamily": c.IPFamily, "elasticLoadBalancing": map[string]any{"enabled": false}}
	if c.ServiceIPv4CIDR != "" {
		network["serviceIpv4Cidr"] = c.ServiceIPv4CIDR
	}
	if c.ServiceIPv6CIDR != "" {
		network["serviceIpv6Cidr"] = c.ServiceIPv6CIDR
	}
	out := map[string]any{
		"name":                    c.Name,
		"arn":                     fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.cfg.Region, ownerID, c.Name),
		"createdAt":               float64(clusterCreated.Unix()),
		"version":                 c.Version,
		"roleArn":                 fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", ownerID, c.Name),
		"kubernetesNetworkConfig": network,
		"resourcesVpcConfig": map[string]any{
			"subnetIds": subnets, "securityGroupIds": groups, "clusterSecurityGroupId": clusterSG, "vpcId": vpcID,
			"endpointPublicAccess": true, "endpointPrivateAccess": true, "publicAccessCidrs": []string{"0.0.0.0/0"},
		},
		"status":          c.Status,
		"platformVersion": c.PlatformVersion,
		"tags":            map[string]string{},
	}
	if c.Endpoint != "" { // a CREATING cluster has neither yet
		out["endpoint"] = c.Endpoint
	}
	if c.CA != "" {
		out["certificateAuthority"] = map[string]string{"data": base64.StdEncoding.EncodeToString([]byte(c.CA))}
	}
	return out
}

// SetCluster replaces the simulated cluster (an upgrade, say: a new
// Version); DescribeCluster answers with it from then on.
func (s *Sim) SetCluster(c EKSCluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Cluster = c
}

// Cluster returns the simulated cluster.
func (s *Sim) Cluster() EKSCluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Cluster
}
