package karpenterstate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/userdata"
)

// The resources Seed writes.
var (
	NodePoolsGVR      = schema.GroupVersionResource{Group: karpv1.Group, Version: "v1", Resource: "nodepools"}
	NodeClaimsGVR     = schema.GroupVersionResource{Group: karpv1.Group, Version: "v1", Resource: "nodeclaims"}
	EC2NodeClassesGVR = schema.GroupVersionResource{Group: awsv1.Group, Version: "v1", Resource: "ec2nodeclasses"}
)

// Clients are what Seed talks to.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	EC2     *ec2.Client
	SSM     *ssm.Client
	IAM     *iam.Client
}

// AccessKeyID is the access key the seeding clients sign with: a sim that
// seeds a Karpenter cluster lets it do what Karpenter did (sim
// Access.Callers), which Joiner's own policy does not allow (tagging
// instances after launch, launch templates without joiner.io/cluster).
const AccessKeyID = "karpenter"

// AWSClients returns EC2, SSM and IAM clients for an endpoint (the
// simulated region's URL) with dummy static credentials (AccessKeyID).
func AWSClients(endpoint, region string) (*ec2.Client, *ssm.Client, *iam.Client) {
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, "karpenter", "")}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// Cluster holds what Karpenter's settings say about the cluster.
type Cluster struct {
	// Name is Karpenter's CLUSTER_NAME (tags; user data).
	Name string
	// Endpoint is the API server URL nodes join; CABundle its CA (base64
	// PEM, see CABundle): both go into user data, the bundle also into the
	// EC2NodeClass hash.
	Endpoint, CABundle string
	// ServiceCIDR is the cluster's service CIDR (AL2023 user data).
	ServiceCIDR string
	Region      string
	// KubernetesVersion picks the SSM parameters of AMI aliases (1.32).
	KubernetesVersion string
}

// Spec is what to seed: the classes and pools (as a user wrote them) and
// the NodeClaims Karpenter launched for them.
type Spec struct {
	NodeClasses []*awsv1.EC2NodeClass
	NodePools   []*karpv1.NodePool
	Claims      []Claim
}

// Seeded is what Seed left in the cluster, as stored at its end.
type Seeded struct {
	NodeClasses map[string]*awsv1.EC2NodeClass
	NodePools   map[string]*karpv1.NodePool
	// NodeClaims by name; Nodes and Instances (instance IDs) by NodeClaim
	// name.
	NodeClaims map[string]*karpv1.NodeClaim
	Nodes      map[string]*corev1.Node
	Instances  map[string]string
}

// ClaimNames are the seeded NodeClaims' names, sorted.
func (s *Seeded) ClaimNames() []string { return slices.Sorted(maps.Keys(s.NodeClaims)) }

// Seed makes the cluster Karpenter would have made for spec. The
// coordinators must not run yet (Karpenter does not run beside them).
// Classes: created, resolved against EC2 and SSM as Karpenter resolves
// them (status), then hashed. Pools: created and hashed. Each claim:
// created as the provisioner creates it, its instance launched with a
// launch template holding the user data Karpenter renders for it
// (AgentEnabled off: Karpenter's, without Joiner's hook) and CreateFleet
// with Karpenter's tags, the launch written back; once the simulated
// instance has registered its Node (Ready, labelled and tainted from the
// user data), the Node is registered and initialized as Karpenter does,
// the claim's status follows, and the instance is tagged (Name,
// karpenter.sh/nodeclaim, eks:eks-cluster-name). Last, each pool's status.
func Seed(ctx context.Context, c Clients, cl Cluster, spec Spec) (*Seeded, error) {
	if cl.KubernetesVersion == "" {
		cl.KubernetesVersion = "1.32"
	}
	s := &seeder{c: c, cl: cl, templates: map[string]bool{}, out: &Seeded{NodeClasses: map[string]*awsv1.EC2NodeClass{},
		NodePools: map[string]*karpv1.NodePool{}, NodeClaims: map[string]*karpv1.NodeClaim{}, Nodes: map[string]*corev1.Node{},
		Instances: map[string]string{}}}
	for _, nc := range spec.NodeClasses {
		if err := s.class(ctx, nc); err != nil {
			return nil, fmt.Errorf("ec2nodeclass %s: %w", nc.Name, err)
		}
	}
	for _, np := range spec.NodePools {
		if err := s.pool(ctx, np); err != nil {
			return nil, fmt.Errorf("nodepool %s: %w", np.Name, err)
		}
	}
	var launched []*launch
	for i, cl := range spec.Claims {
		l, err := s.launch(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("claim %d (%s %s): %w", i, cl.NodePool, cl.InstanceType, err)
		}
		launched = append(launched, l)
	}
	if err := s.waitNodes(ctx, launched); err != nil {
		return nil, err
	}
	for _, l := range launched {
		if err := s.register(ctx, l); err != nil {
			return nil, fmt.Errorf("nodeclaim %s: %w", l.claim.Name, err)
		}
	}
	for _, np := range spec.NodePools {
		if err := s.poolStatus(ctx, np.Name); err != nil {
			return nil, fmt.Errorf("nodepool %s status: %w", np.Name, err)
		}
	}
	return s.out, nil
}

