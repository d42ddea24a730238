package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// imageQuery is one amiSelectorTerm as a DescribeImages call, with what an
// alias's SSM parameters tell about the images it names: image ID ->
// requirement sets (besides the architecture), one per kind of instance.
type imageQuery struct {
	in    *ec2.DescribeImagesInput
	known map[string][][]corev1.NodeSelectorRequirement
}

// resolveAMIs resolves amiSelectorTerms as Karpenter does: each term's
// images, one AMI per image and requirement set (architecture, and for
// an alias the variant), the newest image per requirement set kept, newest
// first.
func (p *Provider) resolveAMIs(ctx context.Context, terms []awsv1.AMISelectorTerm) ([]cloud.AMI, error) {
	k8s := p.KubernetesVersion()
	return cachedList(p, cacheKey("amis/"+k8s, terms), func() ([]cloud.AMI, error) {
		var found []cloud.AMI
		for i, t := range terms {
			field := fmt.Sprintf("amiSelectorTerms[%d]", i)
			q, err := p.imageQuery(ctx, field, t, k8s)
			if err != nil {
				return nil, err
			}
			if q.in == nil { // an ssmParameter naming no image
				continue
			}
			pages := ec2.NewDescribeImagesPaginator(p.ec2, q.in)
			for pages.HasMorePages() {
				out, err := pages.NextPage(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: describing images: %w", field, classify(err))
				}
				for _, im := range out.Images {
					found = append(found, p.amisOf(im, q.known[aws.ToString(im.ImageId)])...)
				}
			}
		}
		out := newestPerRequirements(found)
		if len(out) == 0 {
			return nil, cloud.ErrNoAMIs
		}
		return out, nil
	})
}

// imageQuery turns a term into its DescribeImages call: available images,
// deprecated ones included (they rank after the others), as Karpenter asks.
// An ssmParameter that does not exist or whose value is not an image ID
// is skipped, as Karpenter skips it (logged): the query's in is nil; the
// other terms still resolve.
func (p *Provider) imageQuery(ctx context.Context, field string, t awsv1.AMISelectorTerm, k8s string) (imageQuery, error) {
	q := imageQuery{in: &ec2.DescribeImagesInput{}}
	byID := func(ids ...string) {
		q.in.Filters = []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}
	}
	switch {
	case t.Alias != "":
		known, err := p.aliasImages(ctx, field+".alias", t.Alias, k8s)
		if err != nil {
			return imageQuery{}, err
		}
		q.known = known
		byID(slices.Sorted(maps.Keys(known))...)
	case t.SSMParameter != "":
		if p.ssm == nil {
			return imageQuery{}, fmt.Errorf("%s.ssmParameter: no SSM client", field)
		}
		out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(t.SSMParameter)})
		if err != nil {
			err = classify(err)
			if errors.Is(err, cloud.ErrNotFound) {
				p.log.Debug("ssmParameter not found; skipping the term", zap.String("field", field),
					zap.String("ssm-parameter", t.SSMParameter), zap.Error(err))
				return imageQuery{}, nil
			}
			return imageQuery{}, fmt.Errorf("%s.ssmParameter %s: %w", field, t.SSMParameter, err)
		}
		id := aws.ToString(out.Parameter.Value)
		if !strings.HasPrefix(id, "ami-") {
			p.log.Debug("ssmParameter's value is not an AMI ID; skipping the term", zap.String("field", field),
				zap.String("ssm-parameter", t.SSMParameter), zap.String("value", id))
			return imageQuery{}, nil
		}
		byID(id)
	case t.ID != "":
		byID(t.ID)
	default:
		q.in.Filters = tagFilters(t.Tags)
		if t.Name != "" {
			q.in.Filters = append(q.in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
		}
		if t.Owner != "" {
			q.in.Owners = []string{t.Owner}
		} else if t.Name != "" {
			// Only the account's own and Amazon's images match a bare name,
			// never another account's public ones.
			q.in.Owners = []string{"self", "amazon"}
		}
	}
	q.in.Filters = append(q.in.Filters, ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)}})
	q.in.IncludeDeprecated = aws.Bool(true)
	q.in.MaxResults = aws.Int32(1000) // Karpenter's page size
	return q, nil
}

