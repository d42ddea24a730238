package provisioner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/podresources"
	"github.com/joiner-dev/joiner/userdata"
)

// karpv1.AnnotationLaunchID carries a NodeClaim's launch intent ID.

// freeze is the cloud.LaunchSpec of a launch: the candidates, the subnet
// per zone chosen now, and the EC2NodeClass inputs (security groups,
// instance profile and placement group as resolved, block devices,
// metadata options, detailed monitoring, tags, network interfaces, public
// IP, IP prefixes, connection tracking, CPU options, context) with the
// rendered user data. Everything is copied, so later changes to the class
// do not reach the spec committed to raft, and a new leader retrying the
// same token sends the same request.
func freeze(pool, claim string, cands []cloud.Candidate, nc *awsv1.EC2NodeClass, r cloud.Resolved,
	subnets map[string]string, userData []byte) cloud.LaunchSpec {
	spec := cloud.LaunchSpec{NodePool: pool, NodeClass: nc.Name, NodeClaim: claim, Candidates: cands,
		Subnets: maps.Clone(subnets), SecurityGroupIDs: slices.Sorted(slices.Values(r.SecurityGroupIDs())),
		InstanceProfile: r.InstanceProfile, UserData: slices.Clone(userData),
		MetadataOptions: nc.Spec.MetadataOptions.DeepCopy(), Tags: maps.Clone(nc.Spec.Tags),
		DetailedMonitoring:       nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring,
		AssociatePublicIPAddress: clonePtr(nc.Spec.AssociatePublicIPAddress), IPPrefixCount: clonePtr(nc.Spec.IPPrefixCount),
		ConnectionTracking: nc.Spec.ConnectionTracking.DeepCopy(), CPUOptions: nc.Spec.CPUOptions.DeepCopy()}
	for _, m := range nc.Spec.BlockDeviceMappings {
		spec.BlockDevices = append(spec.BlockDevices, m.DeepCopy())
	}
	if len(nc.Spec.BlockDeviceMappings) == 0 {
		spec.BlockDevices = defaultBlockDevices(catalog.AMIFamily(nc))
	}
	for _, ni := range nc.Spec.NetworkInterfaces {
		spec.NetworkInterfaces = append(spec.NetworkInterfaces, ni.DeepCopy())
	}
	if nc.Spec.Context != nil {
		spec.Context = *nc.Spec.Context
	}
	if r.PlacementGroup != nil {
		spec.PlacementGroupID = r.PlacementGroup.ID
	}
	return spec
}

// defaultBlockDevices are Karpenter's volumes for a class without
// blockDeviceMappings: encrypted gp3, 20Gi on /dev/xvda (AL2, AL2023),
// 4Gi /dev/xvda and 20Gi /dev/xvdb (Bottlerocket), 50Gi /dev/sda1
// (Windows), none for Custom (the AMI's own). The catalogue's
// ephemeral-storage assumes the same sizes.
func defaultBlockDevices(family string) []*awsv1.BlockDeviceMapping {
	yes, gp3 := true, "gp3"
	volume := func(device, size string) *awsv1.BlockDeviceMapping {
		q := resource.MustParse(size)
		return &awsv1.BlockDeviceMapping{DeviceName: &device, EBS: &awsv1.BlockDevice{
			Encrypted: clonePtr(&yes), VolumeType: clonePtr(&gp3), VolumeSize: &q}}
	}
	switch family {
	case awsv1.AMIFamilyCustom:
		return nil
	case awsv1.AMIFamilyBottlerocket:
		return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "4Gi"), volume("/dev/xvdb", "20Gi")}
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return []*awsv1.BlockDeviceMapping{volume("/dev/sda1", "50Gi")}
	}
	return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "20Gi")}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// launchPlacement is what Karpenter writes of a claim's placement group:
// the karpenter.k8s.aws/placement-group-id label and, for a partition
// group whose partition the claim's requirements name, the lowest of those
// partitions (in string order, as Karpenter sorts them) as the partition to
// launch into and its label. Without such a requirement EC2 picks the
// partition.
func launchPlacement(pg *cloud.PlacementGroup, reqs []karpv1.NodeSelectorRequirementWithMinValues) (labels map[string]string, partition int32) {
	if pg == nil {
		return nil, 0
	}
	labels = map[string]string{karpv1.LabelPlacementGroupID: pg.ID}
	if pg.Strategy != cloud.PlacementStrategyPartition {
		return labels, 0
	}
	for _, r := range reqs {
		if r.Key != karpv1.LabelPlacementGroupPartition || r.Operator != karpv1.OpIn || len(r.Values) == 0 {
			continue
		}
		values := slices.Sorted(slices.Values(r.Values))
		if n, err := strconv.ParseInt(values[0], 10, 32); err == nil {
			labels[karpv1.LabelPlacementGroupPartition] = values[0]
			return labels, int32(n)
		}
	}
	return labels, 0
}

// efaCounts sets each candidate's EFA interface count when the claim
// requests vpc.amazonaws.com/efa and the class names no network
// interfaces: the type's EFA capacity (Karpenter's EFA count).
func efaCounts(cands []cloud.Candidate, requests corev1.ResourceList, nc *awsv1.EC2NodeClass, catalogue []*catalog.InstanceType) {
	if _, ok := requests[awsv1.ResourceEFA]; !ok || len(nc.Spec.NetworkInterfaces) > 0 {
		return
	}
	for i, c := range cands {
		if it := view.FindType(catalogue, c.InstanceType); it != nil {
			q := it.Capacity[awsv1.ResourceEFA]
			cands[i].EFACount = int32(q.Value())
		}
	}
}

// clusterIPv6 reports whether the cluster's DNS service address is IPv6
// (Karpenter's cluster IP family): the configured DNS address, else the
// 10th address of the service CIDR, else the configured IP family.
func clusterIPv6(c userdata.Cluster) bool {
	dns := c.DNSIP
	if dns == "" && c.ServiceCIDR != "" {
		dns, _ = userdata.ClusterDNSIP(c.ServiceCIDR)
	}
	if a, err := netip.ParseAddr(dns); err == nil {
		return a.Is6() && !a.Is4In6()
	}
	return c.IPFamily == "ipv6"
}

// planned is one NodeClaim ready to commit.
type planned struct {
	intent fsm.NewIntent
	claim  *karpv1.NodeClaim
	pods   []string
}

