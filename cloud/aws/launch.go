package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/internal/logging"
)

// MaxInstanceTypes is the most instance types one CreateFleet call
// offers (Karpenter's maxInstanceTypes): the cheapest ones, each with an
// override per zone it has a candidate in.
const MaxInstanceTypes = 60

// maxFleetCalls bounds the fallback rounds of one launch.
const maxFleetCalls = 8

// karpv1.TagLaunchTemplateCluster tags Joiner's launch templates with the cluster.

// karpv1.LaunchTemplateNamePrefix starts the name of every Joiner launch template.

type ltEntry struct {
	id       string
	name     string
	lastUsed time.Time
}

// Launch launches one instance for spec with CreateFleet (type instant).
//
// The first call carries the spec's candidates as Karpenter's filters and
// capacity type choice leave them (chooseLaunch: reserved when a reserved
// candidate remains, else spot, else on-demand, of the 60 cheapest types)
// with spec.ClientToken, so retrying a spec sends EC2 the same request and
// gets the same instance. When every offering of
// a call fails with a capacity error, those offerings are marked
// unavailable for the TTL and the launch retries with the remaining ones
// under a derived token (<token>-f<n>), which is again deterministic for
// the same spec.
func (p *Provider) Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.Instance, error) {
	spec := req.Spec
	clientToken := cloud.ClientToken(p.cluster, req.LaunchID, req.Attempt)
	if err := validateRequest(req); err != nil {
		return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: %w", spec.NodeClaim, err)
	}
	log := p.log.With(logging.NodeClaim(spec.NodeClaim), zap.String("launch-id", req.LaunchID),
		zap.Int("attempt", req.Attempt))
	failed := map[cloud.OfferingKey]bool{}
	var iceKeys []cloud.OfferingKey
	spotDown := false
	retriedLT := false
	for call := 0; call < maxFleetCalls; call++ {
		var remaining []cloud.Candidate
		for _, c := range spec.Candidates {
			if _, ok := spec.Subnets[c.Zone]; ok && !failed[c.Key()] {
				remaining = append(remaining, c)
			}
		}
		if len(remaining) == 0 {
			break
		}
		token := clientToken
		if call > 0 {
			token = derivedToken(clientToken, call)
		}
		capType, overrides := p.chooseLaunch(remaining, spec.MinValues)
		inst, fleetErrs, err := p.createFleet(ctx, req, token, capType, overrides)
		if err != nil {
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == codeLaunchTemplateNotFound && !retriedLT {
				retriedLT = true
				p.forgetLaunchTemplates()
				call--
				continue
			}
			return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: %w", spec.NodeClaim, err)
		}
		for _, fe := range fleetErrs {
			if fe.code == codeNoFreeAddresses && fe.subnet != "" {
				p.noAddrs.mark(fe.subnet)
			}
			if isCapacityCode(fe.code) {
				p.markUnavailable(fe)
				failed[fe.key] = true
				iceKeys = append(iceKeys, fe.key)
			}
			if fe.code == codeSpotServiceLinkedRole && !spotDown {
				// EC2 may not create the spot service-linked role for this
				// account: no spot launch can succeed until someone does.
				// Every spot offering is out for the TTL (Karpenter's
				// MarkCapacityTypeUnavailable) and this launch goes on
				// without spot.
				spotDown = true
				p.unavailable.markCapacityType(karpv1.CapacityTypeSpot)
				log.Warn("spot launches refused: EC2 may not create the spot service-linked role (AWSServiceRoleForEC2Spot); "+
					"spot offerings are unavailable for a while", zap.String("code", fe.code), zap.String("message", fe.message))
				for _, c := range remaining {
					if c.CapacityType == karpv1.CapacityTypeSpot && !failed[c.Key()] {
						failed[c.Key()] = true
						iceKeys = append(iceKeys, c.Key())
					}
				}
			}
		}
		if inst != nil {
			log.Info("launched instance", zap.String("instance-id", inst.ID),
				logging.InstanceType(inst.InstanceType), zap.String("zone", inst.Zone),
				zap.String("capacity-type", inst.CapacityType))
			return *inst, nil
		}
		var other []string
		profileUnknown, throttled := true, true
		for _, fe := range fleetErrs {
			if isCapacityCode(fe.code) || fe.code == codeSpotServiceLinkedRole {
				continue
			}
			other = append(other, fe.key.String()+": "+fe.code+": "+fe.message)
			profileUnknown = profileUnknown && isInstanceProfileNotFound(fe.code, fe.message)
			throttled = throttled && slices.Contains(retryableCodes, fe.code)
		}
		if len(other) > 0 && throttled {
			// EC2 throttled or failed the launches (RequestLimitExceeded,
			// InternalError as fleet errors): nothing was made and the
			// same token would get the same answer back, so the attempt
			// ends and a new one follows after the backoff (Karpenter
			// retries such a launch; it marks no offering or reservation).
			return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: CreateFleet: %v: %w", spec.NodeClaim, other, cloud.ErrRejected)
		}
		if len(other) > 0 && profileUnknown {
			// EC2 does not know the instance profile yet: IAM takes seconds
			// to propagate one just made (Karpenter requeues on this). No
			// instance was made, so a new attempt after the launcher's
			// backoff is safe, and it succeeds once EC2 sees the profile.
			return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: instance profile %q unknown to EC2 (not yet propagated by IAM, or missing): CreateFleet: %v: %w",
				spec.NodeClaim, spec.InstanceProfile, other, cloud.ErrRejected)
		}
		if len(other) > 0 {
			return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: CreateFleet: %v: %w", spec.NodeClaim, other, cloud.ErrInvalidSpec)
		}
		if len(fleetErrs) == 0 { // no instance and no reason: treat as transient
			return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: CreateFleet returned no instance and no error: %w",
				spec.NodeClaim, cloud.ErrRetryable)
		}
		log.Info("offerings out of capacity, retrying with the rest", zap.Int("failed", len(fleetErrs)))
	}
	return cloud.Instance{}, fmt.Errorf("launching nodeclaim %s: %w", spec.NodeClaim, &cloud.InsufficientCapacityError{Offerings: iceKeys})
}

