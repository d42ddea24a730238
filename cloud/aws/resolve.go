package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

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
	switch {
	case nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "":
		r.InstanceProfile = *nc.Spec.InstanceProfile
	case nc.Spec.Role != "":
		// Joiner does not manage IAM: a role maps to the instance profile of
		// the same name, which the operator creates.
		r.InstanceProfile = nc.Spec.Role
	default:
		rerr.InstanceProfile = fmt.Errorf("spec.role, spec.instanceProfile: %w", cloud.ErrNoRole)
	}
	if sel := nc.Spec.PlacementGroupSelector; sel != nil {
		if r.PlacementGroup, err = p.resolvePlacementGroup(ctx, sel); err != nil {
			rerr.PlacementGroup = err
		}
	}
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		rerr.CapacityReservations = fmt.Errorf("spec.capacityReservationSelectorTerms: %w", cloud.ErrCapacityReservationsNotSupported)
	}
	if rerr.Subnets != nil || rerr.SecurityGroups != nil || rerr.AMIs != nil || rerr.InstanceProfile != nil ||
		rerr.PlacementGroup != nil || rerr.CapacityReservations != nil {
		return r, &rerr
	}
	return r, nil
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

func (p *Provider) resolveSubnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) ([]cloud.Subnet, error) {
	return cached(p, cacheKey("subnets", terms), func() ([]cloud.Subnet, error) {
		seen := map[string]cloud.Subnet{}
		for i, t := range terms {
			in := &ec2.DescribeSubnetsInput{Filters: tagFilters(t.Tags)}
			if t.ID != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("subnet-id"), Values: []string{t.ID}})
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
		if len(seen) == 0 {
			return nil, cloud.ErrNoSubnets
		}
		out := make([]cloud.Subnet, 0, len(seen))
		for _, id := range slices.Sorted(maps.Keys(seen)) {
			out = append(out, seen[id])
		}
		return out, nil
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
	return cached(p, cacheKey("sgs", terms), func() ([]awsv1.SecurityGroup, error) {
		seen := map[string]awsv1.SecurityGroup{}
		for i, t := range terms {
			in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(t.Tags)}
			if t.ID != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-id"), Values: []string{t.ID}})
			}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
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
		if len(seen) == 0 {
			return nil, cloud.ErrNoSecurityGroups
		}
		out := make([]awsv1.SecurityGroup, 0, len(seen))
		for _, id := range slices.Sorted(maps.Keys(seen)) {
			out = append(out, seen[id])
		}
		return out, nil
	})
}

// aliasParameters returns the SSM parameter per architecture of an alias
// (family@version) for a Kubernetes version, following the EKS paths.
func aliasParameters(alias, k8s string) (map[string]string, error) {
	family, version, ok := strings.Cut(alias, "@")
	if !ok || version == "" {
		return nil, fmt.Errorf("alias %q: want family@version: %w", alias, cloud.ErrUnknownAlias)
	}
	latest := version == "latest"
	switch strings.ToLower(family) {
	case "al2023":
		out := map[string]string{}
		for arch, a := range map[string]string{"amd64": "x86_64", "arm64": "arm64"} {
			leaf := "recommended"
			if !latest {
				leaf = fmt.Sprintf("amazon-eks-node-al2023-%s-standard-%s-%s", a, k8s, version)
			}
			out[arch] = fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/%s/image_id", k8s, a, leaf)
		}
		return out, nil
	case "al2":
		out := map[string]string{}
		for arch, suffix := range map[string]string{"amd64": "", "arm64": "-arm64"} {
			leaf := "recommended"
			if !latest {
				leaf = fmt.Sprintf("amazon-eks%s-node-%s-%s", strings.TrimPrefix(suffix, ""), k8s, version)
			}
			out[arch] = fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2%s/%s/image_id", k8s, suffix, leaf)
		}
		return out, nil
	case "bottlerocket":
		v := "latest"
		if !latest {
			v = strings.TrimPrefix(version, "v")
		}
		return map[string]string{
			"amd64": fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/x86_64/%s/image_id", k8s, v),
			"arm64": fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/arm64/%s/image_id", k8s, v),
		}, nil
	case "windows2019", "windows2022", "windows2025":
		if !latest {
			return nil, fmt.Errorf("alias %q: windows aliases only support @latest: %w", alias, cloud.ErrUnknownAlias)
		}
		return map[string]string{"amd64": fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id",
			strings.TrimPrefix(strings.ToLower(family), "windows"), k8s)}, nil
	}
	return nil, fmt.Errorf("alias %q: family %q: %w", alias, family, cloud.ErrUnknownAlias)
}