// launch freezes each claim's launch inputs, commits them in one
// PlanCommit, then creates the NodeClaim objects and wakes the launcher.
func (p *Provisioner) launch(ctx context.Context, s *view.View, claims []scheduler.NodeClaim, reason string) ([]string, error) {
	var todo []planned
	for _, c := range claims {
		pl, err := p.prepare(s, c)
		if err != nil {
			p.metrics.launchErrors.WithLabelValues("prepare").Inc()
			p.log.Warn("cannot launch nodeclaim", zap.String("nodepool", c.NodePool), zap.Int("pods", len(c.Pods)), zap.Error(err))
			continue
		}
		todo = append(todo, pl)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	cmd := fsm.PlanCommit{At: p.cfg.Now()}
	for _, pl := range todo {
		cmd.Intents = append(cmd.Intents, pl.intent)
	}
	if err := fsm.Propose(ctx, p.d.Raft, fsm.PlanCommitType, cmd); err != nil {
		p.metrics.launchErrors.WithLabelValues("commit").Inc()
		return nil, fmt.Errorf("committing plan of %d nodeclaim(s): %w", len(todo), err)
	}
	p.cfg.Wake()
	var names []string
	var firstErr error
	for _, pl := range todo {
		names = append(names, pl.claim.Name)
		if err := p.create(ctx, pl.claim); err != nil {
			// The intent is committed: the next pass recreates the object.
			p.log.Warn("creating nodeclaim", zap.String("nodeclaim", pl.claim.Name), zap.Error(err))
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		p.metrics.nodeClaimsCreated.WithLabelValues(pl.intent.Spec.NodePool, reason, pl.claim.Annotations[karpv1.AnnotationMinValuesRelaxed]).Inc()
		p.metrics.karp.NodeClaimCreated(pl.claim, reason)
		p.log.Info("created nodeclaim", zap.String("nodeclaim", pl.claim.Name), zap.String("nodepool", pl.intent.Spec.NodePool),
			zap.String("reason", reason), zap.Int("pods", len(pl.pods)), zap.String("requests", podresources.Format(pl.claim.Spec.Resources.Requests)),
			zap.String("instance-types", summariseTypes(pl.intent.Spec.Candidates)))
		p.eventNominated(s, pl)
	}
	return names, firstErr
}

// prepare builds the intent and NodeClaim object of one planned claim.
func (p *Provisioner) prepare(s *view.View, c scheduler.NodeClaim) (planned, error) {
	pool := s.NodePool(c.NodePool)
	class := s.NodeClasses[c.NodeClass]
	if pool == nil || class == nil {
		return planned{}, fmt.Errorf("nodepool %s / ec2nodeclass %s: %w", c.NodePool, c.NodeClass, ErrNotReady)
	}
	resolved := s.Resolved[class.Name]
	reqs, err := requirements.FromNodeSelector(c.Requirements)
	if err != nil {
		return planned{}, fmt.Errorf("requirements of planned nodeclaim %s: %w", c.Name, err)
	}
	subnets := p.d.Cloud.SubnetsByZone(resolved.Subnets)
	cands := candidates(c.InstanceTypes, s.InstanceTypes[class.Name], reqs, resolved, subnets)
	if len(cands) == 0 {
		return planned{}, fmt.Errorf("planned nodeclaim %s of nodepool %s: no available offering with an image and a subnet among %d instance types",
			c.Name, c.NodePool, len(c.InstanceTypes))
	}
	id := p.cfg.NewID()
	name := pool.Name + "-" + id[:5]
	reqsOut := claimRequirements(pool, c.Requirements, cands)
	if c.MinValuesRelaxed {
		relaxMinValues(reqsOut, cands, s.InstanceTypes[class.Name])
	}
	claim := newNodeClaim(pool, class, name, id, reqsOut, c.Requests)
	claim.Annotations[karpv1.AnnotationMinValuesRelaxed] = strconv.FormatBool(c.MinValuesRelaxed)
	claim.Annotations[karpv1.AnnotationNodePoolHash] = s.NodePoolHashes[pool.Name]
	claim.Annotations[karpv1.AnnotationEC2NodeClassHash] = s.NodeClassHashes[class.Name]
	// The profile its instance launches with, as Karpenter records it:
	// instance profile garbage collection keeps it while the claim lives.
	claim.Annotations[karpv1.AnnotationInstanceProfile] = resolved.InstanceProfile

	cluster, err := p.cluster()
	if err != nil {
		return planned{}, fmt.Errorf("user data of nodeclaim %s: %w", name, err)
	}
	// One user data serves every candidate of a kubelet shape: it calls
	// joiner only when every candidate's image is Joiner-built.
	images := make([]string, len(cands))
	for i, c := range cands {
		images[i] = c.ImageID
	}
	ud, variants, err := userDataVariants(cands, s.InstanceTypes[class.Name], func(maxPods, vcpu int32, capacityType string) ([]byte, error) {
		in := userdata.FromNodeClaim(class, claim, userdata.BuildOptions{Cluster: cluster, CapacityType: capacityType,
			InstanceMaxPods: maxPods, VCPU: vcpu, BootstrapImage: p.cfg.BootstrapImage, JoinerImage: resolved.JoinerImages(images)})
		return userdata.Render(in)
	})
	if err != nil {
		return planned{}, fmt.Errorf("rendering user data of nodeclaim %s (ec2nodeclass %s): %w", name, class.Name, err)
	}
	frozen := freeze(pool.Name, name, cands, class, resolved, subnets, ud)
	frozen.UserDataVariants = variants
	frozen.MinValues = slices.ContainsFunc(claim.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.MinValues != nil })
	efaCounts(frozen.Candidates, c.Requests, class, s.InstanceTypes[class.Name])
	pgLabels, partition := launchPlacement(resolved.PlacementGroup, claim.Spec.Requirements)
	maps.Copy(claim.Labels, pgLabels)
	frozen.PlacementGroupPartition = partition
	frozen.ClusterIPv6 = clusterIPv6(cluster)
	if c.MinValuesRelaxed { // Karpenter sends no fleet context for a claim whose minValues were relaxed
		frozen.Context = ""
	}
	spec := fsm.LaunchSpec{LaunchSpec: frozen,
		Labels: maps.Clone(claim.Labels), Requirements: claim.Spec.Requirements, Requests: claim.Spec.Resources.Requests,
		ClaimAnnotations: maps.Clone(claim.Annotations)}
	pods := slices.Clone(c.Pods)
	sort.Strings(pods)
	return planned{intent: fsm.NewIntent{ID: id, Spec: spec, Pods: pods}, claim: claim, pods: pods}, nil
}

// candidates are the offerings of the planned instance types (cheapest
// type first) that the claim's requirements allow, are available, have an
// image that suits the type (newest compatible: architecture, and GPU or
// accelerator variant) and a subnet in their zone, each marked exotic as
// its type is (metal, GPUs, accelerators). A reserved offering is a
// candidate only when the scheduler pinned the claim to its reservation
// (karpenter.k8s.aws/capacity-reservation-id); then only reserved
// candidates are kept. Otherwise spot and on-demand candidates are kept
// alike: the launch applies Karpenter's filters to them and picks the
// capacity type (spot when a spot offering no dearer than the cheapest
// on-demand one is left, else on-demand; cloud/aws chooseLaunch), as
// Karpenter's Create gets every offering of the claim's types.
func candidates(types []string, catalogue []*catalog.InstanceType, reqs requirements.Requirements,
	r cloud.Resolved, subnets map[string]string) []cloud.Candidate {
	allowed := func(key, value string) bool {
		req := reqs.Get(key)
		return req == nil || req.Has(value)
	}
	var out []cloud.Candidate
	reserved := false
	for _, name := range types {
		it := view.FindType(catalogue, name)
		if it == nil {
			continue
		}
		image := r.ImageFor(it.Labels)
		if image == "" {
			continue
		}
		offs := slices.Clone(it.Offerings)
		sort.SliceStable(offs, func(i, j int) bool { return offs[i].Price < offs[j].Price })
		for _, o := range offs {
			if !o.Available || subnets[o.Zone] == "" || !allowed(karpv1.LabelZone, o.Zone) || !allowed(karpv1.LabelCapacityType, o.CapacityType) {
				continue
			}
			if rid := reqs.Get(karpv1.LabelCapacityReservationID); o.CapacityType == karpv1.CapacityTypeReserved && (rid == nil || !rid.Has(o.ReservationID)) {
				continue
			}
			reserved = reserved || o.CapacityType == karpv1.CapacityTypeReserved
			out = append(out, cloud.Candidate{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType, Price: o.Price, ImageID: image,
				ReservationID: o.ReservationID, ReservationType: o.ReservationType, Interruptible: o.Interruptible, Exotic: it.Exotic()})
		}
	}
	if reserved {
		out = slices.DeleteFunc(out, func(c cloud.Candidate) bool { return c.CapacityType != karpv1.CapacityTypeReserved })
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Price < out[j].Price })
	return out
}