// RecordPodEvents sets status.lastPodEventTime on every seeded NodeClaim,
// as Karpenter's pod events controller does when a pod is bound to its
// node (call it once the workloads run).
func RecordPodEvents(ctx context.Context, c Clients, s *Seeded, at time.Time) error {
	for _, name := range s.ClaimNames() {
		u, err := c.Dynamic.Resource(NodeClaimsGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting nodeclaim %s: %w", name, err)
		}
		nc, err := fromUnstructured[karpv1.NodeClaim](u)
		if err != nil {
			return err
		}
		nc.Status.LastPodEventTime = metav1.NewTime(at.UTC().Truncate(time.Second))
		if nc, err = UpdateStatus(ctx, c.Dynamic, NodeClaimsGVR, nc); err != nil {
			return err
		}
		s.NodeClaims[name] = nc
	}
	return nil
}

type seeder struct {
	c         Clients
	cl        Cluster
	templates map[string]bool // launch template names created
	out       *Seeded
}

// launch is one claim on its way.
type launch struct {
	claim *karpv1.NodeClaim
	class *awsv1.EC2NodeClass
	inst  Instance
	node  string
}

func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

func (s *seeder) class(ctx context.Context, in *awsv1.EC2NodeClass) error {
	nc := in.DeepCopy()
	nc.APIVersion, nc.Kind = awsv1.SchemeGroupVersion.String(), "EC2NodeClass"
	stored, err := Create[awsv1.EC2NodeClass](ctx, s.c.Dynamic, EC2NodeClassesGVR, nc)
	if err != nil {
		return err
	}
	subnets, groups, amis, err := s.resolve(ctx, stored)
	if err != nil {
		return err
	}
	profile := InstanceProfileName(s.cl.Name, s.cl.Region, stored.Name)
	if p := stored.Spec.InstanceProfile; p != nil {
		profile = *p
	} else if err := s.instanceProfile(ctx, stored, profile); err != nil {
		return err
	}
	stored.Status = ClassStatus(stored, subnets, groups, amis, profile, now())
	if stored, err = UpdateStatus(ctx, s.c.Dynamic, EC2NodeClassesGVR, stored); err != nil {
		return err
	}
	// Karpenter's hash controller hashes the object as stored (CRD
	// defaults applied).
	if stored, err = Annotate[awsv1.EC2NodeClass](ctx, s.c.Dynamic, EC2NodeClassesGVR, stored.Name, ClassAnnotations(stored, s.cl.CABundle)); err != nil {
		return err
	}
	s.out.NodeClasses[stored.Name] = stored
	return nil
}

// instanceProfile makes the instance profile of a class with a role, as
// Karpenter's instance profile reconciler does: its path, tags and role.
func (s *seeder) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass, name string) error {
	tags := map[string]string{"kubernetes.io/cluster/" + s.cl.Name: "owned", karpv1.TagEKSClusterName: s.cl.Name,
		karpv1.TagNodeClass: nc.Name, corev1.LabelTopologyRegion: s.cl.Region}
	for k, v := range nc.Spec.Tags {
		if _, set := tags[k]; !set {
			tags[k] = v
		}
	}
	var iamTags []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		iamTags = append(iamTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	if _, err := s.c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
		Path: aws.String("/karpenter/" + s.cl.Region + "/" + s.cl.Name + "/" + string(nc.UID) + "/"), Tags: iamTags}); err != nil {
		return fmt.Errorf("creating instance profile %s of ec2nodeclass %s: %w", name, nc.Name, err)
	}
	if _, err := s.c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name),
		RoleName: aws.String(nc.Spec.Role)}); err != nil {
		return fmt.Errorf("adding role %s to instance profile %s: %w", nc.Spec.Role, name, err)
	}
	return nil
}

