// Package aws is Joiner's cloud.Provider on EC2 (aws-sdk-go-v2): selector
// resolution for EC2NodeClasses, launch templates named by a hash of their
// inputs, CreateFleet (type instant) launches with a ClientToken and tags in
// the same call, a 3-minute cache of offerings that failed with capacity
// errors, on-demand prices from the AWS Pricing API (the embedded snapshot
// of the region, else us-east-1's, until then) and spot prices from
// DescribeSpotPriceHistory (modelled until then).
package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/telemetry"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// EC2API is the part of EC2 the provider calls (*ec2.Client implements it).
// It lists exactly the calls made: packaging/iam_test.go checks that against
// the calls in this package and packaging/iam/controller-policy.json.
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// SSMAPI is the part of SSM the provider calls (AMI aliases and
// ssmParameter terms).
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Options configure a Provider.
type Options struct {
	EC2 EC2API
	SSM SSMAPI
	// IAM manages the instance profiles of classes that name a role (nil:
	// such classes are not ready).
	IAM IAMAPI
	// Cluster is the cluster name (tags kubernetes.io/cluster/<name>).
	Cluster string
	Region  string
	// KubernetesVersion selects the EKS AMI alias parameters ("1.32");
	// Discovery's version wins once known.
	KubernetesVersion string
	// Discovery (optional) keeps the cluster's facts: AMI aliases follow
	// its Kubernetes version (a cluster upgrade) and Run refreshes it every
	// DiscoveryRefresh (default 5 minutes, as Karpenter's version
	// controller).
	Discovery        *ClusterDiscovery
	DiscoveryRefresh time.Duration
	Logger           *zap.Logger
	// Now is the clock (default time.Now); the capacity-error cache and
	// the launch-template cache read it.
	Now func() time.Time
	// UnavailableTTL is how long an offering stays unavailable after a
	// capacity error (default 3 minutes).
	UnavailableTTL time.Duration
	// CacheTTL bounds selector-resolution and offering caches (default 5m).
	CacheTTL time.Duration
	// LaunchTemplateTTL: launch templates unused this long are deleted by
	// Run (default 1h).
	LaunchTemplateTTL time.Duration
	// SpotPriceRefresh is how often Run refreshes spot and on-demand prices
	// (default 12h, as Karpenter's pricing controller).
	SpotPriceRefresh time.Duration
	// Pricing (optional) is the AWS Price List API on-demand prices are
	// refreshed from; without it (or with IsolatedVPC, or in GovCloud) the
	// embedded prices of the region, else us-east-1's, stay.
	Pricing PricingAPI
	// IsolatedVPC is Karpenter's isolatedVPC: the Pricing API is not
	// reachable, so it is not called, and FinalizeNodeClass leaves a
	// class's instance profiles (IAM has no VPC endpoint).
	IsolatedVPC bool
	// Registerer (optional) takes the provider's metrics.
	Registerer prometheus.Registerer
	// NoReservedCapacity: Karpenter's ReservedCapacity feature gate is off,
	// so capacity reservations are neither resolved nor offered.
	NoReservedCapacity bool
}

// Provider implements cloud.Provider on EC2.
type Provider struct {
	ec2     EC2API
	ssm     SSMAPI
	iam     IAMAPI
	cluster string
	region  string
	k8sVer  string
	log     *zap.Logger
	now     func() time.Time
	opts    Options

	unavailable *unavailableOfferings
	noAddrs     *unavailableSubnets
	res         *reservationState

	mu        sync.Mutex
	resolved  map[string]cacheEntry // selector resolution cache
	offered   map[string][]string   // instance type -> zones offered
	typeInfo  map[string]typeInfo   // instance type -> DescribeInstanceTypes facts
	offeredAt time.Time
	spot      map[spotKey]float64
	templates map[string]*ltEntry // launch templates by name
	ltMu      sync.Mutex          // serialises launch-template creation

	prices *priceState // on-demand prices and where each capacity type's come from

	// userDataBytes is Karpenter's karpenter_ec2nodeclasses_userdata_bytes.
	userDataBytes *prometheus.GaugeVec
}

var _ cloud.Provider = (*Provider)(nil)

type cacheEntry struct {
	value   any
	expires time.Time
}

type spotKey struct{ instanceType, zone string }