// userDataVariants renders the user data of each candidate, once per
// kubelet shape (the type's max pods and vCPU count, which podsPerCore
// multiplies) and capacity type (the node's karpenter.sh/capacity-type
// label) among the candidates, as Karpenter renders one launch template
// per max-pods value and capacity type: the type EC2 picks boots with its
// own pod limit, not the smallest candidate's, and a spot instance is
// labelled spot. It returns the first rendering and the other distinct
// ones, and sets each candidate's UserDataVariant.
func userDataVariants(cands []cloud.Candidate, catalogue []*catalog.InstanceType,
	render func(maxPods, vcpu int32, capacityType string) ([]byte, error)) ([]byte, [][]byte, error) {
	type shape struct {
		maxPods, vcpu int32
		capacityType  string
	}
	var all [][]byte
	byShape := map[shape]int{}
	for i := range cands {
		sh := shape{capacityType: cands[i].CapacityType}
		if it := view.FindType(catalogue, cands[i].InstanceType); it != nil {
			pq, cq := it.Capacity[corev1.ResourcePods], it.Capacity[corev1.ResourceCPU]
			sh.maxPods, sh.vcpu = int32(pq.Value()), int32(cq.Value())
		}
		n, ok := byShape[sh]
		if !ok {
			ud, err := render(sh.maxPods, sh.vcpu, sh.capacityType)
			if err != nil {
				return nil, nil, err
			}
			if n = slices.IndexFunc(all, func(b []byte) bool { return bytes.Equal(b, ud) }); n < 0 {
				all = append(all, ud)
				n = len(all) - 1
			}
			byShape[sh] = n
		}
		cands[i].UserDataVariant = n
	}
	if len(all) == 0 {
		return nil, nil, nil
	}
	return all[0], all[1:], nil
}

