package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// Errors of NodeClass resolution; they become status conditions.
var (
	ErrNoSubnets        = errors.New("no subnet matches subnetSelectorTerms")
	ErrNoSecurityGroups = errors.New("no security group matches securityGroupSelectorTerms")
	ErrNoAMIs           = errors.New("no AMI matches amiSelectorTerms")
	ErrUnknownAlias     = errors.New("unknown AMI alias")
	ErrNoRole           = errors.New("neither role nor instanceProfile is set")
)

// Subnet is a resolved subnet.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	AvailableIPs int32
}

// AMI is a resolved image.
type AMI struct {
	ID           string
	Name         string
	Arch         string // amd64 or arm64
	CreationDate string
}

// Resolved is an EC2NodeClass's selector terms resolved against EC2.
type Resolved struct {
	Subnets         []Subnet
	SecurityGroups  []awsv1.SecurityGroup
	AMIs            []AMI
	InstanceProfile string
}

// ResolveError collects what failed to resolve, per part.
type ResolveError struct {
	Subnets, SecurityGroups, AMIs, InstanceProfile error
}

func (e *ResolveError) Error() string {
	var parts []string
	for _, err := range []error{e.Subnets, e.SecurityGroups, e.AMIs, e.InstanceProfile} {
		if err != nil {
			parts = append(parts, err.Error())
		}
	}
	return "resolving EC2NodeClass: " + strings.Join(parts, "; ")
}

// Unwrap returns the part errors.
func (e *ResolveError) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Subnets, e.SecurityGroups, e.AMIs, e.InstanceProfile} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Resolve resolves the NodeClass's subnets, security groups, AMIs and
// instance profile. On failure it returns what it could resolve and a
// *ResolveError naming each failed part.
func (p *Provider) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (Resolved, error) {
	var r Resolved
	var rerr ResolveError
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
		rerr.InstanceProfile = fmt.Errorf("spec.role, spec.instanceProfile: %w", ErrNoRole)
	}
	if rerr.Subnets != nil || rerr.SecurityGroups != nil || rerr.AMIs != nil || rerr.InstanceProfile != nil {
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
	for _, k := range sortedKeys(tags) {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

func (p *Provider) resolveSubnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) ([]Subnet, error) {
	return cached(p, cacheKey("subnets", terms), func() ([]Subnet, error) {
		seen := map[string]Subnet{}
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
					seen[aws.ToString(s.SubnetId)] = Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
						ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount)}
				}
			}
		}
		if len(seen) == 0 {
			return nil, ErrNoSubnets
		}
		out := make([]Subnet, 0, len(seen))
		for _, id := range sortedKeys(seen) {
			out = append(out, seen[id])
		}
		return out, nil
	})
}

// SubnetsByZone is the package SubnetsByZone without the subnets that
// recently ran out of addresses, unless a zone has no other.
func (p *Provider) SubnetsByZone(subnets []Subnet) map[string]string {
	var ok []Subnet
	for _, s := range subnets {
		if !p.noAddrs.unavailable(s.ID) {
			ok = append(ok, s)
		}
	}
	out := SubnetsByZone(ok)
	for z, id := range SubnetsByZone(subnets) {
		if _, has := out[z]; !has {
			out[z] = id
		}
	}
	return out
}

// SubnetsByZone picks one subnet per zone: the one with the most free
// addresses (ties: the lowest ID).
func SubnetsByZone(subnets []Subnet) map[string]string {
	best := map[string]Subnet{}
	for _, s := range subnets {
		b, ok := best[s.Zone]
		if !ok || s.AvailableIPs > b.AvailableIPs || (s.AvailableIPs == b.AvailableIPs && s.ID < b.ID) {
			best[s.Zone] = s
		}
	}
	out := make(map[string]string, len(best))
	for z, s := range best {
		out[z] = s.ID
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
			return nil, ErrNoSecurityGroups
		}
		out := make([]awsv1.SecurityGroup, 0, len(seen))
		for _, id := range sortedKeys(seen) {
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
		return nil, fmt.Errorf("alias %q: want family@version: %w", alias, ErrUnknownAlias)
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
			return nil, fmt.Errorf("alias %q: windows aliases only support @latest: %w", alias, ErrUnknownAlias)
		}
		return map[string]string{"amd64": fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id",
			strings.TrimPrefix(strings.ToLower(family), "windows"), k8s)}, nil
	}
	return nil, fmt.Errorf("alias %q: family %q: %w", alias, family, ErrUnknownAlias)
}

func (p *Provider) resolveAMIs(ctx context.Context, terms []awsv1.AMISelectorTerm) ([]AMI, error) {
	return cached(p, cacheKey("amis/"+p.k8sVer, terms), func() ([]AMI, error) {
		var found []AMI
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
					return nil, fmt.Errorf("%s.alias: no SSM client: %w", field, ErrUnknownAlias)
				}
				var ids []string
				for _, arch := range sortedKeys(params) {
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
					return nil, fmt.Errorf("%s.alias %q: no SSM parameter for Kubernetes %s: %w", field, t.Alias, p.k8sVer, ErrUnknownAlias)
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
				found = append(found, AMI{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch,
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
		var out []AMI
		seen := map[string]bool{}
		for _, a := range found {
			if !seen[a.Arch] {
				seen[a.Arch] = true
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return nil, ErrNoAMIs
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Arch < out[j].Arch })
		return out, nil
	})
}

// ImageFor returns the AMI for an architecture ("" when none).
func (r Resolved) ImageFor(arch string) string {
	for _, a := range r.AMIs {
		if a.Arch == arch {
			return a.ID
		}
	}
	return ""
}

// StatusAMIs is the AMIs as EC2NodeClass status entries.
func (r Resolved) StatusAMIs() []awsv1.AMI {
	out := make([]awsv1.AMI, 0, len(r.AMIs))
	for _, a := range r.AMIs {
		out = append(out, awsv1.AMI{ID: a.ID, Name: a.Name, Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{a.Arch}},
		}})
	}
	return out
}

// StatusSubnets is the subnets as EC2NodeClass status entries.
func (r Resolved) StatusSubnets() []awsv1.Subnet {
	out := make([]awsv1.Subnet, 0, len(r.Subnets))
	for _, s := range r.Subnets {
		out = append(out, awsv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	return out
}