// aliasImages reads the alias's SSM parameters for the Kubernetes version:
// image ID -> the requirement sets of the parameters naming it. A
// parameter AWS does not publish (a variant not built for this version)
// is skipped; none at all is an error naming the alias and the version.
func (p *Provider) aliasImages(ctx context.Context, field, alias, k8s string) (map[string][][]corev1.NodeSelectorRequirement, error) {
	if k8s == "" {
		return nil, fmt.Errorf("%s %q: the cluster's Kubernetes version is not known yet (EKS has not been described): %w",
			field, alias, cloud.ErrNoAMIs)
	}
	params, err := aliasParameters(alias, k8s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if p.ssm == nil {
		return nil, fmt.Errorf("%s %q: no SSM client: %w", field, alias, cloud.ErrNoAMIs)
	}
	known := map[string][][]corev1.NodeSelectorRequirement{}
	for _, prm := range params {
		out, err := p.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(prm.Name)})
		if err != nil {
			if errors.Is(classify(err), cloud.ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("%s %q: reading SSM parameter %s: %w", field, alias, prm.Name, classify(err))
		}
		id := aws.ToString(out.Parameter.Value)
		known[id] = append(known[id], prm.Requirements...)
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("%s %q: AWS publishes no image of it for Kubernetes %s (none of its %d SSM parameters exists, e.g. %s): %w",
			field, alias, k8s, len(params), params[0].Name, cloud.ErrNoAMIs)
	}
	return known, nil
}

// kubeArch maps EC2's architectures to Kubernetes'; images of others
// (i386, the mac ones) are skipped, as Karpenter does.
var kubeArch = map[ec2types.ArchitectureValues]string{
	ec2types.ArchitectureValuesX8664: "amd64",
	ec2types.ArchitectureValuesArm64: "arm64",
}

// amisOf is an image as one AMI per requirement set (one without any when
// the term is not an alias).
func (p *Provider) amisOf(im ec2types.Image, sets [][]corev1.NodeSelectorRequirement) []cloud.AMI {
	arch, ok := kubeArch[im.Architecture]
	if !ok {
		return nil
	}
	deprecated := false
	if t, err := time.Parse(time.RFC3339, aws.ToString(im.DeprecationTime)); err == nil {
		deprecated = !t.After(p.now())
	}
	if len(sets) == 0 {
		sets = [][]corev1.NodeSelectorRequirement{nil}
	}
	out := make([]cloud.AMI, 0, len(sets))
	for _, reqs := range sets {
		out = append(out, cloud.AMI{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch,
			CreationDate: aws.ToString(im.CreationDate), Deprecated: deprecated, Requirements: reqs, Joiner: joinerBuilt(im.Tags)})
	}
	return out
}

// joinerBuilt reports whether an image carries joiner.io/ami=true (the tag
// packaging/packer sets). EC2 shows an image's tags only to the account
// that tagged it: a Joiner AMI shared from another account reads as stock.
func joinerBuilt(tags []ec2types.Tag) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == karpv1.TagJoinerAMI {
			return strings.EqualFold(strings.TrimSpace(aws.ToString(t.Value)), "true")
		}
	}
	return false
}

// newestPerRequirements keeps the best image per requirement set (by
// Karpenter's order: not deprecated, then newest, then the greatest name)
// and sorts them newest first, then by ID, then by requirements.
func newestPerRequirements(found []cloud.AMI) []cloud.AMI {
	best := map[string]cloud.AMI{}
	for _, a := range found {
		k := requirementsKey(a)
		if b, ok := best[k]; !ok || compareAMIs(a, b) < 0 {
			best[k] = a
		}
	}
	out := slices.Collect(maps.Values(best))
	slices.SortFunc(out, func(a, b cloud.AMI) int {
		return cmp.Or(creationTime(b).Compare(creationTime(a)), cmp.Compare(a.ID, b.ID), cmp.Compare(requirementsKey(a), requirementsKey(b)))
	})
	return out
}

// compareAMIs is negative when a is the better image of the two.
func compareAMIs(a, b cloud.AMI) int {
	if a.Deprecated != b.Deprecated {
		if a.Deprecated {
			return 1
		}
		return -1
	}
	return cmp.Or(creationTime(b).Compare(creationTime(a)), cmp.Compare(b.Name, a.Name))
}

// creationTime is the image's creation date, the zero time when EC2 gave
// none (such images rank last).
func creationTime(a cloud.AMI) time.Time {
	t, _ := time.Parse(time.RFC3339, a.CreationDate)
	return t
}

// requirementsKey identifies an AMI's requirement set, values as a set.
func requirementsKey(a cloud.AMI) string {
	var b strings.Builder
	for _, r := range a.NodeSelectorRequirements() {
		fmt.Fprintf(&b, "%s %s %s;", r.Key, r.Operator, strings.Join(slices.Sorted(slices.Values(r.Values)), ","))
	}
	return b.String()
}
