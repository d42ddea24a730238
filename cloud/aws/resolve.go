package aws

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// Resolve resolves the NodeClass's subnets, security groups, AMIs,
// instance profile and placement group. On failure it returns what it could resolve and a
// *cloud.ResolveError naming each failed part.
func (p *Provider) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (cloud.Resolved, error) {
	var r cloud.Resolved
	var rerr cloud.ResolveError
	var err error
	if r.Subnets, err = p.resolveSubnets(ctx, nc.Spec.SubnetSelectorTerms); err != nil {
		rerr.Subnets = err
	}
	if r.SecurityGroups, err = p.resolveSecurityGroups(ctx, nc.Spec.SecurityGroupSelectorTerms); err != nil {
		rerr.SecurityGroups = err
	}
	if r.AMIs, err = p.resolveAMIs(ctx, nc.Spec.AMISelectorTerms); err != nil {
		rerr.AMIs = err
	}
	if r.InstanceProfile, err = p.resolveInstanceProfile(ctx, nc); err != nil {
		rerr.InstanceProfile = err
	}
	if sel := nc.Spec.PlacementGroupSelector; sel != nil {
		if r.PlacementGroup, err = p.resolvePlacementGroup(ctx, sel); err != nil {
			rerr.PlacementGroup = err
		}
	}
	r.NoReservedCapacity = p.opts.NoReservedCapacity
	if r.CapacityReservations, err = p.resolveClassReservations(ctx, nc); err != nil {
		rerr.CapacityReservations = err
	}
	if rerr.Subnets != nil || rerr.SecurityGroups != nil || rerr.AMIs != nil || rerr.InstanceProfile != nil ||
		rerr.PlacementGroup != nil || rerr.CapacityReservations != nil {
		return r, &rerr
	}
	return r, nil
}

// cachedList is cached for a list: each caller gets its own copy of the
// cached slice (its items shared), so one that reorders or edits what it
// got leaves the cache and the other callers alone (as Karpenter's
// providers hand out copies of their cached lists).
func cachedList[T any](p *Provider, key string, fn func() ([]T, error)) ([]T, error) {
	v, err := cached(p, key, fn)
	return slices.Clone(v), err
}

// cached returns the cached value of key or computes and caches it.
func cached[T any](p *Provider, key string, fn func() (T, error)) (T, error) {
	p.mu.Lock()
	e, ok := p.resolved[key]
	p.mu.Unlock()
	if ok && p.now().Before(e.expires) {
		return e.value.(T), nil
	}
	v, err := fn()
	if err != nil {
		return v, err
	}
	p.mu.Lock()
	p.resolved[key] = cacheEntry{value: v, expires: p.now().Add(p.opts.CacheTTL)}
	p.mu.Unlock()
	return v, nil
}

func cacheKey(kind string, terms any) string {
	b, _ := json.Marshal(terms)
	return kind + ":" + string(b)
}

// describePageSize is the MaxResults of the subnet and security group
// look-ups (Karpenter's; DescribeImages asks for 1000 a page).
const describePageSize = 500

func tagFilters(tags map[string]string) []ec2types.Filter {
	var out []ec2types.Filter
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

// matchesByID is what selector terms matched (seen, keyed by ID) in ID
// order, or none when they matched nothing.
func matchesByID[T any](seen map[string]T, none error) ([]T, error) {
	if len(seen) == 0 {
		return nil, none
	}
	out := make([]T, 0, len(seen))
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, seen[id])
	}
	return out, nil
}

func (p *Provider) resolveSubnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) ([]cloud.Subnet, error) {
	return cachedList(p, cacheKey("subnets", terms), func() ([]cloud.Subnet, error) {
		seen := map[string]cloud.Subnet{}
		for i, t := range terms {
			// An id term selects by its id alone, as Karpenter's (the CRD
			// admits id beside tags unless every term has both).
			in := &ec2.DescribeSubnetsInput{Filters: tagFilters(t.Tags), MaxResults: aws.Int32(describePageSize)}
			if t.ID != "" {
				in.Filters = []ec2types.Filter{{Name: aws.String("subnet-id"), Values: []string{t.ID}}}
			}
			pages := ec2.NewDescribeSubnetsPaginator(p.ec2, in)
			for pages.HasMorePages() {
				out, err := pages.NextPage(ctx)
				if err != nil {
					return nil, fmt.Errorf("subnetSelectorTerms[%d]: describing subnets: %w", i, classify(err))
				}
				for _, s := range out.Subnets {
					seen[aws.ToString(s.SubnetId)] = cloud.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
						ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount)}
				}
			}
		}
		return matchesByID(seen, cloud.ErrNoSubnets)
	})
}