func (s *seeder) pool(ctx context.Context, in *karpv1.NodePool) error {
	np := in.DeepCopy()
	np.APIVersion, np.Kind = karpv1.SchemeGroupVersion.String(), "NodePool"
	stored, err := Create[karpv1.NodePool](ctx, s.c.Dynamic, NodePoolsGVR, np)
	if err != nil {
		return err
	}
	if stored, err = Annotate[karpv1.NodePool](ctx, s.c.Dynamic, NodePoolsGVR, stored.Name, PoolAnnotations(stored)); err != nil {
		return err
	}
	s.out.NodePools[stored.Name] = stored
	return nil
}

// resolve resolves a class's selector terms as Karpenter does: subnets by
// tags or ID (most free addresses first), security groups by tags, ID or
// name (by ID), AMIs by an al2023 alias (the standard SSM parameters of
// each architecture) or by ID.
func (s *seeder) resolve(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, []awsv1.SecurityGroup, []awsv1.AMI, error) {
	var subnets []ec2types.Subnet
	for _, t := range nc.Spec.SubnetSelectorTerms {
		in := &ec2.DescribeSubnetsInput{Filters: termFilters(t.Tags, "subnet-id", t.ID)}
		out, err := s.c.EC2.DescribeSubnets(ctx, in)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("describing subnets: %w", err)
		}
		for _, sn := range out.Subnets {
			if !slices.ContainsFunc(subnets, func(x ec2types.Subnet) bool { return aws.ToString(x.SubnetId) == aws.ToString(sn.SubnetId) }) {
				subnets = append(subnets, sn)
			}
		}
	}
	sort.Slice(subnets, func(i, j int) bool {
		if a, b := aws.ToInt32(subnets[i].AvailableIpAddressCount), aws.ToInt32(subnets[j].AvailableIpAddressCount); a != b {
			return a > b
		}
		return aws.ToString(subnets[i].SubnetId) < aws.ToString(subnets[j].SubnetId)
	})
	var outSubnets []awsv1.Subnet
	for _, sn := range subnets {
		outSubnets = append(outSubnets, awsv1.Subnet{ID: aws.ToString(sn.SubnetId), Zone: aws.ToString(sn.AvailabilityZone),
			ZoneID: aws.ToString(sn.AvailabilityZoneId)})
	}
	var groups []awsv1.SecurityGroup
	for _, t := range nc.Spec.SecurityGroupSelectorTerms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: termFilters(t.Tags, "group-id", t.ID, "group-name", t.Name)}
		out, err := s.c.EC2.DescribeSecurityGroups(ctx, in)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("describing security groups: %w", err)
		}
		for _, g := range out.SecurityGroups {
			if !slices.ContainsFunc(groups, func(x awsv1.SecurityGroup) bool { return x.ID == aws.ToString(g.GroupId) }) {
				groups = append(groups, awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)})
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	amis, err := s.resolveAMIs(ctx, nc)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(outSubnets) == 0 || len(groups) == 0 || len(amis) == 0 {
		return nil, nil, nil, fmt.Errorf("resolved %d subnets, %d security groups, %d AMIs: want some of each", len(outSubnets), len(groups), len(amis))
	}
	return outSubnets, groups, amis, nil
}

