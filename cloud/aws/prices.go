package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// RefreshSpotPrices reads the current Linux spot price of every instance
// type and zone (DescribeSpotPriceHistory from now: the latest price of
// each, the newest when a pair comes twice) and merges them into the known
// ones, as Karpenter keeps previously retrieved prices. Until the first
// answer with prices, spot offerings carry the catalogue's modelled
// prices; after it, a spot offering without a price is unavailable
// (InstanceTypes). An answer without prices is an error and changes
// nothing.
func (p *Provider) RefreshSpotPrices(ctx context.Context) error {
	prices := map[spotKey]float64{}
	stamps := map[spotKey]int64{}
	start := p.now()
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: spotProducts, StartTime: aws.Time(start), MaxResults: aws.Int32(spotPageSize),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing spot price history: %w", classify(err))
		}
		for _, sp := range page.SpotPriceHistory {
			f, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil || f <= 0 || !slices.Contains(spotProducts, string(sp.ProductDescription)) {
				continue
			}
			k := spotKey{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			var ts int64
			if sp.Timestamp != nil {
				ts = sp.Timestamp.UnixNano()
			}
			if prev, ok := stamps[k]; !ok || ts >= prev {
				prices[k], stamps[k] = f, ts
			}
		}
	}
	if len(prices) == 0 {
		return errors.New("describing spot price history: no Linux spot prices")
	}
	p.mu.Lock()
	merged := maps.Clone(p.spot)
	maps.Copy(merged, prices)
	p.spot = merged
	p.mu.Unlock()
	p.prices.setSource(karpv1.CapacityTypeSpot, sourceSpotHistory, zap.Int("offerings", len(merged)))
	p.log.Debug("refreshed spot prices", zap.Int("offerings", len(prices)))
	return nil
}

// spotProducts are the Linux product descriptions of spot prices
// (Karpenter's).
var spotProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// spotPageSize: DescribeSpotPriceHistory pages of up to 1000 (its maximum).
const spotPageSize = 1000

// typeInfo is what DescribeInstanceTypes says of a type that the
// catalogue does not hold: what decides whether the type can launch a
// class's network interfaces, connection tracking, nested virtualization
// and placement group, and its EFA interfaces.
type typeInfo struct {
	hypervisor     string
	enaUnsupported bool
	// cards maps a network card index to its maximum network interfaces;
	// nil when EC2 lists no network cards.
	cards map[int32]int32
	// efaMax is MaximumEfaInterfaces (nil when the type has no EFA).
	efaMax *int32
	// nestedVirt: ProcessorInfo.SupportedFeatures has
	// nested-virtualization.
	nestedVirt bool
	// strategies are the placement group strategies it supports.
	strategies []string
	// hw is what it says of processor, EBS and encryption in transit,
	// which the type's labels carry (Karpenter's computeRequirements).
	hw catalog.Hardware
}

func typeInfoFrom(it ec2types.InstanceTypeInfo) typeInfo {
	ti := typeInfo{hypervisor: string(it.Hypervisor)}
	if n := it.NetworkInfo; n != nil {
		ti.enaUnsupported = n.EnaSupport == ec2types.EnaSupportUnsupported
		for _, c := range n.NetworkCards {
			if ti.cards == nil {
				ti.cards = map[int32]int32{}
			}
			ti.cards[aws.ToInt32(c.NetworkCardIndex)] = aws.ToInt32(c.MaximumNetworkInterfaces)
		}
		if n.EfaInfo != nil && n.EfaInfo.MaximumEfaInterfaces != nil {
			ti.efaMax = aws.Int32(*n.EfaInfo.MaximumEfaInterfaces)
		}
	}
	if n := it.NetworkInfo; n != nil {
		ti.hw.EncryptionInTransit = aws.ToBool(n.EncryptionInTransitSupported)
	}
	if pi := it.ProcessorInfo; pi != nil {
		for _, f := range pi.SupportedFeatures {
			ti.nestedVirt = ti.nestedVirt || f == ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization
		}
		ti.hw.CPUManufacturer = aws.ToString(pi.Manufacturer)
		ti.hw.SustainedClockGHz = aws.ToFloat64(pi.SustainedClockSpeedInGhz)
	}
	if ebs := it.EbsInfo; ebs != nil {
		ti.hw.EBSOptimizedSupport = string(ebs.EbsOptimizedSupport)
		if oi := ebs.EbsOptimizedInfo; oi != nil {
			ti.hw.EBSMaxBandwidthMbps = aws.Int32(aws.ToInt32(oi.MaximumBandwidthInMbps))
		}
	}
	if pg := it.PlacementGroupInfo; pg != nil {
		for _, st := range pg.SupportedStrategies {
			ti.strategies = append(ti.strategies, string(st))
		}
	}
	return ti
}