func (p *Provider) resolveAMIs(ctx context.Context, terms []awsv1.AMISelectorTerm) ([]cloud.AMI, error) {
	return cached(p, cacheKey("amis/"+p.k8sVer, terms), func() ([]cloud.AMI, error) {
		var found []cloud.AMI
		for i, t := range terms {
			field := fmt.Sprintf("amiSelectorTerms[%d]", i)
			var in *ec2.DescribeImagesInput
			switch {
			case t.Alias != "":
				params, err := aliasParameters(t.Alias, p.k8sVer)
				if err != nil {
					return nil, fmt.Errorf("%s.alias: %w", field, err)
				}
				if p.ssm == nil {
					return nil, fmt.Errorf("%s.alias: no SSM client: %w", field, cloud.ErrUnknownAlias)
				}
				var ids []string
				for _, arch := range slices.Sorted(maps.Keys(params)) {
					out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(params[arch])})
					if err != nil {
						if errors.Is(classify(err), cloud.ErrNotFound) {
							continue // e.g. no arm64 image for this family
						}
						return nil, fmt.Errorf("%s.alias: reading SSM parameter %s: %w", field, params[arch], classify(err))
					}
					ids = append(ids, aws.ToString(out.Parameter.Value))
				}
				if len(ids) == 0 {
					return nil, fmt.Errorf("%s.alias %q: no SSM parameter for Kubernetes %s: %w", field, t.Alias, p.k8sVer, cloud.ErrUnknownAlias)
				}
				in = &ec2.DescribeImagesInput{ImageIds: ids}
			case t.SSMParameter != "":
				if p.ssm == nil {
					return nil, fmt.Errorf("%s.ssmParameter: no SSM client", field)
				}
				out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(t.SSMParameter)})
				if err != nil {
					return nil, fmt.Errorf("%s.ssmParameter %s: %w", field, t.SSMParameter, classify(err))
				}
				in = &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}}
			case t.ID != "":
				in = &ec2.DescribeImagesInput{ImageIds: []string{t.ID}}
			default:
				in = &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
				if t.Name != "" {
					in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				}
				if t.Owner != "" {
					in.Owners = []string{t.Owner}
				} else if t.Name != "" {
					in.Owners = []string{"self", "amazon"}
				}
			}
			out, err := p.ec2.DescribeImages(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("%s: describing images: %w", field, classify(err))
			}
			for _, im := range out.Images {
				arch := "amd64"
				if im.Architecture == ec2types.ArchitectureValuesArm64 {
					arch = "arm64"
				}
				found = append(found, cloud.AMI{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch,
					CreationDate: aws.ToString(im.CreationDate)})
			}
		}
		// Newest image per architecture (ties: the lowest ID).
		sort.Slice(found, func(i, j int) bool {
			if found[i].CreationDate != found[j].CreationDate {
				return found[i].CreationDate > found[j].CreationDate
			}
			return found[i].ID < found[j].ID
		})
		var out []cloud.AMI
		seen := map[string]bool{}
		for _, a := range found {
			if !seen[a.Arch] {
				seen[a.Arch] = true
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return nil, cloud.ErrNoAMIs
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Arch < out[j].Arch })
		return out, nil
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
		out, err := p.ec2.DescribePlacementGroups(ctx, in)
		if err != nil { // e.g. InvalidPlacementGroup.Unknown for a name EC2 does not know
			return nil, fmt.Errorf("placementGroupSelector %s: describing placement groups: %w", what, classify(err))
		}
		if len(out.PlacementGroups) == 0 {
			return nil, fmt.Errorf("placementGroupSelector %s: %w", what, cloud.ErrNoPlacementGroup)
		}
		g := out.PlacementGroups[0]
		return &cloud.PlacementGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
			PartitionCount: aws.ToInt32(g.PartitionCount), SpreadLevel: string(g.SpreadLevel)}, nil
	})
}