func (s *seeder) resolveAMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error) {
	standard := map[string]bool{} // image ID -> found through a standard alias parameter
	var ids []string
	for _, t := range nc.Spec.AMISelectorTerms {
		switch {
		case t.Alias != "":
			fam, version, _ := nc.Alias()
			if fam != "al2023" || version != "latest" {
				return nil, fmt.Errorf("alias %s: only al2023@latest is seeded", t.Alias)
			}
			for _, arch := range []string{"x86_64", "arm64"} {
				name := "/aws/service/eks/optimized-ami/" + s.cl.KubernetesVersion + "/amazon-linux-2023/" + arch + "/standard/recommended/image_id"
				out, err := s.c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
				if err != nil {
					continue // Karpenter skips the variants a region lacks
				}
				id := aws.ToString(out.Parameter.Value)
				standard[id] = true
				ids = append(ids, id)
			}
		case t.ID != "":
			ids = append(ids, t.ID)
		default:
			return nil, fmt.Errorf("amiSelectorTerms: only alias and id terms are seeded")
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("no AMI found")
	}
	out, err := s.c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
	if err != nil {
		return nil, fmt.Errorf("describing images: %w", err)
	}
	var amis []awsv1.AMI
	for _, im := range out.Images {
		arch := "amd64"
		if im.Architecture == ec2types.ArchitectureValuesArm64 {
			arch = "arm64"
		}
		id := aws.ToString(im.ImageId)
		amis = append(amis, awsv1.AMI{ID: id, Name: aws.ToString(im.Name), Requirements: ImageRequirements(arch, standard[id])})
	}
	sort.Slice(amis, func(i, j int) bool { return amis[i].ID < amis[j].ID })
	return amis, nil
}

// termFilters are the filters of a selector term: its tags, then one per
// (filter name, value) pair whose value is set.
func termFilters(tags map[string]string, nameValues ...string) []ec2types.Filter {
	out := joineraws.TagFilters(tags)
	for i := 0; i+1 < len(nameValues); i += 2 {
		if v := nameValues[i+1]; v != "" {
			out = append(out, ec2types.Filter{Name: aws.String(nameValues[i]), Values: []string{v}})
		}
	}
	return out
}

// Tags are the tags Karpenter puts on an instance at launch
// (utils.GetTags): the class's, then kubernetes.io/cluster/<name>=owned,
// karpenter.sh/nodepool, eks:eks-cluster-name and
// karpenter.k8s.aws/ec2nodeclass.
func Tags(cluster string, class *awsv1.EC2NodeClass, pool string) map[string]string {
	out := maps.Clone(class.Spec.Tags)
	if out == nil {
		out = map[string]string{}
	}
	out[karpv1.TagClusterPrefix+cluster] = "owned"
	out[karpv1.TagNodePool] = pool
	out[karpv1.TagEKSClusterName] = cluster
	out[karpv1.TagNodeClass] = class.Name
	return out
}

// launch creates the claim, launches its instance and writes the launch.
func (s *seeder) launch(ctx context.Context, c Claim) (*launch, error) {
	np := s.out.NodePools[c.NodePool]
	if np == nil {
		return nil, fmt.Errorf("nodepool %s was not seeded", c.NodePool)
	}
	class := s.out.NodeClasses[np.Spec.Template.Spec.NodeClassRef.Name]
	if class == nil {
		return nil, fmt.Errorf("ec2nodeclass %s was not seeded", np.Spec.Template.Spec.NodeClassRef.Name)
	}
	it := FindType(class, s.cl.Region, c.InstanceType)
	if it == nil {
		return nil, fmt.Errorf("instance type %s: not in the catalogue", c.InstanceType)
	}
	image := ""
	for _, ami := range class.Status.AMIs {
		if suits(ami, it.Labels) {
			image = ami.ID
			break
		}
	}
	subnet := ""
	for _, sn := range class.Status.Subnets {
		if sn.Zone == c.Zone {
			subnet = sn.ID
			break
		}
	}
	if image == "" || subnet == "" {
		return nil, fmt.Errorf("no AMI (%q) or no subnet in %s (%q) in the class's status", image, c.Zone, subnet)
	}
	claim, err := Create[karpv1.NodeClaim](ctx, s.c.Dynamic, NodeClaimsGVR, NewNodeClaim(np, c))
	if err != nil {
		return nil, err
	}
	// Karpenter's user data for this claim, without Joiner's agent hook.
	e, _ := catalog.Lookup(c.InstanceType)
	in := userdata.FromNodeClaim(class, claim, userdata.BuildOptions{
		Cluster:      userdata.Cluster{Name: s.cl.Name, Endpoint: s.cl.Endpoint, CABundle: s.cl.CABundle, ServiceCIDR: s.cl.ServiceCIDR},
		CapacityType: c.CapacityType, InstanceMaxPods: int32(e.MaxPods), VCPU: int32(e.VCPU)})
	in.AgentEnabled = false
	ud, err := userdata.Render(in)
	if err != nil {
		return nil, fmt.Errorf("rendering user data: %w", err)
	}
	tags := Tags(s.cl.Name, class, np.Name)
	lt, err := s.launchTemplate(ctx, class, image, c.CapacityType, ud, tags)
	if err != nil {
		return nil, err
	}
	fleetTags := []ec2types.TagSpecification{}
	for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeFleet} {
		fleetTags = append(fleetTags, ec2types.TagSpecification{ResourceType: rt, Tags: joineraws.EC2Tags(tags)})
	}
	out, err := s.c.EC2.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(c.CapacityType)},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(c.InstanceType),
				SubnetId: aws.String(subnet), AvailabilityZone: aws.String(c.Zone), ImageId: aws.String(image)}},
		}},
		OnDemandOptions:   &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		SpotOptions:       &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: fleetTags,
	})
	if err != nil {
		return nil, fmt.Errorf("creating fleet: %w", err)
	}
	if len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		return nil, fmt.Errorf("creating fleet: no instance (errors %d)", len(out.Errors))
	}
	inst := Instance{ID: out.Instances[0].InstanceIds[0], Zone: c.Zone, ImageID: image, CapacityType: c.CapacityType}
	ApplyLaunch(claim, class, it, inst, s.cl.CABundle, now())
	status := claim.Status
	if claim, err = Update(ctx, s.c.Dynamic, NodeClaimsGVR, claim); err != nil {
		return nil, err
	}
	claim.Status = status
	if claim, err = UpdateStatus(ctx, s.c.Dynamic, NodeClaimsGVR, claim); err != nil {
		return nil, err
	}
	s.out.Instances[claim.Name] = inst.ID
	return &launch{claim: claim, class: class, inst: inst}, nil
}