// validateRequest rejects a request EC2 would refuse or that would break
// Joiner's bookkeeping: restricted tag keys (the rule EC2NodeClass
// validation uses), no launch ID or attempt, no candidates or subnets.
func validateRequest(req cloud.LaunchRequest) error {
	spec := req.Spec
	for _, k := range slices.Sorted(maps.Keys(spec.Tags)) {
		if why := awsv1.RestrictedTag(k); why != "" {
			return fmt.Errorf("tags[%q]: %s: %w", k, why, cloud.ErrInvalidSpec)
		}
	}
	switch {
	case req.LaunchID == "" || req.Attempt < 1:
		return fmt.Errorf("launchID %q, attempt %d: want a launch ID and an attempt >= 1: %w", req.LaunchID, req.Attempt, cloud.ErrInvalidSpec)
	case len(spec.Candidates) == 0:
		return fmt.Errorf("candidates: empty: %w", cloud.ErrInvalidSpec)
	case len(spec.Subnets) == 0:
		return fmt.Errorf("subnets: empty: %w", cloud.ErrInvalidSpec)
	case spec.NodeClaim == "":
		return fmt.Errorf("nodeClaim: required: %w", cloud.ErrInvalidSpec)
	}
	for i, c := range spec.Candidates {
		if c.ImageID == "" || c.InstanceType == "" || c.Zone == "" {
			return fmt.Errorf("candidates[%d]: instanceType, zone and imageID are required: %w", i, cloud.ErrInvalidSpec)
		}
		if c.UserDataVariant < 0 || c.UserDataVariant > len(spec.UserDataVariants) {
			return fmt.Errorf("candidates[%d].userDataVariant %d: want 0 to %d: %w", i, c.UserDataVariant, len(spec.UserDataVariants), cloud.ErrInvalidSpec)
		}
		switch c.CapacityType {
		case karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand:
		case karpv1.CapacityTypeReserved:
			if c.ReservationID == "" {
				return fmt.Errorf("candidates[%d].reservationID: required for capacity type reserved: %w", i, cloud.ErrInvalidSpec)
			}
		default:
			return fmt.Errorf("candidates[%d].capacityType %q: want spot, on-demand or reserved: %w", i, c.CapacityType, cloud.ErrInvalidSpec)
		}
	}
	return nil
}