// offeredZones returns the zones each instance type the region describes
// (DescribeInstanceTypes) is offered in (DescribeInstanceTypeOfferings),
// and what DescribeInstanceTypes says of each type, cached for CacheTTL.
func (p *Provider) offeredZones(ctx context.Context) (map[string][]string, map[string]typeInfo, error) {
	p.mu.Lock()
	if p.offered != nil && p.now().Sub(p.offeredAt) < p.opts.CacheTTL {
		o, info := p.offered, p.typeInfo
		p.mu.Unlock()
		return o, info, nil
	}
	p.mu.Unlock()
	described := map[string]typeInfo{}
	typePages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{})
	for typePages.HasMorePages() {
		page, err := typePages.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("describing instance types: %w", classify(err))
		}
		for _, it := range page.InstanceTypes {
			described[string(it.InstanceType)] = typeInfoFrom(it)
		}
	}
	offered := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("describing instance type offerings: %w", classify(err))
		}
		for _, o := range page.InstanceTypeOfferings {
			if t := string(o.InstanceType); hasType(described, t) {
				offered[t] = append(offered[t], aws.ToString(o.Location))
			}
		}
	}
	p.mu.Lock()
	p.offered, p.typeInfo, p.offeredAt = offered, described, p.now()
	p.mu.Unlock()
	return offered, described, nil
}

func hasType(m map[string]typeInfo, t string) bool {
	_, ok := m[t]
	return ok
}

// withHardware is labels with the labels of what DescribeInstanceTypes
// says of the type's hardware in place of the catalogue's model of it:
// labels itself when they agree, else a copy.
func withHardware(labels map[string]string, hw catalog.Hardware) map[string]string {
	want := make(map[string]string, len(catalog.HardwareLabels))
	hw.SetLabels(want)
	for _, k := range catalog.HardwareLabels {
		v, ok := labels[k]
		w, wok := want[k]
		if ok != wok || v != w {
			out := maps.Clone(labels)
			hw.SetLabels(out)
			return out
		}
	}
	return labels
}

// compatible is Karpenter's check of an instance type against a class
// (its instancetype/compatibility): the class's network interfaces fit the
// type's network cards and EFA interfaces on an ENA type, nested
// virtualization (when enabled) is a supported processor feature,
// connection tracking needs a Nitro type, the placement group's strategy
// is supported, and AL2023 does not boot a1 types.
func compatible(name string, ti typeInfo, nc *awsv1.EC2NodeClass, pg *cloud.PlacementGroup) bool {
	if nc == nil {
		return true
	}
	if nis := nc.Spec.NetworkInterfaces; nis != nil {
		if len(ti.cards) == 0 || ti.enaUnsupported {
			return false
		}
		efaOnly := 0
		for _, ni := range nis {
			if ni == nil {
				continue
			}
			if int(ni.NetworkCardIndex) >= len(ti.cards) {
				return false
			}
			if maxENIs, ok := ti.cards[ni.NetworkCardIndex]; !ok || maxENIs <= ni.DeviceIndex {
				return false
			}
			if ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				efaOnly++
			}
		}
		if efaOnly > 0 && (ti.efaMax == nil || efaOnly > int(*ti.efaMax)) {
			return false
		}
	}
	if c := nc.Spec.CPUOptions; c != nil && aws.ToString(c.NestedVirtualization) == "enabled" && !ti.nestedVirt {
		return false
	}
	if pg != nil && !slices.Contains(ti.strategies, pg.Strategy) {
		return false
	}
	if nc.Spec.ConnectionTracking != nil && ti.hypervisor != "nitro" {
		return false
	}
	if catalog.AMIFamily(nc) == awsv1.AMIFamilyAL2023 && strings.HasPrefix(name, "a1.") {
		return false
	}
	return true
}