// suits reports whether an instance type with these labels meets the
// image's requirements (status.amis[].requirements).
func suits(ami awsv1.AMI, labels map[string]string) bool {
	reqs, err := requirements.FromNodeSelector(ami.Requirements)
	return err == nil && reqs.Matches(labels)
}

// launchTemplate creates (once per distinct content) a launch template
// named as Karpenter names them, karpenter.k8s.aws/<number>.
func (s *seeder) launchTemplate(ctx context.Context, class *awsv1.EC2NodeClass, image, capacityType string, ud []byte, tags map[string]string) (string, error) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", class.Name, image, capacityType)
	h.Write(ud)
	name := LaunchTemplateNamePrefix + strconv.FormatUint(h.Sum64(), 10)
	if s.templates[name] {
		return name, nil
	}
	var sgs []string
	for _, g := range class.Status.SecurityGroups {
		sgs = append(sgs, g.ID)
	}
	m := class.Spec.MetadataOptions
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(image),
		UserData:           aws.String(base64.StdEncoding.EncodeToString(ud)),
		SecurityGroupIds:   sgs,
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(class.Status.InstanceProfile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(class.Spec.DetailedMonitoring != nil && *class.Spec.DetailedMonitoring)},
		TagSpecifications:  []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: joineraws.EC2Tags(tags)}},
	}
	if m != nil {
		data.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:         ec2types.LaunchTemplateInstanceMetadataEndpointState(aws.ToString(m.HTTPEndpoint)),
			HttpProtocolIpv6:     ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(aws.ToString(m.HTTPProtocolIPv6)),
			HttpTokens:           ec2types.LaunchTemplateHttpTokensState(aws.ToString(m.HTTPTokens)),
			InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
		}
		if m.HTTPPutResponseHopLimit != nil {
			data.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
		}
	}
	if _, err := s.c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: joineraws.EC2Tags(tags)}}}); err != nil {
		return "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	s.templates[name] = true
	return name, nil
}