// derivedToken is the token of fallback call n of a launch.
func derivedToken(token string, n int) string {
	suffix := "-f" + strconv.Itoa(n)
	if len(token)+len(suffix) <= 64 {
		return token + suffix
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:48] + suffix
}

type fleetError struct {
	key           cloud.OfferingKey
	subnet        string
	code, message string
	// reservation is the capacity reservation of a reserved override.
	reservation string
}

// instanceTags are the tags of a launch's instance, volumes and fleet:
// templateTags, the NodeClaim (Name and karpenter.sh/nodeclaim, which
// Karpenter's tagging controller adds after launch; Name only when the
// class sets none, as that controller leaves a Name tag alone) and
// Joiner's launch ID and attempt.
func (p *Provider) instanceTags(req cloud.LaunchRequest) map[string]string {
	spec := req.Spec
	tags := p.templateTags(spec)
	if _, own := spec.Tags[karpv1.TagName]; !own { // a class's own Name wins, as in Karpenter
		tags[karpv1.TagName] = spec.NodeClaim
	}
	tags[karpv1.TagNodeClaim] = spec.NodeClaim
	tags[karpv1.TagLaunchID] = req.LaunchID
	tags[karpv1.TagAttempt] = strconv.Itoa(req.Attempt)
	return tags
}

// templateTags are the tags Karpenter v1.14 puts on everything a launch
// creates (utils.GetTags), which its v1 controller policy requires: the
// NodeClass's tags, then kubernetes.io/cluster/<cluster>=owned,
// eks:eks-cluster-name, karpenter.sh/nodepool and
// karpenter.k8s.aws/ec2nodeclass (both set even when empty, as Karpenter
// sets them). They tag launch templates and the network interfaces and
// spot requests those create; a launch template serves one NodePool
// (the pool is part of its name), so nothing of one launch goes here.
func (p *Provider) templateTags(spec cloud.LaunchSpec) map[string]string {
	return withTags(spec.Tags, map[string]string{karpv1.TagClusterPrefix + p.cluster: "owned", karpv1.TagEKSClusterName: p.cluster,
		karpv1.TagNodePool: spec.NodePool, karpv1.TagNodeClass: spec.NodeClass})
}

// withTags is a new map of base's tags and set's (set's win).
func withTags(base, set map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(set))
	maps.Copy(out, base)
	maps.Copy(out, set)
	return out
}