// claimRequirements are the planned requirements with instance type, zone
// and capacity type narrowed to the candidates, and the pool's minValues.
func claimRequirements(pool *karpv1.NodePool, planned []corev1.NodeSelectorRequirement, cands []cloud.Candidate) []karpv1.NodeSelectorRequirementWithMinValues {
	minValues := map[string]*int{}
	for _, r := range pool.Spec.Template.Spec.Requirements {
		if r.MinValues != nil {
			minValues[r.Key] = r.MinValues
		}
	}
	narrowed := map[string][]string{}
	for _, c := range cands {
		for k, v := range map[string]string{karpv1.LabelInstanceType: c.InstanceType, karpv1.LabelZone: c.Zone, karpv1.LabelCapacityType: c.CapacityType} {
			if !slices.Contains(narrowed[k], v) {
				narrowed[k] = append(narrowed[k], v)
			}
		}
	}
	var out []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range planned {
		if _, ok := narrowed[r.Key]; ok {
			continue
		}
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: karpv1.NodeSelectorOperator(r.Operator),
			Values: slices.Clone(r.Values), MinValues: minValues[r.Key]})
	}
	for _, k := range []string{karpv1.LabelCapacityType, karpv1.LabelInstanceType, karpv1.LabelZone} {
		vs := narrowed[k]
		sort.Strings(vs)
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: k, Operator: karpv1.OpIn, Values: vs, MinValues: minValues[k]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if len(out) > 100 {
		out = out[:100]
	}
	return out
}

// relaxMinValues lowers each minValues to the number of distinct values
// the claim's candidates offer for its key (the BestEffort policy relaxed
// the pool's minValues for this claim, and the claim says what it kept).
func relaxMinValues(reqs []karpv1.NodeSelectorRequirementWithMinValues, cands []cloud.Candidate, types []*catalog.InstanceType) {
	for i, r := range reqs {
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for _, c := range cands {
			switch r.Key {
			case karpv1.LabelInstanceType:
				seen[c.InstanceType] = true
			case karpv1.LabelZone:
				seen[c.Zone] = true
			case karpv1.LabelCapacityType:
				seen[c.CapacityType] = true
			default:
				if it := view.FindType(types, c.InstanceType); it != nil {
					if v, ok := it.Labels[r.Key]; ok {
						seen[v] = true
					}
				}
			}
		}
		if n := len(seen); n < *r.MinValues {
			reqs[i].MinValues = &n
		}
	}
}

