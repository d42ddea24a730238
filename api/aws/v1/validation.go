package v1

import (
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Limits and enums of the EC2NodeClass schema (Karpenter's CRD).
const (
	MaxSelectorTerms       = 30
	MaxSelectorTags        = 20
	MaxAliasLength         = 30
	MaxBlockDeviceMappings = 50
	MinHopLimit            = 1
	MaxHopLimit            = 64
	MinVolumeInitRate      = 100
	MaxVolumeInitRate      = 300
)

// AMIFamilies are the amiFamily values an EC2NodeClass may name.
var AMIFamilies = []string{AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyCustom, AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025}

// AliasFamilies maps an alias family (the part before "@") to its amiFamily.
var AliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// VolumeTypes are the EBS volume types a block device mapping may use.
var VolumeTypes = []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}

// Kubelet map keys Karpenter accepts.
var (
	ReservedResourceKeys = []string{"cpu", "memory", "ephemeral-storage", "pid"}
	EvictionSignals      = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
)

// RestrictedTagPrefixes and RestrictedTags may not be set in spec.tags:
// Karpenter and Joiner set them on every instance.
var (
	RestrictedTagPrefixes = []string{"kubernetes.io/cluster", karpv1.JoinerDomain + "/"}
	RestrictedTags        = []string{"eks:eks-cluster-name", karpv1.LabelNodePool, karpv1.Group + "/nodeclaim", karpv1.LabelNodeClass}
)

var (
	amiIDRE      = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	subnetIDRE   = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	sgIDRE       = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	crIDRE       = regexp.MustCompile(`^cr-[0-9a-z]+$`)
	ownerIDRE    = regexp.MustCompile(`^[0-9]{12}$`)
	aliasRE      = regexp.MustCompile(`^[a-zA-Z0-9]+@.+$`)
	percentRE    = regexp.MustCompile(`^(100|[0-9]{1,2}(\.[0-9]+)?)%$`)
	graceRE      = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	volumeSizeRE = regexp.MustCompile(VolumeSizePattern)
)

// VolumeSizePattern bounds an EBS volume size: 1-59000Gi, 1-64000G, 1-58Ti
// or 1-64T (Karpenter's rule, without its empty-alternative slip).
const VolumeSizePattern = `^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|5[0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-3][0-9]{3}|64000)G|(?:[1-9]|[1-4][0-9]|5[0-8])Ti|(?:[1-9]|[1-5][0-9]|6[0-4])T)$`

// Alias returns the family and version of the alias term, if any.
func (in *EC2NodeClass) Alias() (family, version string, ok bool) {
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias != "" {
			f, v, _ := strings.Cut(t.Alias, "@")
			return f, v, true
		}
	}
	return "", "", false
}

// AMIFamily is spec.amiFamily, or the family of the alias term when unset
// (Custom when neither says, which validation rejects).
func (in *EC2NodeClass) AMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	if f, _, ok := in.Alias(); ok {
		if fam, ok := AliasFamilies[f]; ok {
			return fam
		}
	}
	return AMIFamilyCustom
}