// SubnetsByZone is the package SubnetsByZone without the subnets that
// recently ran out of addresses, unless a zone has no other.
func (p *Provider) SubnetsByZone(subnets []cloud.Subnet) map[string]string {
	var ok []cloud.Subnet
	for _, s := range subnets {
		if !p.noAddrs.unavailable(s.ID) {
			ok = append(ok, s)
		}
	}
	out := cloud.SubnetPerZone(ok)
	for z, id := range cloud.SubnetPerZone(subnets) {
		if _, has := out[z]; !has {
			out[z] = id
		}
	}
	return out
}

func (p *Provider) resolveSecurityGroups(ctx context.Context, terms []awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
	return cachedList(p, cacheKey("sgs", terms), func() ([]awsv1.SecurityGroup, error) {
		seen := map[string]awsv1.SecurityGroup{}
		for i, t := range terms {
			// An id term selects by its id alone, else a name term by its
			// name alone, as Karpenter's (the CRD admits them beside other
			// fields unless every term has such a mix).
			in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(t.Tags), MaxResults: aws.Int32(describePageSize)}
			switch {
			case t.ID != "":
				in.Filters = []ec2types.Filter{{Name: aws.String("group-id"), Values: []string{t.ID}}}
			case t.Name != "":
				in.Filters = []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{t.Name}}}
			}
			pages := ec2.NewDescribeSecurityGroupsPaginator(p.ec2, in)
			for pages.HasMorePages() {
				out, err := pages.NextPage(ctx)
				if err != nil {
					return nil, fmt.Errorf("securityGroupSelectorTerms[%d]: describing security groups: %w", i, classify(err))
				}
				for _, g := range out.SecurityGroups {
					seen[aws.ToString(g.GroupId)] = awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
				}
			}
		}
		return matchesByID(seen, cloud.ErrNoSecurityGroups)
	})
}

// resolvePlacementGroup finds the selector's placement group among the
// available ones (DescribePlacementGroups by id or name with the filter
// state=available, as Karpenter asks).
func (p *Provider) resolvePlacementGroup(ctx context.Context, sel *awsv1.PlacementGroupSelector) (*cloud.PlacementGroup, error) {
	return cached(p, cacheKey("placementgroup", sel), func() (*cloud.PlacementGroup, error) {
		in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}},
		}}
		what := ""
		switch {
		case aws.ToString(sel.ID) != "":
			in.GroupIds, what = []string{*sel.ID}, "id "+*sel.ID
		case aws.ToString(sel.Name) != "":
			in.GroupNames, what = []string{*sel.Name}, "name "+*sel.Name
		default:
			return nil, fmt.Errorf("placementGroupSelector: name or id is required: %w", cloud.ErrNoPlacementGroup)
		}
		notFound := &cloud.StatusError{Message: fmt.Sprintf("Placement group %q not found", aws.ToString(cmp.Or(sel.Name, sel.ID))),
			Err: fmt.Errorf("placementGroupSelector %s: %w", what, cloud.ErrNoPlacementGroup)}
		out, err := p.ec2.DescribePlacementGroups(ctx, in)
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() == "InvalidPlacementGroup.Unknown":
			// EC2's answer for a name or id it does not know (Karpenter's
			// fake answers no group): not found.
			return nil, notFound
		case err != nil:
			return nil, fmt.Errorf("placementGroupSelector %s: describing placement groups: %w", what, classify(err))
		case len(out.PlacementGroups) == 0: // not available
			return nil, notFound
		}
		g := out.PlacementGroups[0]
		return &cloud.PlacementGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
			PartitionCount: aws.ToInt32(g.PartitionCount), SpreadLevel: string(g.SpreadLevel)}, nil
	})
}
