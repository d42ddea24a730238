// Package cloud is the coordinator's only road to the cloud: the Provider
// interface (launch an instance from a frozen launch spec, find instances
// by tag, terminate them, resolve an EC2NodeClass's selectors, list its
// instance types with offerings and prices) and the types and sentinel
// errors that cross it, each declared once. cloud/aws implements it on
// aws-sdk-go-v2; cloud/sim is a simulated EC2 region that the AWS provider
// can talk to.
package cloud

import (
	"context"
	"strconv"
	"strings"
	"time"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Provider is the cloud as the coordinator uses it. Only the binary's
// wiring picks the implementation (cloud/aws).
type Provider interface {
	// Launch starts one instance for req. Calling it again with the same
	// request (same ClientToken) returns the same instance, never a second
	// one. Errors: *InsufficientCapacityError (errors.Is
	// ErrInsufficientCapacity) when no candidate offering had capacity,
	// ErrTokenInstanceTerminated, ErrIdempotentMismatch, ErrInvalidSpec;
	// anything else leaves the outcome unknown (see IsRetryable).
	Launch(ctx context.Context, req LaunchRequest) (Instance, error)
	// Get returns one instance; ErrNotFound when EC2 does not know it.
	Get(ctx context.Context, id string) (Instance, error)
	// List returns the cluster's instances (tagged kubernetes.io/cluster/<c>)
	// that carry every tag in tags; terminated instances are left out.
	List(ctx context.Context, tags map[string]string) ([]Instance, error)
	// Terminate terminates an instance; terminating a terminated or unknown
	// instance is not an error.
	Terminate(ctx context.Context, id string) error
	// Resolve resolves an EC2NodeClass's subnets, security groups, AMIs and
	// instance profile. On failure it returns what it could resolve and a
	// *ResolveError naming each failed part.
	Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (Resolved, error)
	// InstanceTypes returns the instance types a NodeClass (with its
	// resolved status) can launch, with their offerings and current prices;
	// offerings that recently failed with a capacity error have
	// Available=false.
	InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error)
	// SubnetsByZone picks one subnet per zone to launch into, leaving out
	// subnets that recently ran out of addresses unless a zone has no other.
	SubnetsByZone(subnets []Subnet) map[string]string
	// Run does the provider's background work (spot prices, launch
	// template adoption and clean-up) until ctx ends; run it on the leader.
	Run(ctx context.Context) error
}

// LaunchSpec is everything a launch needs, resolved and frozen when the
// launch intent is committed to raft: every attempt of the intent sends the
// cloud the same request, so a same-token retry by a new leader is
// deduplicated rather than rejected as a parameter mismatch.
type LaunchSpec struct {
	NodePool  string `json:"nodePool"`
	NodeClass string `json:"nodeClass,omitempty"`
	NodeClaim string `json:"nodeClaim"`
	// Candidates are the offerings to choose from, of every capacity type
	// the claim allows (reserved ones alone when the claim is pinned to a
	// reservation); the provider drops those it knows to be out of
	// capacity, applies Karpenter's launch filters, keeps the 60 cheapest
	// types and launches reserved, else spot, else on-demand. Records
	// written before the provisioner sent spot and on-demand together hold
	// one capacity type.
	Candidates []Candidate `json:"candidates"`
	// Subnets maps a zone to the subnet to launch into there.
	Subnets map[string]string `json:"subnets,omitempty"`
	// SecurityGroupIDs of the instance.
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
	// UserData is the rendered user data (not base64-encoded).
	UserData        []byte                      `json:"userData,omitempty"`
	BlockDevices    []*awsv1.BlockDeviceMapping `json:"blockDevices,omitempty"`
	MetadataOptions *awsv1.MetadataOptions      `json:"metadataOptions,omitempty"`
	// InstanceProfile is the IAM instance profile name ("" for none).
	InstanceProfile    string `json:"instanceProfile,omitempty"`
	DetailedMonitoring bool   `json:"detailedMonitoring,omitempty"`
	// Tags are the NodeClass's tags; Joiner's own keys are added at launch
	// and restricted keys are rejected (awsv1.RestrictedTag).
	Tags map[string]string `json:"tags,omitempty"`

	// The fields below came after the first records were committed: each is
	// omitempty, and absent means what it meant before (one interface with
	// the subnet's defaults, no placement group, no fleet context).

	// AssociatePublicIPAddress, IPPrefixCount, NetworkInterfaces,
	// ConnectionTracking and CPUOptions are the EC2NodeClass's, copied.
	AssociatePublicIPAddress *bool                     `json:"associatePublicIPAddress,omitempty"`
	IPPrefixCount            *int32                    `json:"ipPrefixCount,omitempty"`
	NetworkInterfaces        []*awsv1.NetworkInterface `json:"networkInterfaces,omitempty"`
	ConnectionTracking       *awsv1.ConnectionTracking `json:"connectionTracking,omitempty"`
	CPUOptions               *awsv1.CPUOptions         `json:"cpuOptions,omitempty"`
	// ClusterIPv6: the cluster's DNS service address is IPv6, so
	// interfaces get a primary IPv6 address and ipPrefixCount counts IPv6
	// prefixes (Karpenter's cluster IP family).
	ClusterIPv6 bool `json:"clusterIPv6,omitempty"`
	// Context is the EC2NodeClass's context, sent with CreateFleet ("" when
	// unset, or when the claim's minValues were relaxed, as in Karpenter).
	Context string `json:"context,omitempty"`
	// PlacementGroupID is the placement group the class resolved to, and
	// PlacementGroupPartition the partition to launch into (partition
	// placement groups only; 0 lets EC2 choose).
	PlacementGroupID        string `json:"placementGroupID,omitempty"`
	PlacementGroupPartition int32  `json:"placementGroupPartition,omitempty"`
	// UserDataVariants are the other renderings of the user data, for
	// candidates whose kubelet settings differ (max pods), as Karpenter
	// renders one launch template per max-pods value
	// (Candidate.UserDataVariant). Absent: every candidate boots UserData.
	UserDataVariants [][]byte `json:"userDataVariants,omitempty"`
	// MinValues: the NodeClaim's requirements carry minValues, so the
	// launch keeps exotic types and spot offerings dearer than on-demand
	// (Karpenter skips its exotic and spot-offering filters then).
	MinValues bool `json:"minValues,omitempty"`
}