// EC2Tags are tags as EC2 takes them, in key order.
func EC2Tags(tags map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func (p *Provider) createFleet(ctx context.Context, req cloud.LaunchRequest, token, capType string,
	overrides []cloud.Candidate) (*cloud.Instance, []fleetError, error) {
	spec := req.Spec
	// One launch template per image, EFA count and user data (Karpenter
	// groups types by the EFA interfaces they get and their max pods);
	// overrides keep the price order.
	type ltKey struct {
		image    string
		efa      int32
		res      reservationTarget
		userData int
	}
	var keys []ltKey
	byKey := map[ltKey][]cloud.Candidate{}
	for _, c := range overrides {
		k := ltKey{c.ImageID, c.EFACount, targetOf(c), c.UserDataVariant}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for _, k := range keys {
		variant := spec
		variant.UserData = spec.UserDataOf(byKey[k][0])
		variant.UserDataVariants = nil
		lt, err := p.ensureLaunchTemplate(ctx, variant, k.image, k.efa, k.res, capType)
		if err != nil {
			return nil, nil, err
		}
		cfg := ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
		}
		for _, c := range byKey[k] {
			cfg.Overrides = append(cfg.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(c.InstanceType), SubnetId: aws.String(spec.Subnets[c.Zone]),
				AvailabilityZone: aws.String(c.Zone), ImageId: aws.String(c.ImageID), Priority: aws.Float64(c.Price),
			})
		}
		configs = append(configs, cfg)
	}
	tags := EC2Tags(p.instanceTags(req))
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(token),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capType)},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
	}
	if spec.Context != "" {
		in.Context = aws.String(spec.Context)
	}
	if capType == "spot" {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if capType == karpv1.CapacityTypeReserved {
		applyReservedFleet(in, targetOf(overrides[0]))
	}
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == codeLaunchTemplateNotFound {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("CreateFleet: %w", classify(err))
	}
	var errs []fleetError
	for _, fe := range out.Errors {
		k := cloud.OfferingKey{CapacityType: capType}
		if o := fe.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			k.InstanceType = string(o.Overrides.InstanceType)
			k.Zone = aws.ToString(o.Overrides.AvailabilityZone)
		}
		fErr := fleetError{key: k, code: aws.ToString(fe.ErrorCode), message: aws.ToString(fe.ErrorMessage)}
		if o := fe.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			fErr.subnet = aws.ToString(o.Overrides.SubnetId)
		}
		fErr.reservation = reservationOf(overrides, k).ReservationID
		errs = append(errs, fErr)
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		inst := &cloud.Instance{ID: fi.InstanceIds[0], InstanceType: string(fi.InstanceType), CapacityType: capType,
			State: "pending", LaunchTime: p.now(), Tags: p.instanceTags(req)}
		if o := fi.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			inst.Zone = aws.ToString(o.Overrides.AvailabilityZone)
			inst.SubnetID = aws.ToString(o.Overrides.SubnetId)
			inst.ImageID = aws.ToString(o.Overrides.ImageId)
			if inst.InstanceType == "" {
				inst.InstanceType = string(o.Overrides.InstanceType)
			}
		}
		p.noteReserved(inst, overrides)
		return inst, errs, nil
	}
	return nil, errs, nil
}

// launchTemplateRendering numbers the way launch template data is written
// from its inputs; it is part of the name, so a change of rendering makes
// new templates instead of reusing ones written the old way. 2: interfaces
// always in NetworkInterfaces (security groups there, as Karpenter writes
// them), capacity reservation preference none, placement, CPU options,
// metadata IPv6. 3: Karpenter's tags (eks:eks-cluster-name,
// karpenter.sh/nodepool: one template per pool) and, for spot launches,
// spot request tags (one template per capacity type).
const launchTemplateRendering = 3

