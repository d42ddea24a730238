package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Config is the simulated region: its zones and the tagged subnets,
// security groups, images and SSM parameters that selector terms resolve
// against.
type Config struct {
	Region         string     `json:"region"`
	Zones          []string   `json:"zones"`
	Subnets        []Subnet   `json:"subnets"`
	SecurityGroups []SecGroup `json:"securityGroups"`
	Images         []Image    `json:"images"`
	// PlacementGroups are the region's placement groups.
	PlacementGroups []PlacementGroup  `json:"placementGroups,omitempty"`
	Parameters      map[string]string `json:"parameters"`
	// BootDelay is how long an instance stays pending before it runs and
	// registers its Node.
	BootDelay Duration `json:"bootDelay"`
	// InterruptionNotice is the time between a spot interruption notice and
	// the instance's termination (EC2: 2 minutes).
	InterruptionNotice Duration `json:"interruptionNotice"`
	// InterruptionQueue names the SQS queue the sim's EventBridge rules
	// send spot interruption warnings, rebalance recommendations, instance
	// state changes and AWS Health scheduled changes to (Karpenter's
	// interruption queue; "": no queue, the events go nowhere).
	InterruptionQueue string `json:"interruptionQueue,omitempty"`
	// CapacityReservations are the account's capacity reservations (none
	// by default).
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// Cluster is the EKS cluster EKS DescribeCluster describes.
	Cluster EKSCluster `json:"cluster"`
	// IAM is the account's roles and instance profiles and what its
	// callers may do (default: Joiner's controller policy for every
	// caller; see Access).
	IAM IAM `json:"iam,omitempty"`
	// NoSpotPrice are the instance type and zone pairs the spot price
	// history has no price for, as AWS has none for many pairs (none by
	// default: every type is priced in every zone). A spot launch of such
	// a pair fails with Unsupported.
	NoSpotPrice []TypeZone `json:"noSpotPrice,omitempty"`
	// PageSizes caps the items DescribeSubnets, DescribeSecurityGroups and
	// DescribeImages answer per page, by action (none by default: a page
	// holds MaxResults items, or all of them). The cap is counted before
	// the request's filters, as EC2 counts MaxResults for these actions,
	// so a page may hold fewer items than the cap, even none, and still
	// carry a NextToken.
	PageSizes map[string]int `json:"pageSizes,omitempty"`
}

// TypeZone is an instance type in a zone ("": every zone).
type TypeZone struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone,omitempty"`
}

// Subnet is a simulated subnet.
type Subnet struct {
	ID           string            `json:"id"`
	Zone         string            `json:"zone"`
	AvailableIPs int               `json:"availableIPs"`
	Tags         map[string]string `json:"tags"`
}

// SecGroup is a simulated security group.
type SecGroup struct {
	ID   string            `json:"id"`
	Name string            `json:"name"`
	Tags map[string]string `json:"tags"`
}

// PlacementGroup is a simulated placement group.
type PlacementGroup struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Strategy: cluster, partition or spread.
	Strategy       string `json:"strategy"`
	PartitionCount int    `json:"partitionCount,omitempty"`
	// SpreadLevel: rack or host (spread).
	SpreadLevel string `json:"spreadLevel,omitempty"`
	// State: pending, available, deleting or deleted.
	State string            `json:"state"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// Image is a simulated AMI; Family tells the sim how to read the user data
// of instances booted from it.
type Image struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Owner        string            `json:"owner"`
	Arch         string            `json:"arch"` // x86_64 or arm64
	Family       string            `json:"family"`
	CreationDate string            `json:"creationDate"`
	Tags         map[string]string `json:"tags"`
	// DeprecationTime (RFC 3339, optional) is when EC2 deprecates the
	// image; DescribeImages reports it. As EC2, DescribeImages leaves a
	// deprecated image out unless the request sets IncludeDeprecated,
	// names it by ID or the account owns it.
	DeprecationTime string `json:"deprecationTime,omitempty"`
	// State is the image's state: available (""), pending, failed,
	// transient, invalid, deregistered, error or disabled.
	State string `json:"state,omitempty"`
	// Release is the image's release version (EKS v20260101, Bottlerocket
	// 1.50.0, Windows 2026.01.01); ReleaseImages publishes the next one.
	Release string `json:"release,omitempty"`
}

// Duration is a time.Duration written as text ("2s") in JSON.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "2s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "2s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// DiscoveryTag is the tag the default subnets and security group carry.
const DiscoveryTag = "karpenter.sh/discovery"

// DefaultKubernetesVersion is the version whose newest images keep the
// short IDs (ami-0sim2023x86, ...), other versions' carry a suffix
// (ami-0sim2023x86k131); tests that build a provider without cluster
// discovery use it. The default EKS cluster runs DefaultClusterVersion.
const DefaultKubernetesVersion = "1.32"

// DefaultConfig: us-east-1 with zones a-c, one subnet per zone, one
// security group tagged karpenter.sh/discovery=sim, a cluster, a partition
// (3 partitions) and a spread placement group, and the images AWS
// publishes for EKS nodes with their SSM parameters (recommended/latest and
// pinned releases) for KubernetesVersions: AL2023, AL2, Bottlerocket and
// Windows, per architecture and variant (see imageLines).
func DefaultConfig() Config {
	region := catalog.PriceRegion
	zones := catalog.DefaultZones(region)
	cfg := Config{
		Region:             region,
		Zones:              zones,
		Parameters:         map[string]string{},
		BootDelay:          Duration{2 * time.Second},
		InterruptionNotice: Duration{2 * time.Minute},
		Cluster:            DefaultCluster(),
	}
	for i, z := range zones {
		cfg.Subnets = append(cfg.Subnets, Subnet{
			ID: fmt.Sprintf("subnet-0sim%04d", i+1), Zone: z, AvailableIPs: 4000 - 100*i,
			Tags: map[string]string{DiscoveryTag: "sim", "Name": "sim-private-" + z},
		})
	}
	cfg.SecurityGroups = []SecGroup{{ID: "sg-0sim0001", Name: "sim-nodes", Tags: map[string]string{DiscoveryTag: "sim"}}}
	cfg.PlacementGroups = []PlacementGroup{
		{ID: "pg-0sim0001", Name: "sim-cluster", Strategy: "cluster", State: "available"},
		{ID: "pg-0sim0002", Name: "sim-partition", Strategy: "partition", PartitionCount: 3, State: "available"},
		{ID: "pg-0sim0003", Name: "sim-spread", Strategy: "spread", SpreadLevel: "rack", State: "available"},
	}
	addEKSImages(&cfg, KubernetesVersions, defaultReleases)
	return cfg
}

// LoadConfig reads a JSON config file; unset fields keep DefaultConfig's
// values.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading sim config: %w", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, fmt.Errorf("parsing sim config %s: %w", path, err)
	}
	if len(cfg.Zones) == 0 {
		return Config{}, fmt.Errorf("sim config %s: zones: empty", path)
	}
	if err := ValidateAccess(cfg.IAM.Access, cfg.Region); err != nil {
		return Config{}, fmt.Errorf("sim config %s: %w", path, err)
	}
	return cfg, nil
}
