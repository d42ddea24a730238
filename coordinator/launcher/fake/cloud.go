// Package fake is a hand-written in-memory Cloud for launcher tests. It
// honours ClientToken semantics (the same token and request return the same
// instance; the same token with another request is a parameter mismatch)
// and can inject launch errors and list lag (eventual consistency).
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/coordinator/launcher"
)

// ErrParameterMismatch is EC2's IdempotentParameterMismatch.
var ErrParameterMismatch = errors.New("idempotent parameter mismatch")

// Cloud is the fake. The zero value is not usable; call New.
type Cloud struct {
	mu        sync.Mutex
	now       func() time.Time
	tokens    map[string]tokenEntry
	instances map[string]launcher.Instance
	seq       int

	// ListLag hides instances younger than this from ListByTag.
	ListLag time.Duration
	// LaunchErrors are returned by the next Launch calls, in order, before
	// anything is created (nil entries let a call through).
	LaunchErrors []error

	// LaunchCalls counts Launch calls; Created counts instances created.
	LaunchCalls int
	Created     int
	// OnLaunch, if set, runs (outside the lock) after every Launch call.
	OnLaunch func(req launcher.LaunchRequest, inst launcher.Instance, err error)
}

type tokenEntry struct {
	request    string
	instanceID string
}

// New returns an empty fake cloud using now as its clock (time.Now if nil).
func New(now func() time.Time) *Cloud {
	if now == nil {
		now = time.Now
	}
	return &Cloud{now: now, tokens: map[string]tokenEntry{}, instances: map[string]launcher.Instance{}}
}

var _ launcher.Cloud = (*Cloud)(nil)

// Launch implements launcher.Cloud.
func (c *Cloud) Launch(ctx context.Context, req launcher.LaunchRequest) (launcher.Instance, error) {
	inst, err := c.launch(ctx, req)
	if c.OnLaunch != nil {
		c.OnLaunch(req, inst, err)
	}
	return inst, err
}

func (c *Cloud) launch(ctx context.Context, req launcher.LaunchRequest) (launcher.Instance, error) {
	if err := ctx.Err(); err != nil {
		return launcher.Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.LaunchCalls++
	if len(c.LaunchErrors) > 0 {
		err := c.LaunchErrors[0]
		c.LaunchErrors = c.LaunchErrors[1:]
		if err != nil {
			return launcher.Instance{}, err
		}
	}
	if req.ClientToken == "" || len(req.ClientToken) > 64 {
		return launcher.Instance{}, fmt.Errorf("%w: client token %q", launcher.ErrInvalidLaunch, req.ClientToken)
	}
	if len(req.Spec.Candidates) == 0 {
		return launcher.Instance{}, fmt.Errorf("%w: no candidates", launcher.ErrInvalidLaunch)
	}
	body, _ := json.Marshal(req)
	if e, ok := c.tokens[req.ClientToken]; ok {
		if e.request != string(body) {
			return launcher.Instance{}, fmt.Errorf("%w: token %s", ErrParameterMismatch, req.ClientToken)
		}
		inst := c.instances[e.instanceID]
		if inst.State == "terminated" {
			return launcher.Instance{}, fmt.Errorf("%w: %s", launcher.ErrTokenInstanceTerminated, inst.ID)
		}
		return clone(inst), nil
	}
	c.seq++
	cand := req.Spec.Candidates[0]
	inst := launcher.Instance{
		ID:           fmt.Sprintf("i-%08x", c.seq),
		InstanceType: cand.InstanceType,
		Zone:         cand.Zone,
		CapacityType: cand.CapacityType,
		Price:        cand.Price,
		State:        "running",
		LaunchTime:   c.now(),
		Tags:         maps.Clone(req.Tags),
	}
	c.instances[inst.ID] = inst
	c.tokens[req.ClientToken] = tokenEntry{request: string(body), instanceID: inst.ID}
	c.Created++
	return clone(inst), nil
}

// ListByTag implements launcher.Cloud (terminated instances are listed, as
// EC2 does for a while).
func (c *Cloud) ListByTag(ctx context.Context, key, value string) ([]launcher.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []launcher.Instance
	for _, inst := range c.instances {
		if inst.Tags[key] != value || now.Sub(inst.LaunchTime) < c.ListLag {
			continue
		}
		out = append(out, clone(inst))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
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
		return fmt.Errorf("instance %s not found", id)
	}
	inst.State = "terminated"
	c.instances[id] = inst
	return nil
}

// Instances returns every instance, terminated ones included, sorted by ID.
func (c *Cloud) Instances() []launcher.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]launcher.Instance, 0, len(c.instances))
	for _, inst := range c.instances {
		out = append(out, clone(inst))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func clone(i launcher.Instance) launcher.Instance {
	i.Tags = maps.Clone(i.Tags)
	return i
}
