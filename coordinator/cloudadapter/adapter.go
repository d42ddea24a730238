// Package cloudadapter is the launcher's Cloud on top of a cloud.Provider:
// it turns a frozen fsm.LaunchSpec plus the launcher's token and tags into
// one cloud.LaunchSpec (every candidate in one multi-type request), and
// maps the provider's errors onto the launcher's error classes.
//
// Everything the adapter sends is taken from the frozen spec, the token and
// the tags, never from live state (NodeClass, caches, clock), so a new
// leader retrying the same token sends the same request.
package cloudadapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/launcher"
)

// Adapter implements launcher.Cloud with a cloud.Provider.
type Adapter struct {
	cluster  string
	provider cloud.Provider
}

var _ launcher.Cloud = (*Adapter)(nil)

// New returns an Adapter launching into cluster (the provider's cluster).
func New(cluster string, provider cloud.Provider) *Adapter {
	return &Adapter{cluster: cluster, provider: provider}
}

// Launch implements launcher.Cloud.
func (a *Adapter) Launch(ctx context.Context, req launcher.LaunchRequest) (launcher.Instance, error) {
	spec, err := a.Spec(req)
	if err != nil {
		return launcher.Instance{}, err
	}
	inst, err := a.provider.Launch(ctx, spec)
	if err == nil {
		return toLauncher(inst, req.Spec.Candidates), nil
	}
	if errors.Is(err, cloud.ErrIdempotentMismatch) {
		// The token was used with other parameters (a spec that was not
		// frozen). Adopt the attempt's instance if it exists; otherwise the
		// token is spent and only a new attempt (new token) can launch.
		insts, lerr := a.ListByTag(ctx, launcher.TagLaunchID, spec.LaunchID)
		if lerr != nil {
			return launcher.Instance{}, fmt.Errorf("%w; listing instances of launch %s: %w", err, spec.LaunchID, lerr)
		}
		for _, in := range insts {
			if !in.Gone() && in.Attempt() == spec.Attempt {
				return in, nil
			}
		}
		return launcher.Instance{}, fmt.Errorf("%w; no instance of attempt %d, a new attempt is needed: %w",
			err, spec.Attempt, launcher.ErrTokenInstanceTerminated)
	}
	return launcher.Instance{}, classify(err)
}

// classify maps a provider error onto the launcher's classes: capacity and
// terminated-token errors start a new attempt, invalid specs fail the
// intent, anything else (throttling, 5xx, network) leaves the outcome
// unknown so the launcher retries the same token.
func classify(err error) error {
	switch {
	case errors.Is(err, cloud.ErrInsufficientCapacity):
		return fmt.Errorf("%w: %w", launcher.ErrInsufficientCapacity, err)
	case errors.Is(err, cloud.ErrTokenInstanceTerminated):
		return fmt.Errorf("%w: %w", launcher.ErrTokenInstanceTerminated, err)
	case errors.Is(err, cloud.ErrInvalidSpec):
		return fmt.Errorf("%w: %w", launcher.ErrInvalidLaunch, err)
	}
	return err
}

// Spec is the cloud.LaunchSpec for req: the frozen spec's fields, the
// launch ID and attempt from the launcher's tags, and its token. It fails
// with launcher.ErrInvalidLaunch when the tags lack the launch ID or attempt.
func (a *Adapter) Spec(req launcher.LaunchRequest) (cloud.LaunchSpec, error) {
	id := req.Tags[launcher.TagLaunchID]
	attempt, err := strconv.Atoi(req.Tags[launcher.TagAttempt])
	if id == "" || err != nil || attempt < 1 {
		return cloud.LaunchSpec{}, fmt.Errorf("tags[%q]=%q, tags[%q]=%q: want a launch ID and an attempt >= 1: %w",
			launcher.TagLaunchID, id, launcher.TagAttempt, req.Tags[launcher.TagAttempt], launcher.ErrInvalidLaunch)
	}
	s := req.Spec
	cands := make([]cloud.Candidate, len(s.Candidates))
	for i, c := range s.Candidates {
		cands[i] = cloud.Candidate{InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType, Price: c.Price, ImageID: c.ImageID}
	}
	return cloud.LaunchSpec{
		Cluster: a.cluster, NodeClaim: s.NodeClaim, NodePool: s.NodePool, NodeClass: s.NodeClass,
		LaunchID: id, Attempt: attempt, ClientToken: req.ClientToken, Candidates: cands,
		Subnets: maps.Clone(s.Subnets), SecurityGroupIDs: s.SecurityGroupIDs, UserData: s.UserData,
		BlockDevices: s.BlockDevices, MetadataOptions: s.MetadataOptions, InstanceProfile: s.InstanceProfile,
		DetailedMonitoring: s.DetailedMonitoring, Tags: maps.Clone(s.Tags),
	}, nil
}

// ListByTag implements launcher.Cloud: the cluster's live instances with
// tag key=value (terminated ones are left out by the provider).
func (a *Adapter) ListByTag(ctx context.Context, key, value string) ([]launcher.Instance, error) {
	insts, err := a.provider.List(ctx, map[string]string{key: value})
	if err != nil {
		return nil, fmt.Errorf("listing instances with tag %s=%s: %w", key, value, err)
	}
	out := make([]launcher.Instance, len(insts))
	for i, in := range insts {
		out[i] = toLauncher(in, nil)
	}
	return out, nil
}

// Terminate implements launcher.Cloud; the provider treats terminated and
// unknown instances as done.
func (a *Adapter) Terminate(ctx context.Context, instanceID string) error {
	if err := a.provider.Terminate(ctx, instanceID); err != nil {
		return fmt.Errorf("terminating instance %s: %w", instanceID, err)
	}
	return nil
}

// toLauncher converts an instance, pricing it from the candidate it was
// launched from (0 when cands has none).
func toLauncher(in cloud.Instance, cands []fsm.Candidate) launcher.Instance {
	out := launcher.Instance{
		ID: in.ID, InstanceType: in.InstanceType, Zone: in.Zone, CapacityType: in.CapacityType,
		State: in.State, LaunchTime: in.LaunchTime, Tags: maps.Clone(in.Tags),
	}
	for _, c := range cands {
		if c.InstanceType == in.InstanceType && c.Zone == in.Zone && c.CapacityType == in.CapacityType {
			out.Price = c.Price
			break
		}
	}
	return out
}