// launchTemplateInput is what a launch template is made of; its hash names
// the template, so equal inputs share one.
type launchTemplateInput struct {
	Rendering                int                         `json:"rendering,omitempty"`
	Cluster                  string                      `json:"cluster"`
	NodeClass                string                      `json:"nodeClass"`
	ImageID                  string                      `json:"imageID"`
	UserData                 []byte                      `json:"userData"`
	SecurityGroupIDs         []string                    `json:"securityGroupIDs"`
	BlockDevices             []*awsv1.BlockDeviceMapping `json:"blockDevices"`
	MetadataOptions          *awsv1.MetadataOptions      `json:"metadataOptions"`
	InstanceProfile          string                      `json:"instanceProfile"`
	DetailedMonitoring       bool                        `json:"detailedMonitoring"`
	Tags                     map[string]string           `json:"tags"`
	AssociatePublicIPAddress *bool                       `json:"associatePublicIPAddress,omitempty"`
	IPPrefixCount            *int32                      `json:"ipPrefixCount,omitempty"`
	NetworkInterfaces        []*awsv1.NetworkInterface   `json:"networkInterfaces,omitempty"`
	ConnectionTracking       *awsv1.ConnectionTracking   `json:"connectionTracking,omitempty"`
	CPUOptions               *awsv1.CPUOptions           `json:"cpuOptions,omitempty"`
	ClusterIPv6              bool                        `json:"clusterIPv6,omitempty"`
	PlacementGroupID         string                      `json:"placementGroupID,omitempty"`
	PlacementGroupPartition  int32                       `json:"placementGroupPartition,omitempty"`
	EFACount                 int32                       `json:"efaCount,omitempty"`
	// The capacity reservation launched into (one template per
	// reservation, as Karpenter makes them).
	CapacityReservationID   string `json:"capacityReservationID,omitempty"`
	CapacityReservationType string `json:"capacityReservationType,omitempty"`
	Interruptible           bool   `json:"interruptible,omitempty"`
	// NodePool and CapacityType: Karpenter's templates are per pool (its
	// tag) and capacity type (spot request tags).
	NodePool     string `json:"nodePool,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	// OpenReservations: written with the ReservedCapacity gate off (no
	// capacity reservation preference).
	OpenReservations bool `json:"openReservations,omitempty"`
}

// LaunchTemplateName is the name of cluster's launch template for spec,
// image and EFA interface count.
func LaunchTemplateName(cluster string, spec cloud.LaunchSpec, image string, efa int32) string {
	return launchTemplateName(cluster, spec, image, efa, reservationTarget{}, karpv1.CapacityTypeOnDemand, false)
}

// launchTemplateName is LaunchTemplateName for a launch into reservation
// res (zero: none); open: the ReservedCapacity gate is off, so the
// template sets no capacity reservation preference.
func launchTemplateName(cluster string, spec cloud.LaunchSpec, image string, efa int32, res reservationTarget, capType string, open bool) string {
	sgs := slices.Sorted(slices.Values(spec.SecurityGroupIDs))
	b, _ := json.Marshal(launchTemplateInput{Rendering: launchTemplateRendering, Cluster: cluster, NodeClass: spec.NodeClass,
		ImageID: image, UserData: spec.UserData, SecurityGroupIDs: sgs, BlockDevices: spec.BlockDevices,
		MetadataOptions: spec.MetadataOptions, InstanceProfile: spec.InstanceProfile,
		DetailedMonitoring: spec.DetailedMonitoring, Tags: spec.Tags,
		AssociatePublicIPAddress: spec.AssociatePublicIPAddress, IPPrefixCount: spec.IPPrefixCount,
		NetworkInterfaces: spec.NetworkInterfaces, ConnectionTracking: spec.ConnectionTracking, CPUOptions: spec.CPUOptions,
		ClusterIPv6: spec.ClusterIPv6, PlacementGroupID: spec.PlacementGroupID, PlacementGroupPartition: spec.PlacementGroupPartition,
		EFACount: efa, CapacityReservationID: res.ID, CapacityReservationType: res.Type, Interruptible: res.Interruptible,
		NodePool: spec.NodePool, CapacityType: capType, OpenReservations: open})
	sum := sha256.Sum256(b)
	return karpv1.LaunchTemplateNamePrefix + hex.EncodeToString(sum[:12])
}

func (p *Provider) forgetLaunchTemplates() {
	p.mu.Lock()
	clear(p.templates)
	p.mu.Unlock()
}

// ensureLaunchTemplate returns the name of the launch template for spec
// and image: from the cache, else found by name in EC2, else created.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, spec cloud.LaunchSpec, image string, efa int32, res reservationTarget,
	capType string) (string, error) {
	name := launchTemplateName(p.cluster, spec, image, efa, res, capType, p.opts.NoReservedCapacity)
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	p.mu.Lock()
	e, ok := p.templates[name]
	if ok {
		e.lastUsed = p.now()
	}
	p.mu.Unlock()
	if ok {
		return name, nil
	}
	id, err := p.findLaunchTemplate(ctx, name)
	if err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return "", err
	}
	if errors.Is(err, cloud.ErrNotFound) {
		if id, err = p.createLaunchTemplate(ctx, spec, name, image, efa, res, capType); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	p.templates[name] = &ltEntry{id: id, name: name, lastUsed: p.now()}
	p.mu.Unlock()
	return name, nil
}

func (p *Provider) findLaunchTemplate(ctx context.Context, name string) (string, error) {
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		return "", fmt.Errorf("describing launch template %s: %w", name, classify(err))
	}
	for _, lt := range out.LaunchTemplates {
		if aws.ToString(lt.LaunchTemplateName) == name {
			return aws.ToString(lt.LaunchTemplateId), nil
		}
	}
	return "", fmt.Errorf("launch template %s: %w", name, cloud.ErrNotFound)
}

func (p *Provider) createLaunchTemplate(ctx context.Context, spec cloud.LaunchSpec, name, image string, efa int32, res reservationTarget,
	capType string) (string, error) {
	data := LaunchTemplateData(spec, image, efa, p.region)
	applyReservation(data, res)
	if p.opts.NoReservedCapacity && res.ID == "" {
		// Karpenter's ReservedCapacity gate off: no preference, so
		// launches may use open reservations as EC2's default does.
		data.CapacityReservationSpecification = nil
	}
	data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{
		{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: EC2Tags(p.templateTags(spec))},
	}
	// Spot requests are tagged like the rest (the v1 policy's condition);
	// EC2 refuses spot request tags on launches that make no spot request.
	if capType == karpv1.CapacityTypeSpot {
		data.TagSpecifications = append(data.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{
			ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: EC2Tags(p.templateTags(spec))})
	}
	ltTags := p.templateTags(spec)
	ltTags[karpv1.TagLaunchTemplateCluster] = p.cluster
	// Measured before EC2 answers, so an oversized rendering shows too.
	p.userDataBytes.WithLabelValues(spec.NodeClass).Set(float64(len(spec.UserData)))
	out, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: EC2Tags(ltTags)}},
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException" {
			return p.findLaunchTemplate(ctx, name)
		}
		if isUserDataTooLarge(err) {
			// The same user data fails the same way: the class or pool
			// must render less (Karpenter's UserDataTooLarge).
			return "", fmt.Errorf("creating launch template %s: user data of %d bytes exceeds EC2's limit of %d bytes: %w: %w",
				name, len(spec.UserData), maxUserData, cloud.ErrInvalidSpec, err)
		}
		return "", fmt.Errorf("creating launch template %s: %w", name, classify(err))
	}
	p.log.Info("created launch template", zap.String("launch-template", name))
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId), nil
}

// LaunchTemplateData is the launch template data of spec for one image and
// EFA interface count in region, written as Karpenter v1.14 writes it
// (pkg/providers/launchtemplate): the interfaces in NetworkInterfaces with
// the security groups on them (never SecurityGroupIds beside them, which
// EC2 refuses), the capacity reservation preference none (Karpenter's
// reservedCapacity gate, on by default, keeps spot and on-demand launches
// out of open reservations; a reserved launch's template targets its
// reservation instead, see applyReservation), the placement group, CPU options and metadata
// options. Tag specifications are the caller's.
func LaunchTemplateData(spec cloud.LaunchSpec, image string, efa int32, region string) *ec2types.RequestLaunchTemplateData {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:           aws.String(image),
		NetworkInterfaces: networkInterfaces(spec, efa),
		Monitoring:        &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(spec.DetailedMonitoring)},
		MetadataOptions:   metadataOptions(spec.MetadataOptions, region),
		CpuOptions:        cpuOptions(spec.CPUOptions),
		Placement:         &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.TenancyDefault},
	}
	applyReservation(data, reservationTarget{})
	if spec.PlacementGroupID != "" {
		data.Placement.GroupId = aws.String(spec.PlacementGroupID)
		if spec.PlacementGroupPartition != 0 {
			data.Placement.PartitionNumber = aws.Int32(spec.PlacementGroupPartition)
		}
	}
	if len(spec.UserData) > 0 {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString(spec.UserData))
	}
	if spec.InstanceProfile != "" {
		data.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(spec.InstanceProfile)}
	}
	for _, m := range spec.BlockDevices {
		if m == nil {
			continue
		}
		bd := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{DeleteOnTermination: e.DeleteOnTermination,
				Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID, VolumeInitializationRate: e.VolumeInitializationRate}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeSize != nil {
				gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
				ebs.VolumeSize = aws.Int32(int32(gib))
			}
			if e.VolumeType != nil {
				ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			bd.Ebs = ebs
		}
		data.BlockDeviceMappings = append(data.BlockDeviceMappings, bd)
	}
	return data
}

// networkInterfaces are Karpenter's interfaces of a launch: the class's
// networkInterfaces when set (EFA-only ones without prefixes, public IP,
// primary IPv6 or connection tracking, which EC2 refuses on them), else
// efa EFA interfaces (card i, device 0 on card 0 and 1 elsewhere), else
// one primary interface. Every interface carries the class's security
// groups; ipPrefixCount counts IPv4 prefixes, or IPv6 ones in an IPv6
// cluster, whose interfaces also get a primary IPv6 address.
func networkInterfaces(spec cloud.LaunchSpec, efa int32) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	ct := connectionTracking(spec.ConnectionTracking)
	v4Prefixes, v6Prefixes := spec.IPPrefixCount, (*int32)(nil)
	var primaryV6 *bool
	var v6Addresses *int32
	if spec.ClusterIPv6 {
		v4Prefixes, v6Prefixes = nil, spec.IPPrefixCount
		primaryV6, v6Addresses = aws.Bool(true), aws.Int32(1)
	}
	groups := func() []string { return slices.Clone(spec.SecurityGroupIDs) }
	var out []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
	switch {
	case len(spec.NetworkInterfaces) > 0:
		for _, ni := range spec.NetworkInterfaces {
			if ni == nil {
				continue
			}
			o := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(ni.NetworkCardIndex), DeviceIndex: aws.Int32(ni.DeviceIndex),
				InterfaceType: aws.String(string(ni.InterfaceType)), Groups: groups(),
			}
			if ni.InterfaceType != awsv1.InterfaceTypeEFAOnly {
				o.Ipv4PrefixCount, o.Ipv6PrefixCount = v4Prefixes, v6Prefixes
				o.AssociatePublicIpAddress = spec.AssociatePublicIPAddress
				o.PrimaryIpv6, o.Ipv6AddressCount = primaryV6, v6Addresses
				o.ConnectionTrackingSpecification = ct
			}
			out = append(out, o)
		}
	case efa > 0:
		for i := int32(0); i < efa; i++ {
			device := int32(1)
			if i == 0 {
				device = 0
			}
			out = append(out, ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(i), DeviceIndex: aws.Int32(device), InterfaceType: aws.String(string(ec2types.NetworkInterfaceTypeEfa)),
				Ipv4PrefixCount: v4Prefixes, Ipv6PrefixCount: v6Prefixes, Groups: groups(),
				AssociatePublicIpAddress: spec.AssociatePublicIPAddress, PrimaryIpv6: primaryV6, Ipv6AddressCount: v6Addresses,
				ConnectionTrackingSpecification: ct,
			})
		}
	default:
		out = append(out, ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: spec.AssociatePublicIPAddress,
			Ipv4PrefixCount: v4Prefixes, Ipv6PrefixCount: v6Prefixes, Groups: groups(),
			PrimaryIpv6: primaryV6, Ipv6AddressCount: v6Addresses, ConnectionTrackingSpecification: ct,
		})
	}
	return out
}

// connectionTracking is the class's connection tracking, nil when it sets
// no timeout.
func connectionTracking(c *awsv1.ConnectionTracking) *ec2types.ConnectionTrackingSpecificationRequest {
	if c == nil || (c.TCPEstablishedTimeout == nil && c.UDPStreamTimeout == nil && c.UDPTimeout == nil) {
		return nil
	}
	return &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: c.TCPEstablishedTimeout,
		UdpStreamTimeout: c.UDPStreamTimeout, UdpTimeout: c.UDPTimeout}
}

// cpuOptions sets nested virtualization when the class says enabled or
// disabled, else nothing.
func cpuOptions(c *awsv1.CPUOptions) *ec2types.LaunchTemplateCpuOptionsRequest {
	if c == nil || c.NestedVirtualization == nil {
		return nil
	}
	return &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*c.NestedVirtualization)}
}

// noIMDSIPv6Regions are the regions whose IMDS has no IPv6 endpoint:
// Karpenter leaves httpProtocolIPv6 out of the launch template there.
var noIMDSIPv6Regions = []string{"us-iso-east-1", "us-iso-west-1", "us-isob-east-1", "us-isob-west-1", "us-isof-south-1", "us-isof-east-1"}

// metadataOptions: the NodeClass's, defaulted as the CRD does (the IPv6
// endpoint as the class sets it, disabled when the class has no metadata
// options, never sent in regions without one), and instance metadata tags
// always disabled.
func metadataOptions(m *awsv1.MetadataOptions, region string) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled, HttpPutResponseHopLimit: aws.Int32(1),
		HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
	}
	if m == nil {
		// The AMI family's default metadata options, as Karpenter fills
		// them for a class without any (the CRD's defaults).
		if !slices.Contains(noIMDSIPv6Regions, region) {
			out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled
		}
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	if m.HTTPProtocolIPv6 != nil && !slices.Contains(noIMDSIPv6Regions, region) {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	return out
}

// HydrateLaunchTemplates adds the cluster's launch templates in EC2 (tag
// joiner.io/cluster) to the cache as used now, so that templates a previous
// leader created are deleted once unused for LaunchTemplateTTL.
func (p *Provider) HydrateLaunchTemplates(ctx context.Context) error {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("tag:" + karpv1.TagLaunchTemplateCluster), Values: []string{p.cluster}}},
		MaxResults: aws.Int32(launchTemplatePageSize),
	})
	now := p.now()
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing launch templates: %w", classify(err))
		}
		p.mu.Lock()
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			if _, ok := p.templates[name]; !ok {
				p.templates[name] = &ltEntry{id: aws.ToString(lt.LaunchTemplateId), name: name, lastUsed: now}
			}
		}
		p.mu.Unlock()
	}
	return nil
}

// launchTemplatePageSize: DescribeLaunchTemplates pages of up to 200 (its
// maximum, Karpenter's).
const launchTemplatePageSize = 200

// DeleteLaunchTemplatesFor deletes every launch template of a NodeClass
// (tag karpenter.k8s.aws/ec2nodeclass), e.g. when it is deleted: every
// page is listed first, then the templates are deleted, as Karpenter does.
func (p *Provider) DeleteLaunchTemplatesFor(ctx context.Context, nodeClass string) error {
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + karpv1.TagLaunchTemplateCluster), Values: []string{p.cluster}},
		{Name: aws.String("tag:" + karpv1.TagNodeClass), Values: []string{nodeClass}},
	}, MaxResults: aws.Int32(launchTemplatePageSize)})
	var names []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing launch templates of nodeclass %s: %w", nodeClass, classify(err))
		}
		for _, lt := range page.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
	}
	for _, name := range names {
		if _, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)}); err != nil &&
			!errors.Is(classify(err), cloud.ErrNotFound) {
			return fmt.Errorf("deleting launch template %s: %w", name, classify(err))
		}
		p.mu.Lock()
		delete(p.templates, name)
		p.mu.Unlock()
	}
	p.userDataBytes.DeleteLabelValues(nodeClass)
	return nil
}

// LaunchTemplates returns the names of the launch templates in the cache.
func (p *Provider) LaunchTemplates() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.templates))
}

// DeleteUnusedLaunchTemplates deletes the launch templates this provider
// has not used for LaunchTemplateTTL, in EC2 and in its cache, and returns
// their names.
func (p *Provider) DeleteUnusedLaunchTemplates(ctx context.Context) ([]string, error) {
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	cutoff := p.now().Add(-p.opts.LaunchTemplateTTL)
	p.mu.Lock()
	var stale []string
	for name, e := range p.templates {
		if e.lastUsed.Before(cutoff) {
			stale = append(stale, name)
		}
	}
	p.mu.Unlock()
	sort.Strings(stale)
	var deleted []string
	for _, name := range stale {
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !errors.Is(classify(err), cloud.ErrNotFound) {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, classify(err))
		}
		p.mu.Lock()
		delete(p.templates, name)
		p.mu.Unlock()
		deleted = append(deleted, name)
	}
	return deleted, nil
}
