// Package fake is a hand-written in-memory cloud for launcher tests. It
// honours ClientToken semantics (the same token and request return the same
// instance; the same token with another request is a parameter mismatch),
// tags instances as cloud/aws does, and can inject launch errors and list
// lag (eventual consistency).
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/launcher"
)

// Cloud is the fake. The zero value is not usable; call New.
type Cloud struct {
	mu        sync.Mutex
	now       func() time.Time
	cluster   string
	tokens    map[string]tokenEntry
	instances map[string]cloud.Instance
	seq       int

	// ListLag hides instances younger than this from List.
	ListLag time.Duration
	// LaunchErrors are returned by the next Launch calls, in order, before
	// anything is created (nil entries let a call through).
	LaunchErrors []error

	// LaunchCalls counts Launch calls; Created counts instances created.
	LaunchCalls int
	Created     int
	// OnLaunch, if set, runs (outside the lock) after every Launch call.
	OnLaunch func(req cloud.LaunchRequest, inst cloud.Instance, err error)
}

type tokenEntry struct {
	request    string
	instanceID string
}

// New returns an empty fake cloud of cluster using now as its clock
// (time.Now if nil).
func New(cluster string, now func() time.Time) *Cloud {
	if now == nil {
		now = time.Now
	}
	return &Cloud{now: now, cluster: cluster, tokens: map[string]tokenEntry{}, instances: map[string]cloud.Instance{}}
}

var _ launcher.Cloud = (*Cloud)(nil)

// Launch implements launcher.Cloud.
func (c *Cloud) Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error) {
	inst, err := c.launch(ctx, req)
	if c.OnLaunch != nil {
		c.OnLaunch(req, inst, err)
	}
	return inst, err
}

func (c *Cloud) launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return cloud.Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.LaunchCalls++
	if len(c.LaunchErrors) > 0 {
		err := c.LaunchErrors[0]
		c.LaunchErrors = c.LaunchErrors[1:]
		if err != nil {
			return cloud.Instance{}, err
		}
	}
	if req.LaunchID == "" || req.Attempt < 1 {
		return cloud.Instance{}, fmt.Errorf("launch ID %q attempt %d: %w", req.LaunchID, req.Attempt, cloud.ErrInvalidSpec)
	}
	if len(req.Spec.Candidates) == 0 {
		return cloud.Instance{}, fmt.Errorf("no candidates: %w", cloud.ErrInvalidSpec)
	}
	token := cloud.ClientToken(c.cluster, req.LaunchID, req.Attempt)
	body, _ := json.Marshal(req)
	if e, ok := c.tokens[token]; ok {
		if e.request != string(body) {
			return cloud.Instance{}, fmt.Errorf("token %s: %w", token, cloud.ErrIdempotentMismatch)
		}
		inst := c.instances[e.instanceID]
		if inst.State == "terminated" {
			return cloud.Instance{}, fmt.Errorf("%s: %w", inst.ID, cloud.ErrTokenInstanceTerminated)
		}
		return clone(inst), nil
	}
	c.seq++
	cand := req.Spec.Candidates[0]
	tags := maps.Clone(req.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[karpv1.TagClusterPrefix+c.cluster] = "owned"
	tags[karpv1.TagEKSClusterName] = c.cluster
	tags[karpv1.TagNodePool] = req.Spec.NodePool
	tags[karpv1.TagNodeClass] = req.Spec.NodeClass
	tags[karpv1.TagName] = req.Spec.NodeClaim
	tags[karpv1.TagNodeClaim] = req.Spec.NodeClaim
	tags[karpv1.TagLaunchID] = req.LaunchID
	tags[karpv1.TagAttempt] = strconv.Itoa(req.Attempt)
	inst := cloud.Instance{
		ID:           fmt.Sprintf("i-%08x", c.seq),
		InstanceType: cand.InstanceType,
		Zone:         cand.Zone,
		CapacityType: cand.CapacityType,
		State:        "running",
		LaunchTime:   c.now(),
		Tags:         tags,
	}
	c.instances[inst.ID] = inst
	c.tokens[token] = tokenEntry{request: string(body), instanceID: inst.ID}
	c.Created++
	return clone(inst), nil
}

// Put adds an instance as if something else had launched it (a stray or
// an instance of a previous leader).
func (c *Cloud) Put(inst cloud.Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.instances[inst.ID] = clone(inst)
}

// List implements launcher.Cloud (terminated instances are listed, as EC2
// does for a while).
func (c *Cloud) List(ctx context.Context, tags map[string]string) ([]cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []cloud.Instance
	for _, inst := range c.instances {
		if !hasTags(inst, tags) || now.Sub(inst.LaunchTime) < c.ListLag {
			continue
		}
		out = append(out, clone(inst))
	}
	slices.SortFunc(out, func(a, b cloud.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func hasTags(inst cloud.Instance, tags map[string]string) bool {
	for k, v := range tags {
		if inst.Tags[k] != v {
			return false
		}
	}
	return true
}

// Terminate implements launcher.Cloud.
func (c *Cloud) Terminate(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[id]
	if !ok {
		return fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
	}
	inst.State = "terminated"
	c.instances[id] = inst
	return nil
}

// Instances returns every instance, terminated ones included, sorted by ID.
func (c *Cloud) Instances() []cloud.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]cloud.Instance, 0, len(c.instances))
	for _, inst := range c.instances {
		out = append(out, clone(inst))
	}
	slices.SortFunc(out, func(a, b cloud.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func clone(i cloud.Instance) cloud.Instance {
	i.Tags = maps.Clone(i.Tags)
	return i
}