// New returns a Provider.
func New(opts Options) (*Provider, error) {
	if opts.EC2 == nil {
		return nil, errors.New("aws provider: EC2 client is required")
	}
	if opts.Cluster == "" {
		return nil, errors.New("aws provider: cluster name is required")
	}
	if opts.Region == "" {
		opts.Region = catalog.PriceRegion
	}
	if opts.KubernetesVersion == "" && opts.Discovery == nil {
		opts.KubernetesVersion = "1.32"
	}
	if opts.DiscoveryRefresh == 0 {
		opts.DiscoveryRefresh = 5 * time.Minute
	}
	defaults.Zero(&opts.Logger, zap.NewNop())
	defaults.Clock(&opts.Now)
	if opts.UnavailableTTL == 0 {
		opts.UnavailableTTL = 3 * time.Minute
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 5 * time.Minute
	}
	if opts.LaunchTemplateTTL == 0 {
		opts.LaunchTemplateTTL = time.Hour
	}
	if opts.SpotPriceRefresh == 0 {
		opts.SpotPriceRefresh = 12 * time.Hour
	}
	prices, err := newPriceState(opts, opts.Logger.Named("aws"))
	if err != nil {
		return nil, err
	}
	userDataBytes := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_ec2nodeclasses_userdata_bytes",
		Help: "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass"}, []string{"nodeclass"})
	if err := telemetry.Register(opts.Registerer, "aws launch templates", userDataBytes); err != nil {
		return nil, err
	}
	return &Provider{
		ec2: opts.EC2, ssm: opts.SSM, iam: opts.IAM, cluster: opts.Cluster, region: opts.Region, k8sVer: opts.KubernetesVersion,
		log: opts.Logger.Named("aws"), now: opts.Now, opts: opts,
		unavailable: &unavailableOfferings{ttl: opts.UnavailableTTL, now: opts.Now, m: map[cloud.OfferingKey]time.Time{}},
		noAddrs:     &unavailableSubnets{ttl: opts.UnavailableTTL, now: opts.Now, m: map[string]time.Time{}},
		res:         newReservationState(),
		prices:      prices, userDataBytes: userDataBytes,
		resolved: map[string]cacheEntry{}, spot: map[spotKey]float64{}, templates: map[string]*ltEntry{},
	}, nil
}

// KubernetesVersion is the version AMI aliases resolve for: Discovery's
// (discovered or overridden) once known, else Options.KubernetesVersion.
// Safe for concurrent use.
func (p *Provider) KubernetesVersion() string {
	if d := p.opts.Discovery; d != nil {
		if v := d.KubernetesVersion(); v != "" {
			return v
		}
	}
	return p.k8sVer
}

// refreshDiscovery describes the cluster again (no Discovery: nothing).
func (p *Provider) refreshDiscovery(ctx context.Context) {
	if d := p.opts.Discovery; d != nil {
		if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("discovering the cluster (the last facts discovered stay)", zap.Error(err))
		}
	}
}

// Run adopts the cluster's existing launch templates, refreshes the cluster discovery (now and every
// DiscoveryRefresh) and on-demand and spot prices (now and every SpotPriceRefresh; refreshPrices) and deletes launch templates unused for
// LaunchTemplateTTL, until ctx ends.
func (p *Provider) Run(ctx context.Context) error {
	p.refreshDiscovery(ctx)
	if err := p.HydrateLaunchTemplates(ctx); err != nil {
		p.log.Warn("listing launch templates", zap.Error(err))
	}
	prices := time.NewTimer(p.refreshPrices(ctx))
	defer prices.Stop()
	gc := time.NewTicker(time.Minute)
	defer gc.Stop()
	discovery := time.NewTicker(p.opts.DiscoveryRefresh)
	defer discovery.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-discovery.C:
			p.refreshDiscovery(ctx)
		case <-prices.C:
			prices.Reset(p.refreshPrices(ctx))
		case <-gc.C:
			if _, err := p.DeleteUnusedLaunchTemplates(ctx); err != nil {
				p.log.Warn("deleting unused launch templates", zap.Error(err))
			}
		}
	}
}

// Get returns one instance; an ID EC2 finds malformed is ErrNotFound.
func (p *Provider) Get(ctx context.Context, id string) (cloud.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return cloud.Instance{}, fmt.Errorf("describing instance %s: %w", id, classify(err))
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) == id {
				return instanceFrom(in), nil
			}
		}
	}
	return cloud.Instance{}, fmt.Errorf("instance %s: %w", id, cloud.ErrNotFound)
}

// instancePageSize: DescribeInstances pages of 1000 (Karpenter's).
const instancePageSize = 1000

// List returns the cluster's live instances carrying every tag in tags.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]cloud.Instance, error) {
	filters := []ec2types.Filter{
		{Name: aws.String("tag:" + karpv1.TagClusterPrefix + p.cluster), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "shutting-down", "stopping", "stopped"}},
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []cloud.Instance
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(instancePageSize)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", classify(err))
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				out = append(out, instanceFrom(in))
			}
		}
	}
	return out, nil
}

// Terminate terminates an instance; unknown or terminated instances are
// not an error.
func (p *Provider) Terminate(ctx context.Context, id string) error {
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if cerr := classify(err); errors.Is(cerr, cloud.ErrNotFound) {
			return nil
		} else {
			return fmt.Errorf("terminating instance %s: %w", id, cerr)
		}
	}
	return nil
}

func instanceFrom(in ec2types.Instance) cloud.Instance {
	out := cloud.Instance{
		ID: aws.ToString(in.InstanceId), InstanceType: string(in.InstanceType), ImageID: aws.ToString(in.ImageId),
		SubnetID: aws.ToString(in.SubnetId), Tags: map[string]string{}, CapacityType: "on-demand",
	}
	if in.Placement != nil {
		out.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		out.State = string(in.State.Name)
	}
	if in.LaunchTime != nil {
		out.LaunchTime = *in.LaunchTime
	}
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		out.CapacityType = "spot"
	}
	reservedFrom(in, &out)
	for _, t := range in.Tags {
		out.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, g := range in.SecurityGroups {
		out.SecurityGroupIDs = append(out.SecurityGroupIDs, aws.ToString(g.GroupId))
	}
	return out
}
