package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	"github.com/mitchellh/hashstructure/v2"
	"go.uber.org/zap"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// IAMAPI is the part of IAM the provider calls: the instance profiles of
// classes that name a role (*iam.Client implements it).
type IAMAPI interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

// InstanceProfilePath is the IAM path of the instance profiles made for a
// class, Karpenter's: /karpenter/<region>/<cluster>/<class UID>/. Deleting
// the class deletes every profile under it (Karpenter's included).
func InstanceProfilePath(region, cluster string, nc *awsv1.EC2NodeClass) string {
	return "/" + strings.Join([]string{karpv1.InstanceProfilePathRoot, region, cluster, string(nc.UID)}, "/") + "/"
}

// InstanceProfileName is the name of the instance profile Joiner makes for
// a class and its role: <cluster>_<hash of region, class, UID and role>, as
// Karpenter's <cluster>_<number>. A new role gets a new profile, so
// running nodes keep the role they were launched with (the role is in the
// drift hash: they are replaced) rather than having it swapped under them.
func InstanceProfileName(cluster, region string, nc *awsv1.EC2NodeClass, role string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{region, nc.Name, string(nc.UID), role}, "\x00")))
	return cluster + "_" + hex.EncodeToString(sum[:8])
}

// instanceProfileTags are Karpenter's tags of the profiles it makes (its
// v1 policy's conditions): the class's tags, kubernetes.io/cluster/<c>,
// eks:eks-cluster-name, karpenter.k8s.aws/ec2nodeclass and
// topology.kubernetes.io/region.
func (p *Provider) instanceProfileTags(nc *awsv1.EC2NodeClass) []iamtypes.Tag {
	tags := withTags(nc.Spec.Tags, map[string]string{karpv1.TagClusterPrefix + p.cluster: "owned", karpv1.TagEKSClusterName: p.cluster,
		karpv1.TagNodeClass: nc.Name, karpv1.LabelRegion: p.region})
	out := make([]iamtypes.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// roleName is a role's name without its path (AddRoleToInstanceProfile
// takes names only, as Karpenter strips them).
func roleName(role string) string { return role[strings.LastIndexByte(role, '/')+1:] }

// iamError is an IAM error as its code and message (stable across
// retries, unlike the SDK's text with request IDs), wrapping the
// classified error.
type iamError struct {
	op      string
	code    string
	message string
	err     error
}

func (e *iamError) Error() string {
	if e.code == "" {
		return e.op + ": " + e.err.Error()
	}
	return e.op + ": " + e.code + ": " + e.message
}

func (e *iamError) Unwrap() error { return e.err }

func wrapIAM(op string, err error) error {
	e := &iamError{op: op, err: classify(err)}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.code, e.message = ae.ErrorCode(), ae.ErrorMessage()
	}
	return e
}

// resolveInstanceProfile returns the instance profile a class launches
// with: spec.instanceProfile as given (Karpenter does not check it), or
// for spec.role the class's profile holding the role, as Karpenter's
// instance profile reconciler keeps it: the profile in the class's status
// while it holds the role, whatever its path (Karpenter's before v1.7 are
// CLUSTER_<number> at "/"), else Joiner's profile for the role, created
// (tagged, at the class's path) when missing, its role set (another role
// is removed first: a profile holds one). An error is the IAM call that
// failed; the status's profile is returned with it, so the status keeps
// it.
func (p *Provider) resolveInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if ip := nc.Spec.InstanceProfile; ip != nil && *ip != "" {
		return *ip, nil
	}
	if nc.Spec.Role == "" {
		return "", fmt.Errorf("spec.role, spec.instanceProfile: %w", cloud.ErrNoRole)
	}
	if p.iam == nil {
		return "", fmt.Errorf("spec.role %s: no IAM client to manage its instance profile", nc.Spec.Role)
	}
	role, path := roleName(nc.Spec.Role), InstanceProfilePath(p.region, p.cluster, nc)
	if cur := nc.Status.InstanceProfile; cur != "" {
		prof, err := p.instanceProfile(ctx, cur)
		switch {
		case err == nil && profileRole(prof) == role:
			return cur, nil
		case err != nil && !errors.Is(err, cloud.ErrNotFound):
			return cur, fmt.Errorf("spec.role %s: %w", nc.Spec.Role, err)
		}
	}
	name := InstanceProfileName(p.cluster, p.region, nc, role)
	if err := p.ensureInstanceProfile(ctx, nc, name, path, role); err != nil {
		return nc.Status.InstanceProfile, fmt.Errorf("spec.role %s: instance profile %s: %w", nc.Spec.Role, name, err)
	}
	return name, nil
}

func (p *Provider) instanceProfile(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, wrapIAM("getting instance profile "+name, err)
	}
	return out.InstanceProfile, nil
}

// profileRole is the profile's role ("" when it has none).
func profileRole(prof *iamtypes.InstanceProfile) string {
	if len(prof.Roles) == 0 {
		return ""
	}
	return aws.ToString(prof.Roles[0].RoleName)
}

// ensureInstanceProfile makes sure profile name exists at path and holds
// role.
func (p *Provider) ensureInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass, name, path, role string) error {
	prof, err := p.instanceProfile(ctx, name)
	if errors.Is(err, cloud.ErrNotFound) {
		out, cerr := p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
			Path: aws.String(path), Tags: p.instanceProfileTags(nc)})
		var ae smithy.APIError
		switch {
		case errors.As(cerr, &ae) && ae.ErrorCode() == "EntityAlreadyExists":
			prof, err = p.instanceProfile(ctx, name)
		case cerr != nil:
			return wrapIAM("creating", cerr)
		default:
			prof, err = out.InstanceProfile, nil
			p.log.Info("created instance profile", zap.String("instance-profile", name), zap.String("ec2nodeclass", nc.Name))
		}
	}
	if err != nil {
		return err
	}
	cur := profileRole(prof)
	if cur == role {
		return nil
	}
	if cur != "" {
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: aws.String(cur)}); err != nil && !errors.Is(classify(err), cloud.ErrNotFound) {
			return wrapIAM("removing role "+cur, err)
		}
	}
	if _, err := p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		return wrapIAM("adding role "+role, err)
	}
	return nil
}