// efaCapacity is a type's vpc.amazonaws.com/efa capacity for a class: the
// class's efa-only interfaces when it names network interfaces, else the
// type's maximum EFA interfaces (Karpenter's).
func efaCapacity(ti typeInfo, nc *awsv1.EC2NodeClass) int64 {
	if nc != nil && nc.Spec.NetworkInterfaces != nil {
		n := 0
		for _, ni := range nc.Spec.NetworkInterfaces {
			if ni != nil && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				n++
			}
		}
		return int64(n)
	}
	if ti.efaMax == nil {
		return 0
	}
	return int64(*ti.efaMax)
}

// InstanceTypes returns the catalogue's instance types for nc with the
// region's offerings: zones from nc's resolved subnets (status) or the
// region's default zones, the region's on-demand prices (OnDemandPrices),
// live spot prices when known, and Available=false
// for offerings not offered in a zone, in a zone whose every subnet of the
// class ran out of addresses, or in the capacity-error cache (alone or as
// their whole capacity type), and
// for spot offerings the spot price history has no price for once it has
// loaded (until then they carry the catalogue's modelled price, as
// Karpenter's carry their default price before its first spot update). Types
// that cannot launch the class (compatible) are left out; the class's
// capacity reservations add reserved offerings (reservedOfferings); EFA types get
// their vpc.amazonaws.com/efa capacity, and with a placement group every
// type carries its karpenter.k8s.aws/placement-group-id label.
func (p *Provider) InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	offered, info, err := p.offeredZones(ctx)
	if err != nil {
		return nil, err
	}
	var pg *cloud.PlacementGroup
	if nc != nil && nc.Spec.PlacementGroupSelector != nil {
		if pg, err = p.resolvePlacementGroup(ctx, nc.Spec.PlacementGroupSelector); err != nil {
			return nil, fmt.Errorf("instance types of ec2nodeclass %s: %w", nc.Name, err)
		}
	}
	var zones []string
	seen := map[string]bool{}
	// exhausted: zones every one of whose subnets recently ran out of
	// addresses; nothing launches there until one has some again
	// (Karpenter's subnet entries in its unavailable offerings).
	exhausted := map[string]bool{}
	if nc != nil {
		for _, s := range nc.Status.Subnets {
			if !seen[s.Zone] {
				seen[s.Zone] = true
				zones = append(zones, s.Zone)
				exhausted[s.Zone] = true
			}
			exhausted[s.Zone] = exhausted[s.Zone] && p.noAddrs.unavailable(s.ID)
		}
	}
	base := catalog.InstanceTypes(catalog.Options{Region: p.region, Zones: zones, NodeClass: nc, Prices: p.prices.onDemandTable()})
	p.mu.Lock()
	spot := p.spot
	p.mu.Unlock()
	reservations := p.classReservations(ctx, nc)
	out := make([]*catalog.InstanceType, 0, len(base))
	for _, it := range base {
		zs, ok := offered[it.Name]
		if !ok || !compatible(it.Name, info[it.Name], nc, pg) {
			continue
		}
		inZone := map[string]bool{}
		for _, z := range zs {
			inZone[z] = true
		}
		c := *it
		c.Labels = withHardware(it.Labels, info[it.Name].hw)
		if n := efaCapacity(info[it.Name], nc); n > 0 {
			c.Capacity = maps.Clone(it.Capacity)
			c.Capacity[awsv1.ResourceEFA] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		if pg != nil {
			c.Labels = maps.Clone(c.Labels)
			c.Labels[karpv1.LabelPlacementGroupID] = pg.ID
		}
		c.Offerings = make([]catalog.Offering, len(it.Offerings))
		for i, o := range it.Offerings {
			if o.CapacityType == "spot" {
				price, ok := spot[spotKey{it.Name, o.Zone}]
				switch {
				case ok:
					o.Price = price
				case len(spot) > 0:
					// The history is loaded and has no price here: EC2
					// sells no spot capacity of the type in the zone
					// (Karpenter's offering without a price).
					o.Available = false
				}
			}
			key := cloud.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			o.Available = o.Available && inZone[o.Zone] && !exhausted[o.Zone] && !p.unavailable.unavailable(key)
			c.Offerings[i] = o
		}
		c.Offerings = append(c.Offerings, p.reservedOfferings(&c, reservations, inZone)...)
		out = append(out, &c)
	}
	return out, nil
}