// Validate checks the EC2NodeClass the way Karpenter's CRD schema and CEL
// rules do (plus Joiner's restricted joiner.io/ tags). It returns a
// *karpv1.ValidationError (errors.Is(err, karpv1.ErrInvalid)) listing every
// problem, one per line, each naming the field path and the value.
func (in *EC2NodeClass) Validate() error {
	errs := &karpv1.ValidationError{}
	s := &in.Spec
	validateSubnetTerms(s.SubnetSelectorTerms, errs)
	validateSecurityGroupTerms(s.SecurityGroupSelectorTerms, errs)
	validateCapacityReservationTerms(s.CapacityReservationSelectorTerms, errs)
	validateAMITerms(s.AMISelectorTerms, errs)
	validateAMIFamily(in, errs)
	switch {
	case s.Role != "" && s.InstanceProfile != nil:
		errs.Add("spec", "must specify exactly one of role and instanceProfile, got role %s and instanceProfile %s", karpv1.Quote(s.Role), karpv1.Quote(*s.InstanceProfile))
	case s.Role == "" && s.InstanceProfile == nil:
		errs.Add("spec", "must specify exactly one of role and instanceProfile, got neither")
	case s.InstanceProfile != nil && *s.InstanceProfile == "":
		errs.Add("spec.instanceProfile", "instanceProfile cannot be empty, got \"\"")
	}
	validateTags(s.Tags, errs)
	if s.Kubelet != nil {
		validateKubelet("spec.kubelet", s.Kubelet, errs)
	}
	validateBlockDeviceMappings(s.BlockDeviceMappings, errs)
	if s.InstanceStorePolicy != nil && *s.InstanceStorePolicy != InstanceStorePolicyRAID0 {
		errs.Add("spec.instanceStorePolicy", "must be RAID0, got %s", karpv1.Quote(string(*s.InstanceStorePolicy)))
	}
	if m := s.MetadataOptions; m != nil {
		enum := func(field string, v *string, allowed ...string) {
			if v != nil && !contains(allowed, *v) {
				errs.Add("spec.metadataOptions."+field, "must be one of %s, got %s", strings.Join(allowed, ", "), karpv1.Quote(*v))
			}
		}
		enum("httpEndpoint", m.HTTPEndpoint, "enabled", "disabled")
		enum("httpProtocolIPv6", m.HTTPProtocolIPv6, "enabled", "disabled")
		enum("httpTokens", m.HTTPTokens, "required", "optional")
		if h := m.HTTPPutResponseHopLimit; h != nil && (*h < MinHopLimit || *h > MaxHopLimit) {
			errs.Add("spec.metadataOptions.httpPutResponseHopLimit", "must be between %d and %d, got %d", MinHopLimit, MaxHopLimit, *h)
		}
	}
	if s.IPPrefixCount != nil && *s.IPPrefixCount < 0 {
		errs.Add("spec.ipPrefixCount", "must be non-negative, got %d", *s.IPPrefixCount)
	}
	return errs.OrNil()
}

func validateSelectorTags(path string, tags map[string]string, errs *karpv1.ValidationError) {
	if len(tags) > MaxSelectorTags {
		errs.Add(path, "at most %d tags, got %d", MaxSelectorTags, len(tags))
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if k == "" {
			errs.Add(path, "empty tag keys aren't supported, got \"\": %s", karpv1.Quote(tags[k]))
		} else if tags[k] == "" {
			errs.Add(karpv1.Key(path, k), "empty tag values aren't supported (use \"*\" for any value), got \"\"")
		}
	}
}

func checkTerms(path string, n int, required bool, errs *karpv1.ValidationError) {
	if n == 0 && required {
		errs.Add(path, "at least one term is required, got none")
	}
	if n > MaxSelectorTerms {
		errs.Add(path, "at most %d terms, got %d", MaxSelectorTerms, n)
	}
}

func validateSubnetTerms(terms []SubnetSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.subnetSelectorTerms"
	checkTerms(path, len(terms), true, errs)
	for i, t := range terms {
		p := karpv1.Index(path, i)
		validateSelectorTags(p+".tags", t.Tags, errs)
		switch {
		case len(t.Tags) == 0 && t.ID == "":
			errs.Add(p, "expected at least one of tags, id, got none")
		case t.ID != "" && len(t.Tags) > 0:
			errs.Add(p+".id", "id is mutually exclusive with tags, got id %s and tags %s", karpv1.Quote(t.ID), karpv1.Quote(t.Tags))
		}
		if t.ID != "" && !subnetIDRE.MatchString(t.ID) {
			errs.Add(p+".id", "must match subnet-[0-9a-z]+, got %s", karpv1.Quote(t.ID))
		}
	}
}

