package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/joiner-dev/joiner/cloud"
)

// capacityCodes are the fleet error codes that mean "no capacity for this
// offering" (Karpenter's unfulfillable-capacity list).
var capacityCodes = []string{
	"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "UnfulfillableCapacity",
	"Unsupported", "InsufficientFreeAddressesInSubnet", "MaxFleetCountExceeded", "ReservationCapacityExceeded",
}

func isCapacityCode(code string) bool { return slices.Contains(capacityCodes, code) }

var retryableCodes = []string{
	"RequestLimitExceeded", "Throttling", "ThrottlingException", "InternalError", "InternalFailure",
	"ServiceUnavailable", "Unavailable", "RequestTimeout",
}

const codeNoFreeAddresses = "InsufficientFreeAddressesInSubnet"

// codeSpotServiceLinkedRole: EC2 could not create the spot service-linked
// role for a spot launch (Karpenter counts it as a capacity error of every
// spot offering).
const codeSpotServiceLinkedRole = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

const codeLaunchTemplateNotFound = "InvalidLaunchTemplateName.NotFoundException"

// codeInstanceIDMalformed: the ID cannot be an instance's (EC2 checks the
// form before looking it up), so no such instance exists.
const codeInstanceIDMalformed = "InvalidInstanceID.Malformed"

// isInstanceProfileNotFound reports whether a fleet error is EC2 not
// knowing the launch template's instance profile (Karpenter's
// IsInstanceProfileNotFound): it does not exist, or IAM has not yet
// propagated it to EC2, which takes seconds after it is created.
func isInstanceProfileNotFound(code, message string) bool {
	return code == "InvalidParameterValue" && strings.Contains(message, "Invalid IAM Instance Profile name")
}

// isUserDataTooLarge reports whether err is EC2 refusing user data over
// its limit (Karpenter's IsUserDataTooLarge).
func isUserDataTooLarge(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidUserData.Malformed" && strings.Contains(ae.ErrorMessage(), "User data is limited to")
}

// codeTagLimitExceeded: a resource was given more than maxTags tags.
const codeTagLimitExceeded = "TagLimitExceeded"

// maxTags is EC2's limit of tags on one resource.
const maxTags = 50

// maxUserData is EC2's limit of a launch's user data, in bytes before
// base64 encoding.
const maxUserData = 16384

// classify wraps err with the sentinel callers branch on: ErrNotFound for
// *.NotFound codes and malformed instance IDs (an instance that cannot
// exist is as gone as one that does not), ErrRetryable for throttling,
// server and network errors, ErrInsufficientCapacity for capacity codes,
// ErrInvalidSpec for too many tags; other API errors stay not retryable.
func classify(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("%w: %w", cloud.ErrRetryable, err)
	}
	code := ae.ErrorCode()
	switch {
	case strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, "NotFoundException") || code == "ParameterNotFound" ||
		code == "NoSuchEntity" || code == codeInstanceIDMalformed:
		return fmt.Errorf("%w: %w", cloud.ErrNotFound, err)
	case slices.Contains(retryableCodes, code) || ae.ErrorFault() == smithy.FaultServer:
		return fmt.Errorf("%w: %w", cloud.ErrRetryable, err)
	case code == "IdempotentInstanceTerminated":
		return fmt.Errorf("%w: %w", cloud.ErrTokenInstanceTerminated, err)
	case code == "IdempotentParameterMismatch":
		return fmt.Errorf("%w: %w", cloud.ErrIdempotentMismatch, err)
	case isCapacityCode(code):
		return fmt.Errorf("%w: %w", cloud.ErrInsufficientCapacity, err)
	case code == codeTagLimitExceeded:
		// More tags than EC2 takes on a resource (50): the class's tags
		// plus Karpenter's and Joiner's fail the same way every time.
		return fmt.Errorf("%w: more than %d tags on a resource (the class's spec.tags and the ones Joiner adds): %w", cloud.ErrInvalidSpec, maxTags, err)
	case clientFault(err, ae):
		return fmt.Errorf("%w: %w", cloud.ErrRejected, err)
	}
	return err
}

// clientFault reports whether an API error is the caller's: HTTP 4xx but
// timeouts and throttling (EC2's query protocol leaves the error's fault
// unknown; its status says it), or a fault the SDK marked as the client's.
func clientFault(err error, ae smithy.APIError) bool {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
	}
	return ae.ErrorFault() == smithy.FaultClient
}

// unavailableOfferings remembers offerings that failed with a capacity
// error until their TTL passes; marking again extends the TTL.
type unavailableOfferings struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[cloud.OfferingKey]time.Time
}

func (u *unavailableOfferings) mark(k cloud.OfferingKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[k] = u.now().Add(u.ttl)
}

// markCapacityType makes every offering of a capacity type unavailable for
// the TTL.
func (u *unavailableOfferings) markCapacityType(capacityType string) {
	u.mark(cloud.OfferingKey{CapacityType: capacityType})
}

// unavailable reports whether the offering, or its whole capacity type,
// is in the cache.
func (u *unavailableOfferings) unavailable(k cloud.OfferingKey) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.live(k) || u.live(cloud.OfferingKey{CapacityType: k.CapacityType})
}

// live reports whether k is in the cache and not expired (u.mu held).
func (u *unavailableOfferings) live(k cloud.OfferingKey) bool {
	exp, ok := u.m[k]
	if !ok {
		return false
	}
	if !u.now().Before(exp) {
		delete(u.m, k)
		return false
	}
	return true
}

// unavailableSubnets remembers subnets that ran out of addresses until
// their TTL passes.
type unavailableSubnets struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]time.Time
}

func (u *unavailableSubnets) mark(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[id] = u.now().Add(u.ttl)
}

func (u *unavailableSubnets) unavailable(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	exp, ok := u.m[id]
	if ok && !u.now().Before(exp) {
		delete(u.m, id)
		return false
	}
	return ok
}
