// Package cloud defines what the coordinator needs from a cloud: launch an
// instance for a NodeClaim from a frozen launch spec, find instances by
// Joiner's tags, terminate them, and list instance types with offerings and
// prices for an EC2NodeClass. cloud/aws implements it on aws-sdk-go-v2;
// cloud/sim is a simulated EC2 region that the AWS provider can talk to.
package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Provider is the cloud as the coordinator's launcher, lifecycle and GC
// loops use it.
type Provider interface {
	// Launch starts one instance for spec. Calling it again with the same
	// spec (same ClientToken) returns the same instance, never a second one.
	// Errors: *InsufficientCapacityError (errors.Is ErrInsufficientCapacity)
	// when no candidate offering had capacity; otherwise see IsRetryable.
	Launch(ctx context.Context, spec LaunchSpec) (Instance, error)
	// Get returns one instance; ErrNotFound when EC2 does not know it.
	Get(ctx context.Context, id string) (Instance, error)
	// List returns the cluster's instances (tagged kubernetes.io/cluster/<c>)
	// that carry every tag in tags; terminated instances are left out.
	List(ctx context.Context, tags map[string]string) ([]Instance, error)
	// Terminate terminates an instance; terminating a terminated or unknown
	// instance is not an error.
	Terminate(ctx context.Context, id string) error
	// InstanceTypes returns the instance types a NodeClass can launch with
	// their offerings and current prices; offerings that recently failed
	// with a capacity error have Available=false.
	InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error)
	// DriftHash is a hash of the NodeClass inputs that shape an instance.
	DriftHash(nc *awsv1.EC2NodeClass) string
}

// Joiner's instance tags.
const (
	TagName          = "Name"
	TagNodePool      = "karpenter.sh/nodepool"
	TagNodeClaim     = "karpenter.sh/nodeclaim"
	TagNodeClass     = "karpenter.k8s.aws/ec2nodeclass"
	TagClusterPrefix = "kubernetes.io/cluster/"
	TagLaunchID      = "joiner.io/launch-id"
	TagAttempt       = "joiner.io/attempt"
)

// restrictedTagPrefixes are the key prefixes user tags may not set.
var restrictedTagPrefixes = []string{"karpenter.sh/", "karpenter.k8s.aws/", "kubernetes.io/cluster/", "joiner.io/"}

// ValidateUserTags rejects user tags whose keys Joiner owns.
func ValidateUserTags(tags map[string]string) error {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("tags[%q]: empty key: %w", k, ErrInvalidSpec)
		}
		for _, p := range restrictedTagPrefixes {
			if strings.HasPrefix(k, p) {
				return fmt.Errorf("tags[%q]: keys with prefix %q are set by Joiner and may not be overridden: %w", k, p, ErrInvalidSpec)
			}
		}
	}
	return nil
}

// LaunchSpec is everything a launch needs, resolved and frozen when the
// launch intent is committed: retrying it with the same ClientToken must
// send EC2 the same request.
type LaunchSpec struct {
	Cluster   string
	NodeClaim string
	NodePool  string
	NodeClass string
	// LaunchID identifies the launch intent; Attempt counts its attempts.
	LaunchID string
	Attempt  int
	// ClientToken is EC2's idempotency token (<= 64 ASCII characters),
	// conventionally <cluster>-<intent>-<attempt>.
	ClientToken string
	// Candidates are the offerings to choose from; the provider drops those
	// it knows to be out of capacity and keeps the 60 cheapest.
	Candidates []Candidate
	// Subnets maps a zone to the subnet to launch into there.
	Subnets map[string]string
	// SecurityGroupIDs of the instance.
	SecurityGroupIDs []string
	// UserData is the rendered user data (not base64-encoded).
	UserData        []byte
	BlockDevices    []*awsv1.BlockDeviceMapping
	MetadataOptions *awsv1.MetadataOptions
	// InstanceProfile is the IAM instance profile name ("" for none).
	InstanceProfile    string
	DetailedMonitoring bool
	// Tags are the NodeClass's tags; Joiner's own keys are rejected.
	Tags map[string]string
}

// Candidate is one (instance type, zone, capacity type) offering with the
// image to boot.
type Candidate struct {
	InstanceType string
	Zone         string
	CapacityType string // "spot" or "on-demand"
	Price        float64
	ImageID      string
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
	// State is EC2's state name: pending, running, shutting-down,
	// terminated, stopping, stopped.
	State      string
	LaunchTime time.Time
	Tags       map[string]string
}

// ProviderID is the Node's spec.providerID for the instance.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

// Sentinel errors callers branch on.
var (
	// ErrInsufficientCapacity: no candidate offering had capacity.
	ErrInsufficientCapacity = errors.New("insufficient capacity")
	// ErrNotFound: the instance (or resource) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidSpec: the launch spec or NodeClass is wrong; retrying the
	// same input fails the same way.
	ErrInvalidSpec = errors.New("invalid launch spec")
	// ErrRetryable marks transient failures (throttling, 5xx, network).
	ErrRetryable = errors.New("retryable cloud error")
	// ErrTokenInstanceTerminated: the client token's instance exists but
	// was terminated (EC2's IdempotentInstanceTerminated); a new attempt
	// with a new token is needed.
	ErrTokenInstanceTerminated = errors.New("instance for client token terminated")
	// ErrIdempotentMismatch: the client token was used with other
	// parameters (EC2's IdempotentParameterMismatch), a bug: the spec was
	// not frozen. Look the instance up by tag instead.
	ErrIdempotentMismatch = errors.New("client token used with different parameters")
)

// InsufficientCapacityError lists the offerings that failed with a capacity
// error in one launch.
type InsufficientCapacityError struct {
	Offerings []OfferingKey
}

func (e *InsufficientCapacityError) Error() string {
	keys := make([]string, len(e.Offerings))
	for i, k := range e.Offerings {
		keys[i] = k.String()
	}
	return fmt.Sprintf("insufficient capacity for %d offerings [%s]", len(keys), strings.Join(keys, ", "))
}

// Is makes errors.Is(err, ErrInsufficientCapacity) true.
func (e *InsufficientCapacityError) Is(target error) bool { return target == ErrInsufficientCapacity }

// IsRetryable reports whether retrying the same call may succeed:
// insufficient capacity (with fewer offerings) and transient errors are,
// invalid specs and unknown instances are not.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInvalidSpec), errors.Is(err, ErrNotFound):
		return false
	case errors.Is(err, ErrInsufficientCapacity), errors.Is(err, ErrRetryable):
		return true
	}
	return false
}

// DriftHash hashes the EC2NodeClass spec (JSON, map keys sorted), the
// inputs that shape an instance; a NodeClaim launched under another hash has
// drifted.
func DriftHash(nc *awsv1.EC2NodeClass) string {
	b, err := json.Marshal(nc.Spec)
	if err != nil { // a spec of plain data always marshals
		panic(fmt.Sprintf("marshalling EC2NodeClass spec: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