// FinalizeNodeClass deletes what the cloud keeps for a class being
// deleted, as Karpenter's EC2NodeClass termination does: the instance
// profiles at the class's path and the profile Karpenter made for it
// before v1.7 (LegacyInstanceProfileName; their role removed first), then
// the class's launch templates. In an isolated VPC (no IAM endpoint) the
// profiles are left, as Karpenter leaves them. Call it once no NodeClaim
// uses the class.
func (p *Provider) FinalizeNodeClass(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	if p.iam != nil && !p.opts.IsolatedVPC {
		if err := p.deleteClassProfiles(ctx, nc); err != nil {
			return fmt.Errorf("ec2nodeclass %s: %w", nc.Name, err)
		}
	}
	return p.DeleteLaunchTemplatesFor(ctx, nc.Name)
}

// deleteClassProfiles deletes the profiles at the class's path and its
// legacy profile.
func (p *Provider) deleteClassProfiles(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	path := InstanceProfilePath(p.region, p.cluster, nc)
	pages := iam.NewListInstanceProfilesPaginator(p.iam, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(path)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return wrapIAM("listing instance profiles at "+path, err)
		}
		for i := range page.InstanceProfiles {
			if err := p.deleteInstanceProfile(ctx, &page.InstanceProfiles[i]); err != nil {
				return err
			}
		}
	}
	legacy := LegacyInstanceProfileName(p.cluster, p.region, nc.Name)
	if !validProfileName(legacy) {
		p.log.Debug("skipping legacy instance profile clean-up: its name is not a valid IAM name", zap.String("instance-profile", legacy))
		return nil
	}
	prof, err := p.instanceProfile(ctx, legacy)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	err = p.deleteInstanceProfile(ctx, prof)
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "AccessDenied" {
		// Joiner's policy manages profiles at /karpenter/ only; Karpenter's
		// v1 policy (any path, tagged for the cluster) allows this.
		p.log.Warn("not allowed to delete the instance profile Karpenter made for the class before v1.7; leaving it",
			zap.String("instance-profile", legacy), zap.String("ec2nodeclass", nc.Name), zap.Error(err))
		return nil
	}
	return err
}

// ClusterInstanceProfiles lists the instance profiles made for the
// cluster's classes, by Joiner or Karpenter: those at the IAM path
// /karpenter/<region>/<cluster>/, as Karpenter's instance profile garbage
// collection lists them. In an isolated VPC (no IAM endpoint), or without
// an IAM client, there are none to look at.
func (p *Provider) ClusterInstanceProfiles(ctx context.Context) ([]cloud.InstanceProfile, error) {
	if p.iam == nil || p.opts.IsolatedVPC {
		return nil, nil
	}
	path := "/" + strings.Join([]string{karpv1.InstanceProfilePathRoot, p.region, p.cluster}, "/") + "/"
	var out []cloud.InstanceProfile
	pages := iam.NewListInstanceProfilesPaginator(p.iam, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(path)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, wrapIAM("listing instance profiles at "+path, err)
		}
		for _, ip := range page.InstanceProfiles {
			out = append(out, cloud.InstanceProfile{Name: aws.ToString(ip.InstanceProfileName), Path: aws.ToString(ip.Path)})
		}
	}
	return out, nil
}

// DeleteInstanceProfile removes the profile's role and deletes it (one
// already gone is not an error).
func (p *Provider) DeleteInstanceProfile(ctx context.Context, name string) error {
	if p.iam == nil {
		return fmt.Errorf("instance profile %s: no IAM client", name)
	}
	prof, err := p.instanceProfile(ctx, name)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return p.deleteInstanceProfile(ctx, prof)
}

// LegacyInstanceProfileName is the name Karpenter before v1.7 gave a
// class's instance profile (at path "/"): <cluster>_<hashstructure v2
// hash of region and class name>.
func LegacyInstanceProfileName(cluster, region, class string) string {
	h, err := hashstructure.Hash(region+class, hashstructure.FormatV2, nil)
	if err != nil { // a string always hashes
		return ""
	}
	return fmt.Sprintf("%s_%d", cluster, h)
}

// profileNameRE is IAM's pattern for an instance profile name.
var profileNameRE = regexp.MustCompile(`^[\w+=,.@-]+$`)

// validProfileName reports whether IAM accepts name as an instance
// profile's (1 to 128 of letters, digits and +=,.@_-).
func validProfileName(name string) bool {
	return len(name) > 0 && len(name) <= 128 && profileNameRE.MatchString(name)
}

// deleteInstanceProfile removes the profile's role and deletes it; a
// profile or role already gone is not an error.
func (p *Provider) deleteInstanceProfile(ctx context.Context, prof *iamtypes.InstanceProfile) error {
	name := aws.ToString(prof.InstanceProfileName)
	if role := profileRole(prof); role != "" {
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil && !errors.Is(classify(err), cloud.ErrNotFound) {
			return wrapIAM("removing role "+role+" from instance profile "+name, err)
		}
	}
	if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil &&
		!errors.Is(classify(err), cloud.ErrNotFound) {
		return wrapIAM("deleting instance profile "+name, err)
	}
	p.log.Info("deleted instance profile", zap.String("instance-profile", name))
	return nil
}
