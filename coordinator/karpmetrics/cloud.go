package karpmetrics

import (
	"context"
	"errors"
	"time"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

type controllerKey struct{}

// WithController names the controller (leader loop) ctx belongs to; the
// cloud provider metrics label calls with it, as Karpenter's do.
func WithController(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, controllerKey{}, name)
}

// Controller is the name WithController put in ctx, "" when none.
func Controller(ctx context.Context) string {
	s, _ := ctx.Value(controllerKey{}).(string)
	return s
}

// Cloud is a cloud.Provider whose calls are timed and whose errors are
// counted in karpenter_cloudprovider_duration_seconds and
// karpenter_cloudprovider_errors_total, under Karpenter's method names
// (Create, Get, List, Delete, GetInstanceTypes; Resolve is Joiner's own).
// Decorate once. Other interfaces of the provider are reached via Unwrap.
type Cloud struct {
	cloud.Provider
	m    *Metrics
	name string
}

// DecorateCloud returns p with its calls measured on m under the provider
// name (Karpenter's AWS provider says "aws").
func DecorateCloud(p cloud.Provider, m *Metrics, name string) *Cloud {
	return &Cloud{Provider: p, m: m, name: name}
}

// Unwrap returns the decorated provider.
func (c *Cloud) Unwrap() cloud.Provider { return c.Provider }

func (c *Cloud) measure(ctx context.Context, method string, start time.Time, err error) {
	if c.m == nil {
		return
	}
	ctl := Controller(ctx)
	c.m.cloudDuration.WithLabelValues(ctl, method, c.name).Observe(time.Since(start).Seconds())
	if err != nil {
		c.m.cloudErrors.WithLabelValues(ctl, method, c.name, errorLabel(err)).Inc()
	}
}

// errorLabel is Karpenter's error label value: its well-known error types,
// else "".
func errorLabel(err error) string {
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		return "NodeClaimNotFoundError"
	case errors.Is(err, cloud.ErrInsufficientCapacity):
		return "InsufficientCapacityError"
	}
	return ""
}

// Launch implements cloud.Provider (Karpenter's Create).
func (c *Cloud) Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error) {
	start := time.Now()
	in, err := c.Provider.Launch(ctx, req)
	c.measure(ctx, "Create", start, err)
	return in, err
}

// Get implements cloud.Provider.
func (c *Cloud) Get(ctx context.Context, id string) (cloud.Instance, error) {
	start := time.Now()
	in, err := c.Provider.Get(ctx, id)
	c.measure(ctx, "Get", start, err)
	return in, err
}

// List implements cloud.Provider.
func (c *Cloud) List(ctx context.Context, tags map[string]string) ([]cloud.Instance, error) {
	start := time.Now()
	out, err := c.Provider.List(ctx, tags)
	c.measure(ctx, "List", start, err)
	return out, err
}

// Terminate implements cloud.Provider (Karpenter's Delete).
func (c *Cloud) Terminate(ctx context.Context, id string) error {
	start := time.Now()
	err := c.Provider.Terminate(ctx, id)
	c.measure(ctx, "Delete", start, err)
	return err
}

// Resolve implements cloud.Provider.
func (c *Cloud) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (cloud.Resolved, error) {
	start := time.Now()
	r, err := c.Provider.Resolve(ctx, nc)
	c.measure(ctx, "Resolve", start, err)
	return r, err
}

// InstanceTypes implements cloud.Provider (Karpenter's GetInstanceTypes).
func (c *Cloud) InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	start := time.Now()
	out, err := c.Provider.InstanceTypes(ctx, nc)
	c.measure(ctx, "GetInstanceTypes", start, err)
	return out, err
}

// FinalizeNodeClass forwards to the provider's, when it has one (nothing
// to delete otherwise).
func (c *Cloud) FinalizeNodeClass(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	if f, ok := c.Provider.(interface {
		FinalizeNodeClass(ctx context.Context, nc *awsv1.EC2NodeClass) error
	}); ok {
		return f.FinalizeNodeClass(ctx, nc)
	}
	return nil
}

// ClusterInstanceProfiles forwards to the provider's, when it has one
// (none to collect otherwise).
func (c *Cloud) ClusterInstanceProfiles(ctx context.Context) ([]cloud.InstanceProfile, error) {
	if p, ok := c.Provider.(interface {
		ClusterInstanceProfiles(ctx context.Context) ([]cloud.InstanceProfile, error)
	}); ok {
		return p.ClusterInstanceProfiles(ctx)
	}
	return nil, nil
}

// DeleteInstanceProfile forwards to the provider's, when it has one.
func (c *Cloud) DeleteInstanceProfile(ctx context.Context, name string) error {
	if p, ok := c.Provider.(interface {
		DeleteInstanceProfile(ctx context.Context, name string) error
	}); ok {
		return p.DeleteInstanceProfile(ctx, name)
	}
	return nil
}

// MarkUnavailable forwards to the provider's offering cache, when it has
// one.
func (c *Cloud) MarkUnavailable(k cloud.OfferingKey, reason string) {
	if o, ok := c.Provider.(interface {
		MarkUnavailable(k cloud.OfferingKey, reason string)
	}); ok {
		o.MarkUnavailable(k, reason)
	}
}

// MarkReservationUnavailable forwards to the provider's capacity
// reservations, when it has them.
func (c *Cloud) MarkReservationUnavailable(id, reason string) {
	if o, ok := c.Provider.(interface {
		MarkReservationUnavailable(id, reason string)
	}); ok {
		o.MarkReservationUnavailable(id, reason)
	}
}