// waitNodes waits until every launched instance has a Ready Node.
func (s *seeder) waitNodes(ctx context.Context, ls []*launch) error {
	for {
		nodes, err := s.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		byProvider := map[string]*corev1.Node{}
		for i := range nodes.Items {
			byProvider[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
		}
		missing := 0
		for _, l := range ls {
			if n := byProvider[l.inst.ProviderID()]; n != nil && ready(n) {
				l.node = n.Name
			} else {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d of %d instances to register a Ready node: %w", missing, len(ls), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// register registers and initializes the claim's Node and tags its
// instance.
func (s *seeder) register(ctx context.Context, l *launch) error {
	var node *corev1.Node
	for attempt := 0; ; attempt++ {
		n, err := s.c.Kube.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s: %w", l.node, err)
		}
		n = n.DeepCopy()
		RegisterNode(l.claim, n)
		for _, t := range n.Spec.Taints {
			for _, st := range l.claim.Spec.StartupTaints {
				if t.MatchTaint(&st) {
					return fmt.Errorf("node %s has startup taint %s: the seeder does not remove startup taints", n.Name, t.Key)
				}
			}
		}
		InitializeNode(n)
		node, err = s.c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 10 {
			return fmt.Errorf("registering node %s: %w", l.node, err)
		}
	}
	t := now()
	claim := l.claim.DeepCopy()
	ApplyRegistered(claim, node.Name, t)
	ApplyInitialized(claim, t)
	claim, err := UpdateStatus(ctx, s.c.Dynamic, NodeClaimsGVR, claim)
	if err != nil {
		return err
	}
	// The tagging controller.
	if _, err := s.c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{l.inst.ID}, Tags: joineraws.EC2Tags(map[string]string{
		karpv1.TagName: node.Name, karpv1.TagNodeClaim: claim.Name, karpv1.TagEKSClusterName: s.cl.Name})}); err != nil {
		return fmt.Errorf("tagging instance %s: %w", l.inst.ID, err)
	}
	ApplyTagged(claim)
	status := claim.Status
	if claim, err = Update(ctx, s.c.Dynamic, NodeClaimsGVR, claim); err != nil {
		return err
	}
	claim.Status = status
	s.out.NodeClaims[claim.Name] = claim
	s.out.Nodes[claim.Name] = node
	return nil
}

func (s *seeder) poolStatus(ctx context.Context, pool string) error {
	np := s.out.NodePools[pool]
	class := s.out.NodeClasses[np.Spec.Template.Spec.NodeClassRef.Name]
	var nodes []*corev1.Node
	for name, nc := range s.out.NodeClaims {
		if nc.Labels[karpv1.LabelNodePool] == pool {
			nodes = append(nodes, s.out.Nodes[name])
		}
	}
	np.Status = PoolStatus(np, class, nodes, now())
	stored, err := UpdateStatus(ctx, s.c.Dynamic, NodePoolsGVR, np)
	if err != nil {
		return err
	}
	s.out.NodePools[pool] = stored
	return nil
}

// toUnstructured converts a typed object by its JSON.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u, nil
}

func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// Create creates a typed object through the dynamic client and returns it
// as stored.
func Create[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *T) (*T, error) {
	return write(ctx, dyn, gvr, obj, createVerb)
}

// Update writes a typed object (not its status) and returns it as stored.
func Update[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *T) (*T, error) {
	return write(ctx, dyn, gvr, obj, updateVerb)
}

// UpdateStatus writes a typed object's status and returns it as stored.
func UpdateStatus[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *T) (*T, error) {
	return write(ctx, dyn, gvr, obj, updateStatusVerb)
}

// A write of an object, as Karpenter's field manager.
type verb int

const (
	createVerb verb = iota
	updateVerb
	updateStatusVerb
)

// write sends obj (a gvr) with v and decodes the object as stored.
func write[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *T, v verb) (*T, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	r := dyn.Resource(gvr)
	update := metav1.UpdateOptions{FieldManager: "karpenter"}
	var out *unstructured.Unstructured
	switch v {
	case createVerb:
		if out, err = r.Create(ctx, u, metav1.CreateOptions{FieldManager: "karpenter"}); err != nil {
			return nil, fmt.Errorf("creating %s %s%s: %w", gvr.Resource, u.GetName(), u.GetGenerateName(), err)
		}
	case updateVerb:
		if out, err = r.Update(ctx, u, update); err != nil {
			return nil, fmt.Errorf("updating %s %s: %w", gvr.Resource, u.GetName(), err)
		}
	case updateStatusVerb:
		if out, err = r.UpdateStatus(ctx, u, update); err != nil {
			return nil, fmt.Errorf("updating %s %s status: %w", gvr.Resource, u.GetName(), err)
		}
	}
	return fromUnstructured[T](out)
}

// Annotate merges annotations into a typed object's metadata (a JSON
// merge patch) and returns it as stored.
func Annotate[T any](ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string, annotations map[string]string) (*T, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return nil, err
	}
	out, err := dyn.Resource(gvr).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "karpenter"})
	if err != nil {
		return nil, fmt.Errorf("annotating %s %s: %w", gvr.Resource, name, err)
	}
	return fromUnstructured[T](out)
}
