// Package launcher runs the fenced launch protocol on the raft leader:
//
//	PlanCommit (provisioner) -> LaunchAttemptStart{n} commit -> cloud Launch
//	with ClientToken <cluster>-<intent>-<n> and the launch-id/attempt tags in
//	the same call -> LaunchResult commit.
//
// A new leader adopts launching intents by tag, or retries them with the
// same token, so a failover never launches an intent twice; orphan GC
// terminates tagged instances that no live intent wants.
package launcher

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Tag keys the launcher writes at launch and reads back on adoption and GC.
// They match the cloud package's tags.
const (
	TagLaunchID      = "joiner.io/launch-id"
	TagAttempt       = "joiner.io/attempt"
	TagClusterPrefix = "kubernetes.io/cluster/"
)

// Cloud is what the launcher needs from the cloud provider.
type Cloud interface {
	// Launch creates one instance from req. The same ClientToken with the
	// same request must return the same instance, never a second one. The
	// tags are applied in the same call.
	Launch(ctx context.Context, req LaunchRequest) (Instance, error)
	// ListByTag returns the instances (any state but gone) carrying tag
	// key=value.
	ListByTag(ctx context.Context, key, value string) ([]Instance, error)
	// Terminate terminates an instance; terminating a terminated instance
	// succeeds.
	Terminate(ctx context.Context, instanceID string) error
}

// LaunchRequest is one launch call.
type LaunchRequest struct {
	ClientToken string
	Spec        fsm.LaunchSpec
	Tags        map[string]string
}

// Instance is a cloud instance as the launcher sees it.
type Instance struct {
	ID           string
	InstanceType string
	Zone         string
	CapacityType string
	Price        float64
	// State is pending, running, shutting-down or terminated.
	State      string
	LaunchTime time.Time
	Tags       map[string]string
}

// Gone reports whether the instance is terminated or terminating.
func (i Instance) Gone() bool { return i.State == "terminated" || i.State == "shutting-down" }

// Attempt is the instance's attempt tag (0 when absent or malformed).
func (i Instance) Attempt() int {
	n, _ := strconv.Atoi(i.Tags[TagAttempt])
	return n
}

// Errors a Cloud returns when the outcome of a launch is known. Any other
// error leaves the outcome unknown: the launcher retries the same token.
var (
	// ErrInsufficientCapacity: no instance was created; a new attempt (new
	// token) may succeed later.
	ErrInsufficientCapacity = errors.New("insufficient capacity")
	// ErrInvalidLaunch: the request can never succeed (bad image, bad
	// parameters). The intent fails.
	ErrInvalidLaunch = errors.New("invalid launch request")
	// ErrTokenInstanceTerminated: the token's instance exists but was
	// terminated (EC2's IdempotentInstanceTerminated); start a new attempt.
	ErrTokenInstanceTerminated = errors.New("instance for client token terminated")
)

// ClientToken is the idempotency token of attempt n of an intent, at most 64
// ASCII characters (EC2's limit): the cluster name is shortened if needed.
func ClientToken(cluster, intentID string, attempt int) string {
	suffix := "-" + intentID + "-" + strconv.Itoa(attempt)
	if max := 64 - len(suffix); len(cluster) > max {
		if max < 0 {
			max = 0
		}
		cluster = cluster[:max]
	}
	return cluster + suffix
}