// UserDataOf is the user data candidate c boots with.
func (s LaunchSpec) UserDataOf(c Candidate) []byte {
	if c.UserDataVariant > 0 && c.UserDataVariant <= len(s.UserDataVariants) {
		return s.UserDataVariants[c.UserDataVariant-1]
	}
	return s.UserData
}

// LaunchRequest is one attempt of a launch intent: its frozen spec, the
// intent's ID and the attempt number, from which the provider derives the
// ClientToken and Joiner's tags.
type LaunchRequest struct {
	LaunchID string
	Attempt  int
	Spec     LaunchSpec
}

// ClientToken is EC2's idempotency token of attempt n of a launch intent:
// <cluster>-<launch ID>-<n>, at most 64 ASCII characters (EC2's limit; the
// cluster name is shortened if needed).
func ClientToken(cluster, launchID string, attempt int) string {
	suffix := "-" + launchID + "-" + strconv.Itoa(attempt)
	if limit := max(0, 64-len(suffix)); len(cluster) > limit {
		cluster = cluster[:limit]
	}
	return cluster + suffix
}

// Candidate is one (instance type, zone, capacity type) offering with the
// image to boot.
type Candidate struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	ImageID      string  `json:"imageID,omitempty"`
	// EFACount is the number of EFA interfaces to attach: the type's
	// vpc.amazonaws.com/efa capacity when the claim requests EFA and the
	// class names no network interfaces, else 0 (Karpenter's EFA count).
	EFACount int32 `json:"efaCount,omitempty"`
	// ReservationID, ReservationType (default or capacity-block) and
	// Interruptible name the capacity reservation a reserved candidate
	// launches into.
	ReservationID   string `json:"reservationID,omitempty"`
	ReservationType string `json:"reservationType,omitempty"`
	Interruptible   bool   `json:"interruptible,omitempty"`
	// UserDataVariant is the user data the candidate boots with: 0 the
	// spec's UserData, n its UserDataVariants[n-1] (LaunchSpec.UserDataOf).
	UserDataVariant int `json:"userDataVariant,omitempty"`
	// Exotic: the type is a metal size or has GPUs or accelerators
	// (catalog.InstanceType.Exotic); a launch offers it only when no other
	// candidate is left, unless the spec's MinValues is set (Karpenter's
	// exotic instance filter). Records without it offer every candidate.
	Exotic bool `json:"exotic,omitempty"`
}

// Key is the candidate's offering.
func (c Candidate) Key() OfferingKey {
	return OfferingKey{InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType}
}

// OfferingKey names an offering.
type OfferingKey struct {
	InstanceType string
	Zone         string
	CapacityType string
}

func (k OfferingKey) String() string {
	return k.CapacityType + ":" + k.InstanceType + ":" + k.Zone
}

// Instance is an EC2 instance as Joiner tracks it.
type Instance struct {
	ID           string
	InstanceType string
	Zone         string
	CapacityType string
	ImageID      string
	SubnetID     string
	// SecurityGroupIDs are the security groups of its primary interface.
	SecurityGroupIDs []string
	// State is EC2's state name: pending, running, shutting-down,
	// terminated, stopping, stopped.
	State      string
	LaunchTime time.Time
	Tags       map[string]string
	// ReservationID and ReservationType (default or capacity-block) are
	// the capacity reservation of a reserved instance ("" otherwise).
	ReservationID   string
	ReservationType string
}

// ProviderID is the Node's spec.providerID for the instance.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

// Gone reports whether the instance is terminated or terminating.
func (i Instance) Gone() bool { return i.State == "terminated" || i.State == "shutting-down" }

// LaunchID is the launch intent the instance was launched for ("" when it
// is not Joiner's).
func (i Instance) LaunchID() string { return i.Tags[karpv1.TagLaunchID] }

// Attempt is the launch attempt the instance was launched by (0 when the
// tag is absent or malformed).
func (i Instance) Attempt() int {
	n, _ := strconv.Atoi(i.Tags[karpv1.TagAttempt])
	return n
}

// PriceFrom is the hourly price of the candidate the instance was launched
// from (0 when none matches).
func (i Instance) PriceFrom(cands []Candidate) float64 {
	for _, c := range cands {
		if c.InstanceType == i.InstanceType && c.Zone == i.Zone && c.CapacityType == i.CapacityType {
			return c.Price
		}
	}
	return 0
}

// InstanceID is the instance ID at the end of a provider ID
// (aws:///<zone>/<id>), or "" for an empty or non-AWS provider ID.
func InstanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	return providerID[strings.LastIndex(providerID, "/")+1:]
}
