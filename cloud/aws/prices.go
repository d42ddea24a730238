package aws

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// RefreshSpotPrices reads the current Linux spot prices of every instance
// type and zone (DescribeSpotPriceHistory); until the first refresh, spot
// offerings carry the catalogue's modelled prices.
func (p *Provider) RefreshSpotPrices(ctx context.Context) error {
	prices := map[spotKey]float64{}
	stamps := map[spotKey]int64{}
	start := p.now()
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}, StartTime: aws.Time(start),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing spot price history: %w", classify(err))
		}
		for _, sp := range page.SpotPriceHistory {
			f, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
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
	p.mu.Lock()
	p.spot = prices
	p.mu.Unlock()
	p.log.Info("refreshed spot prices", zap.Int("offerings", len(prices)))
	return nil
}

// offeredZones returns the zones each instance type the region describes
// (DescribeInstanceTypes) is offered in (DescribeInstanceTypeOfferings),
// cached for CacheTTL.
func (p *Provider) offeredZones(ctx context.Context) (map[string][]string, error) {
	p.mu.Lock()
	if p.offered != nil && p.now().Sub(p.offeredAt) < p.opts.CacheTTL {
		o := p.offered
		p.mu.Unlock()
		return o, nil
	}
	p.mu.Unlock()
	described := map[string]bool{}
	typePages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{})
	for typePages.HasMorePages() {
		page, err := typePages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", classify(err))
		}
		for _, it := range page.InstanceTypes {
			described[string(it.InstanceType)] = true
		}
	}
	offered := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", classify(err))
		}
		for _, o := range page.InstanceTypeOfferings {
			if t := string(o.InstanceType); described[t] {
				offered[t] = append(offered[t], aws.ToString(o.Location))
			}
		}
	}
	p.mu.Lock()
	p.offered, p.offeredAt = offered, p.now()
	p.mu.Unlock()
	return offered, nil
}

// InstanceTypes returns the catalogue's instance types for nc with the
// region's offerings: zones from nc's resolved subnets (status) or the
// region's default zones, live spot prices when known, and Available=false
// for offerings not offered in a zone or in the capacity-error cache.
func (p *Provider) InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	offered, err := p.offeredZones(ctx)
	if err != nil {
		return nil, err
	}
	var zones []string
	seen := map[string]bool{}
	if nc != nil {
		for _, s := range nc.Status.Subnets {
			if !seen[s.Zone] {
				seen[s.Zone] = true
				zones = append(zones, s.Zone)
			}
		}
	}
	base := catalog.InstanceTypes(catalog.Options{Region: p.region, Zones: zones, NodeClass: nc})
	p.mu.Lock()
	spot := p.spot
	p.mu.Unlock()
	out := make([]*catalog.InstanceType, 0, len(base))
	for _, it := range base {
		zs, ok := offered[it.Name]
		if !ok {
			continue
		}
		inZone := map[string]bool{}
		for _, z := range zs {
			inZone[z] = true
		}
		c := *it
		c.Offerings = make([]catalog.Offering, len(it.Offerings))
		for i, o := range it.Offerings {
			if o.CapacityType == "spot" {
				if price, ok := spot[spotKey{it.Name, o.Zone}]; ok {
					o.Price = price
				}
			}
			key := cloud.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			o.Available = o.Available && inZone[o.Zone] && !p.unavailable.unavailable(key)
			c.Offerings[i] = o
		}
		out = append(out, &c)
	}
	return out, nil
}