// customLabels are the labels of the requirement keys a NodePool or its
// pods define that are not well-known, each some value the requirement
// allows (Karpenter's resolveCustomLabelsFromRequirements): a pod needing
// team Exists, team In [a b] or gen Gt 4 gets a node labelled so. A key
// that only allows absence (DoesNotExist) gets none.
func customLabels(reqs []karpv1.NodeSelectorRequirementWithMinValues) map[string]string {
	rs, err := requirements.FromNodePool(reqs)
	if err != nil { // the planner built them; they always parse
		return nil
	}
	out := map[string]string{}
	for _, r := range rs.All() {
		if karpv1.WellKnownLabels[r.Key] || slices.Contains(karpv1.RestrictedLabels, r.Key) || r.Key == karpv1.LabelRegistered || r.Key == karpv1.LabelInitialized {
			continue
		}
		if v, ok := r.Any(); ok {
			out[r.Key] = v
		}
	}
	return out
}

// newNodeClaim is the NodeClaim object of a launch: the pool template's
// labels, annotations, taints and limits, the planned requirements and
// requests, owned by the pool and guarded by the termination finalizer.
func newNodeClaim(pool *karpv1.NodePool, class *awsv1.EC2NodeClass, name, intentID string,
	reqs []karpv1.NodeSelectorRequirementWithMinValues, requests corev1.ResourceList) *karpv1.NodeClaim {
	t := pool.Spec.Template
	labels := maps.Clone(t.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for _, r := range reqs {
		// The reservation labels come with the launch (a reserved claim
		// may still end on demand), as in Karpenter.
		if r.Operator == karpv1.OpIn && len(r.Values) == 1 && r.Key != karpv1.LabelHostname && !karpv1.ReservationLabels[r.Key] {
			labels[r.Key] = r.Values[0]
		}
	}
	for k, v := range customLabels(reqs) {
		if _, set := labels[k]; !set {
			labels[k] = v
		}
	}
	labels[karpv1.LabelNodePool] = pool.Name
	labels[karpv1.LabelNodeClass] = class.Name
	annotations := maps.Clone(t.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[karpv1.AnnotationLaunchID] = intentID
	annotations[karpv1.AnnotationCustomLabels] = "true"
	annotations[karpv1.AnnotationNodePoolHashVersion] = karpv1.NodePoolHashVersion
	annotations[karpv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	yes := true
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations,
			Finalizers: []string{karpv1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool",
				Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: &yes}}},
		Spec: karpv1.NodeClaimSpec{
			Taints: slices.Clone(t.Spec.Taints), StartupTaints: slices.Clone(t.Spec.StartupTaints),
			Requirements: reqs, Resources: karpv1.ResourceRequirements{Requests: requests},
			NodeClassRef: t.Spec.NodeClassRef.DeepCopy(), TerminationGracePeriod: t.Spec.TerminationGracePeriod.DeepCopy(),
			ExpireAfter: t.Spec.ExpireAfter,
		},
	}
	if pool.UID == "" { // a pool that was never stored (tests): no owner
		nc.OwnerReferences = nil
	}
	return nc
}