func validateSecurityGroupTerms(terms []SecurityGroupSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.securityGroupSelectorTerms"
	checkTerms(path, len(terms), true, errs)
	for i, t := range terms {
		p := karpv1.Index(path, i)
		validateSelectorTags(p+".tags", t.Tags, errs)
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.Name == "":
			errs.Add(p, "expected at least one of tags, id, name, got none")
		case t.ID != "" && (len(t.Tags) > 0 || t.Name != ""):
			errs.Add(p+".id", "id is mutually exclusive with tags and name, got id %s", karpv1.Quote(t.ID))
		case t.Name != "" && len(t.Tags) > 0:
			errs.Add(p+".name", "name is mutually exclusive with tags and id, got name %s", karpv1.Quote(t.Name))
		}
		if t.ID != "" && !sgIDRE.MatchString(t.ID) {
			errs.Add(p+".id", "must match sg-[0-9a-z]+, got %s", karpv1.Quote(t.ID))
		}
	}
}

func validateCapacityReservationTerms(terms []CapacityReservationSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.capacityReservationSelectorTerms"
	checkTerms(path, len(terms), false, errs)
	for i, t := range terms {
		p := karpv1.Index(path, i)
		validateSelectorTags(p+".tags", t.Tags, errs)
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.InstanceMatchCriteria == "":
			errs.Add(p, "expected at least one of tags, id, instanceMatchCriteria, got none")
		case t.ID != "" && (len(t.Tags) > 0 || t.OwnerID != "" || t.InstanceMatchCriteria != ""):
			errs.Add(p+".id", "id is mutually exclusive with tags, ownerID and instanceMatchCriteria, got id %s", karpv1.Quote(t.ID))
		}
		if t.ID != "" && !crIDRE.MatchString(t.ID) {
			errs.Add(p+".id", "must match cr-[0-9a-z]+, got %s", karpv1.Quote(t.ID))
		}
		if t.OwnerID != "" && !ownerIDRE.MatchString(t.OwnerID) {
			errs.Add(p+".ownerID", "must be a 12-digit AWS account ID, got %s", karpv1.Quote(t.OwnerID))
		}
		if t.InstanceMatchCriteria != "" && t.InstanceMatchCriteria != "open" && t.InstanceMatchCriteria != "targeted" {
			errs.Add(p+".instanceMatchCriteria", "must be one of open, targeted, got %s", karpv1.Quote(t.InstanceMatchCriteria))
		}
	}
}

func validateAMITerms(terms []AMISelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.amiSelectorTerms"
	checkTerms(path, len(terms), true, errs)
	for i, t := range terms {
		p := karpv1.Index(path, i)
		validateSelectorTags(p+".tags", t.Tags, errs)
		others := len(t.Tags) > 0 || t.Name != "" || t.Owner != ""
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.Name == "" && t.Alias == "" && t.SSMParameter == "":
			errs.Add(p, "expected at least one of tags, id, name, alias, ssmParameter, got none")
		case t.ID != "" && (others || t.Alias != ""):
			errs.Add(p+".id", "id is mutually exclusive with alias, tags, name and owner, got id %s", karpv1.Quote(t.ID))
		case t.Alias != "" && others:
			errs.Add(p+".alias", "alias is mutually exclusive with id, tags, name and owner, got alias %s", karpv1.Quote(t.Alias))
		}
		if t.ID != "" && !amiIDRE.MatchString(t.ID) {
			errs.Add(p+".id", "must match ami-[0-9a-z]+, got %s", karpv1.Quote(t.ID))
		}
		if t.Alias != "" {
			validateAlias(p+".alias", t.Alias, errs)
			if len(terms) != 1 {
				errs.Add(p+".alias", "alias is mutually exclusive with other amiSelectorTerms, got alias %s among %d terms", karpv1.Quote(t.Alias), len(terms))
			}
		}
	}
}

