package cloud

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on (with errors.Is).
var (
	// ErrInsufficientCapacity: no candidate offering had capacity; a new
	// attempt (new token) may succeed later.
	ErrInsufficientCapacity = errors.New("insufficient capacity")
	// ErrNotFound: the instance (or resource) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidSpec: the launch spec or NodeClass is wrong; retrying the
	// same input fails the same way.
	ErrInvalidSpec = errors.New("invalid launch spec")
	// ErrRejected: the cloud refused the request outright (a client error
	// such as UnauthorizedOperation or InvalidParameterValue): nothing was
	// made, and the same request fails the same way until its cause (a
	// permission, a parameter) is fixed.
	ErrRejected = errors.New("request rejected")
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
	// ErrClusterUnknown: what new nodes need to join the cluster (endpoint,
	// CA, service CIDR, Kubernetes version) is neither discovered nor
	// given; nothing launches until it is.
	ErrClusterUnknown = errors.New("cluster facts unknown")
)

// Errors of NodeClass resolution; they become status conditions.
var (
	ErrNoSubnets        = errors.New("no subnet matches subnetSelectorTerms")
	ErrNoSecurityGroups = errors.New("no security group matches securityGroupSelectorTerms")
	ErrNoAMIs           = errors.New("no AMI matches amiSelectorTerms")
	ErrUnknownAlias     = errors.New("unknown AMI alias")
	// ErrUnsupportedAlias: AWS publishes no images of the alias's family
	// for the cluster's Kubernetes version (AL2 on 1.33+, Windows Server
	// 2025 before 1.35); Karpenter's AMIsReady reason UnsupportedAlias.
	ErrUnsupportedAlias = errors.New("AMI alias not supported for this Kubernetes version")
	ErrNoRole           = errors.New("neither role nor instanceProfile is set")
	// ErrNoPlacementGroup: no available placement group has the
	// placementGroupSelector's name or id.
	ErrNoPlacementGroup = errors.New("no available placement group matches placementGroupSelector")
)

// StatusError is a resolution answer (the alias is not supported, say)
// whose EC2NodeClass condition message is Message, Karpenter's words,
// while Error keeps the detail for logs and Events.
type StatusError struct {
	Message string
	Err     error
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns the detailed error.
func (e *StatusError) Unwrap() error { return e.Err }

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
	case errors.Is(err, ErrInvalidSpec), errors.Is(err, ErrNotFound), errors.Is(err, ErrRejected):
		return false
	case errors.Is(err, ErrInsufficientCapacity), errors.Is(err, ErrRetryable):
		return true
	}
	return false
}

// ResolveError collects what failed to resolve, per part.
type ResolveError struct {
	Subnets, SecurityGroups, AMIs, InstanceProfile error
	// PlacementGroup: the placementGroupSelector matched no available
	// placement group, or it could not be described.
	PlacementGroup error
	// CapacityReservations: the capacityReservationSelectorTerms could not
	// be described (no match is not an error: the class simply has no
	// reserved offerings, as in Karpenter).
	CapacityReservations error
}

func (e *ResolveError) parts() []error {
	var out []error
	for _, err := range []error{e.Subnets, e.SecurityGroups, e.AMIs, e.InstanceProfile, e.PlacementGroup, e.CapacityReservations} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

func (e *ResolveError) Error() string {
	var msgs []string
	for _, err := range e.parts() {
		msgs = append(msgs, err.Error())
	}
	return "resolving EC2NodeClass: " + strings.Join(msgs, "; ")
}

// Unwrap returns the part errors.
func (e *ResolveError) Unwrap() []error { return e.parts() }