// create creates a NodeClaim object; one that exists already is fine.
func (p *Provisioner) create(ctx context.Context, nc *karpv1.NodeClaim) error {
	if _, err := p.d.Kube.CreateNodeClaim(ctx, nc); err != nil && !apierrors.IsAlreadyExists(errors.Unwrap(err)) && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// ensureNodeClaims recreates the NodeClaim object of every live intent
// that has none, for example after a leader died between PlanCommit and
// the create. Intents whose instance is gone or being terminated are left
// alone: their NodeClaim was deleted on purpose.
func (p *Provisioner) ensureNodeClaims(ctx context.Context) error {
	terminating := map[string]bool{}
	for _, t := range p.d.State.Terminations() {
		terminating[t.InstanceID] = true
	}
	gone := map[string]bool{}
	for _, inst := range p.d.State.Instances() {
		if inst.State.Terminal() {
			gone[inst.ID] = true
		}
	}
	for _, in := range p.d.State.Intents() {
		if !in.State.Live() || p.d.Cache.NodeClaim(in.Spec.NodeClaim) != nil {
			continue
		}
		if in.InstanceID != "" && (terminating[in.InstanceID] || gone[in.InstanceID]) {
			continue
		}
		if in.State == fsm.IntentLaunched && p.cfg.Now().Sub(in.UpdatedAt) > p.cfg.NominationGrace {
			// Launched a while ago and its NodeClaim is gone: it was
			// deleted (or never made it); the launcher's orphan
			// collection terminates the instance once the GC grace
			// period (2 min, longer than this window) has passed since
			// the launch result.
			continue
		}
		pool := p.d.Cache.NodePool(in.Spec.NodePool)
		if pool == nil {
			continue
		}
		nc := p.recoveredNodeClaim(pool, in)
		if err := p.create(ctx, nc); err != nil {
			return fmt.Errorf("recreating nodeclaim %s of launch intent %s: %w", in.Spec.NodeClaim, in.ID, err)
		}
		p.log.Info("created nodeclaim", zap.String("nodeclaim", nc.Name), zap.String("nodepool", pool.Name),
			zap.String("reason", "recovered launch intent "+in.ID))
	}
	return nil
}

// recoveredNodeClaim rebuilds the NodeClaim object of a committed intent
// from its frozen spec: the same requirements, requests and annotations
// (drift hashes) the first leader would have created. Intents committed
// before those were frozen get the pool's requirements and current hashes.
func (p *Provisioner) recoveredNodeClaim(cached *karpv1.NodePool, in fsm.LaunchIntent) *karpv1.NodeClaim {
	pool := cached.DeepCopy()
	pool.SetDefaults()
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: in.Spec.NodeClass}}
	reqs := in.Spec.Requirements
	if len(reqs) == 0 {
		var sel []corev1.NodeSelectorRequirement
		for _, r := range pool.Spec.Template.Spec.Requirements {
			sel = append(sel, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
		}
		reqs = claimRequirements(pool, sel, in.Spec.Candidates)
	}
	nc := newNodeClaim(pool, class, in.Spec.NodeClaim, in.ID, reqs, in.Spec.Requests)
	for _, k := range []string{karpv1.LabelPlacementGroupID, karpv1.LabelPlacementGroupPartition} {
		if v, ok := in.Spec.Labels[k]; ok {
			nc.Labels[k] = v
		}
	}
	if len(in.Spec.ClaimAnnotations) > 0 {
		maps.Copy(nc.Annotations, in.Spec.ClaimAnnotations)
		return nc
	}
	nc.Annotations[karpv1.AnnotationNodePoolHash] = pool.Hash()
	if c := p.d.Classes.Class(in.Spec.NodeClass); c != nil {
		nc.Annotations[karpv1.AnnotationEC2NodeClassHash] = c.Hash
	}
	return nc
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomID is 10 random lower-case base32 characters (50 bits).
func randomID() string {
	var b [7]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return idEncoding.EncodeToString(b[:])[:10]
}

func summariseTypes(cands []cloud.Candidate) string {
	var names []string
	for _, c := range cands {
		if !slices.Contains(names, c.InstanceType) {
			names = append(names, c.InstanceType)
		}
	}
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d other(s)", len(names)-5)
	}
	return strings.Join(names, ", ")
}
