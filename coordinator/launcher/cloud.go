// Package launcher runs the fenced launch protocol on the raft leader:
//
//	PlanCommit (provisioner) -> LaunchAttemptStart{n} commit -> cloud Launch
//	with ClientToken <cluster>-<intent>-<n> and the launch-id/attempt tags in
//	the same call -> LaunchResult commit.
//
// A new leader adopts launching intents by tag, or retries them with the
// same token, so a failover never launches an intent twice; orphan GC
// terminates tagged instances that no live intent wants, and, as
// Karpenter's instance garbage collection does, those of launched intents
// and Karpenter's own that no NodeClaim backs (Launcher.CollectOrphans).
package launcher

import (
	"context"

	"github.com/joiner-dev/joiner/cloud"
)

// Cloud is the part of cloud.Provider the launcher uses.
type Cloud interface {
	Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error)
	List(ctx context.Context, tags map[string]string) ([]cloud.Instance, error)
	Terminate(ctx context.Context, id string) error
}