func validateAlias(path, alias string, errs *karpv1.ValidationError) {
	if len(alias) > MaxAliasLength {
		errs.Add(path, "at most %d characters, got %s", MaxAliasLength, karpv1.Quote(alias))
		return
	}
	if !aliasRE.MatchString(alias) {
		errs.Add(path, "must match the format 'family@version', got %s", karpv1.Quote(alias))
		return
	}
	family, version, _ := strings.Cut(alias, "@")
	if _, ok := AliasFamilies[family]; !ok {
		errs.Add(path, "family must be one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025, got %s", karpv1.Quote(alias))
		return
	}
	if strings.HasPrefix(family, "windows") && version != "latest" {
		errs.Add(path, "windows families may only use version 'latest', got %s", karpv1.Quote(alias))
	}
}

func validateAMIFamily(in *EC2NodeClass, errs *karpv1.ValidationError) {
	fam := in.Spec.AMIFamily
	if fam != nil && !contains(AMIFamilies, *fam) {
		errs.Add("spec.amiFamily", "must be one of %s, got %s", strings.Join(AMIFamilies, ", "), karpv1.Quote(*fam))
		return
	}
	aliasFamily, _, hasAlias := in.Alias()
	switch {
	case !hasAlias && fam == nil:
		errs.Add("spec.amiFamily", "required when amiSelectorTerms has no alias term, got none")
	case hasAlias && fam != nil:
		want, ok := AliasFamilies[aliasFamily]
		if ok && *fam != want && *fam != AMIFamilyCustom {
			errs.Add("spec.amiFamily", "must be %s or Custom with alias family %s, got %s", want, karpv1.Quote(aliasFamily), karpv1.Quote(*fam))
		}
	}
}

// RestrictedTag returns why key may not be used in spec.tags, or "".
func RestrictedTag(key string) string {
	if key == "" {
		return "empty tag keys aren't supported"
	}
	for _, p := range RestrictedTagPrefixes {
		if strings.HasPrefix(key, p) {
			return "tag key is restricted (prefix " + p + " is set by Joiner)"
		}
	}
	if contains(RestrictedTags, key) {
		return "tag key is restricted (set by Joiner)"
	}
	return ""
}

func validateTags(tags map[string]string, errs *karpv1.ValidationError) {
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if why := RestrictedTag(k); why != "" {
			errs.Add(karpv1.Key("spec.tags", k), "%s, got %s", why, karpv1.Quote(k))
		}
	}
}

func validateKubelet(path string, k *KubeletConfiguration, errs *karpv1.ValidationError) {
	for i, ip := range k.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs.Add(karpv1.Index(path+".clusterDNS", i), "must be an IP address, got %s", karpv1.Quote(ip))
		}
	}
	nonNeg := func(field string, v *int32) {
		if v != nil && *v < 0 {
			errs.Add(path+"."+field, "must be non-negative, got %d", *v)
		}
	}
	nonNeg("maxPods", k.MaxPods)
	nonNeg("podsPerCore", k.PodsPerCore)
	nonNeg("evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod)
	pct := func(field string, v *int32) {
		if v != nil && (*v < 0 || *v > 100) {
			errs.Add(path+"."+field, "must be between 0 and 100, got %d", *v)
		}
	}
	pct("imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent)
	pct("imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
	if h, l := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent; h != nil && l != nil && *h <= *l {
		errs.Add(path+".imageGCHighThresholdPercent", "must be greater than imageGCLowThresholdPercent (%d), got %d", *l, *h)
	}
	reserved := func(field string, m map[string]string) {
		for _, key := range slices.Sorted(maps.Keys(m)) {
			p := karpv1.Key(path+"."+field, key)
			if !contains(ReservedResourceKeys, key) {
				errs.Add(p, "valid keys for %s are cpu, memory, ephemeral-storage, pid, got %s", field, karpv1.Quote(key))
			}
			if q, err := resource.ParseQuantity(m[key]); err != nil || q.Sign() < 0 || strings.HasPrefix(m[key], "-") {
				errs.Add(p, "must be a non-negative quantity such as \"100m\" or \"1Gi\", got %s", karpv1.Quote(m[key]))
			}
		}
	}
	reserved("systemReserved", k.SystemReserved)
	reserved("kubeReserved", k.KubeReserved)
	eviction := func(field string, m map[string]string) {
		for _, key := range slices.Sorted(maps.Keys(m)) {
			p := karpv1.Key(path+"."+field, key)
			if !contains(EvictionSignals, key) {
				errs.Add(p, "valid keys for %s are %s, got %s", field, strings.Join(EvictionSignals, ", "), karpv1.Quote(key))
			}
			v := m[key]
			if percentRE.MatchString(v) {
				continue
			}
			if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
				errs.Add(p, "must be a percentage such as \"10%%\" or a non-negative quantity such as \"100Mi\", got %s", karpv1.Quote(v))
			}
		}
	}
	eviction("evictionHard", k.EvictionHard)
	eviction("evictionSoft", k.EvictionSoft)
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoftGracePeriod)) {
		p := karpv1.Key(path+".evictionSoftGracePeriod", key)
		if !contains(EvictionSignals, key) {
			errs.Add(p, "valid keys for evictionSoftGracePeriod are %s, got %s", strings.Join(EvictionSignals, ", "), karpv1.Quote(key))
		}
		d := k.EvictionSoftGracePeriod[key]
		if d.IsNever() || d.Duration == nil || *d.Duration < 0 || !graceRE.MatchString(d.String()) {
			errs.Add(p, "must be a non-negative duration such as \"1m30s\", got %s", karpv1.Quote(d.String()))
		}
		if _, ok := k.EvictionSoft[key]; !ok {
			errs.Add(p, "evictionSoftGracePeriod key %s has no matching evictionSoft", karpv1.Quote(key))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoft)) {
		if _, ok := k.EvictionSoftGracePeriod[key]; !ok {
			errs.Add(karpv1.Key(path+".evictionSoft", key), "evictionSoft key %s has no matching evictionSoftGracePeriod", karpv1.Quote(key))
		}
	}
}

func validateBlockDeviceMappings(bdms []*BlockDeviceMapping, errs *karpv1.ValidationError) {
	const path = "spec.blockDeviceMappings"
	if len(bdms) > MaxBlockDeviceMappings {
		errs.Add(path, "at most %d block device mappings, got %d", MaxBlockDeviceMappings, len(bdms))
	}
	roots := 0
	for i, b := range bdms {
		p := karpv1.Index(path, i)
		if b == nil {
			errs.Add(p, "must not be null")
			continue
		}
		if b.RootVolume {
			roots++
			if roots == 2 {
				errs.Add(p+".rootVolume", "must have only one blockDeviceMappings with rootVolume, got a second one")
			}
		}
		e := b.EBS
		if e == nil {
			continue
		}
		hasSnapshot := e.SnapshotID != nil && *e.SnapshotID != ""
		if !hasSnapshot && e.VolumeSize == nil {
			errs.Add(p+".ebs", "snapshotID or volumeSize must be defined, got neither")
		}
		if e.VolumeSize != nil && !volumeSizeRE.MatchString(e.VolumeSize.String()) {
			errs.Add(p+".ebs.volumeSize", "must be 1-59000Gi, 1-64000G, 1-58Ti or 1-64T, got %s", karpv1.Quote(e.VolumeSize.String()))
		}
		if e.VolumeType != nil && !contains(VolumeTypes, *e.VolumeType) {
			errs.Add(p+".ebs.volumeType", "must be one of %s, got %s", strings.Join(VolumeTypes, ", "), karpv1.Quote(*e.VolumeType))
		}
		if r := e.VolumeInitializationRate; r != nil {
			if *r < MinVolumeInitRate || *r > MaxVolumeInitRate {
				errs.Add(p+".ebs.volumeInitializationRate", "must be between %d and %d MiB/s, got %d", MinVolumeInitRate, MaxVolumeInitRate, *r)
			}
			if !hasSnapshot {
				errs.Add(p+".ebs.volumeInitializationRate", "snapshotID must be set when volumeInitializationRate is set, got rate %d without a snapshot", *r)
			}
		}
	}
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
