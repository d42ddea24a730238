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
	MaxNetworkInterfaces   = 150
	MinHopLimit            = 1
	MaxHopLimit            = 64
	MinVolumeInitRate      = 100
	MaxVolumeInitRate      = 300
)

// Connection-tracking timeout bounds, in seconds.
const (
	MinTCPEstablishedTimeout = 60
	MaxTCPEstablishedTimeout = 432000
	MinUDPStreamTimeout      = 60
	MaxUDPStreamTimeout      = 180
	MinUDPTimeout            = 30
	MaxUDPTimeout            = 60
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
// Karpenter and Joiner set them on every instance. The joiner.io/ prefix is
// Joiner's own (Karpenter's CRD does not have it).
var (
	RestrictedTagPrefixes = []string{"kubernetes.io/cluster", karpv1.JoinerDomain + "/"}
	RestrictedTags        = []string{"eks:eks-cluster-name", karpv1.LabelNodePool, karpv1.Group + "/nodeclaim", karpv1.LabelNodeClass}
)

// The patterns of Karpenter's CRD, as written there (some are not anchored:
// "xsubnet-1" is a valid subnet id for the CRD, as for Karpenter).
const (
	SubnetIDPattern              = `subnet-[0-9a-z]+`
	SecurityGroupIDPattern       = `sg-[0-9a-z]+`
	AMIIDPattern                 = `ami-[0-9a-z]+`
	CapacityReservationIDPattern = `^cr-[0-9a-z]+$`
	OwnerIDPattern               = `^[0-9]{12}$`
	PlacementGroupIDPattern      = `^pg-[0-9a-z]+$`
	AliasPattern                 = `^[a-zA-Z0-9]+@.+$`
	// QuantityPattern bounds kubelet kubeReserved and systemReserved values.
	QuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	// EvictionPattern bounds kubelet evictionHard and evictionSoft values: a
	// percentage or a quantity (or "", through its empty alternative).
	EvictionPattern = `^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
	// VolumeSizePattern is Karpenter's EBS volume size rule, with its slips:
	// "Ti" and "T" alone match, and 18Ti, 19Ti, 28Ti... do not.
	VolumeSizePattern = `^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$`
)

var (
	subnetIDRE   = regexp.MustCompile(SubnetIDPattern)
	sgIDRE       = regexp.MustCompile(SecurityGroupIDPattern)
	amiIDRE      = regexp.MustCompile(AMIIDPattern)
	crIDRE       = regexp.MustCompile(CapacityReservationIDPattern)
	ownerIDRE    = regexp.MustCompile(OwnerIDPattern)
	pgIDRE       = regexp.MustCompile(PlacementGroupIDPattern)
	aliasRE      = regexp.MustCompile(AliasPattern)
	quantityRE   = regexp.MustCompile(QuantityPattern)
	evictionRE   = regexp.MustCompile(EvictionPattern)
	volumeSizeRE = regexp.MustCompile(VolumeSizePattern)
)

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

// Validate checks the EC2NodeClass against the rules of Karpenter's CRD
// (Karpenter has no runtime validation of it), plus Joiner's restricted
// joiner.io/ tags and what a kubelet would refuse: clusterDNS entries that
// are not IP addresses, and a negative evictionSoftGracePeriod. A field set
// to its zero value is taken as absent, where the CRD sees it set (a
// `role: ""` or `id: ""` the CRD rejects). It returns a
// *karpv1.ValidationError (errors.Is(err, karpv1.ErrInvalid)) listing every
// problem, one per line, each naming the field path and the value.
func (in *EC2NodeClass) Validate() error {
	errs := &karpv1.ValidationError{}
	s := &in.Spec
	validateSubnetTerms(s.SubnetSelectorTerms, errs)
	validateSecurityGroupTerms(s.SecurityGroupSelectorTerms, errs)
	validateCapacityReservationTerms(s.CapacityReservationSelectorTerms, errs)
	validatePlacementGroup(s.PlacementGroupSelector, errs)
	validateAMITerms(s.AMISelectorTerms, errs)
	validateAMIFamily(in, errs)
	switch {
	case s.Role != "" && s.InstanceProfile != nil:
		errs.Add("spec", "must specify exactly one of ['role', 'instanceProfile'], got role %s and instanceProfile %s", karpv1.Quote(s.Role), karpv1.Quote(*s.InstanceProfile))
	case s.Role == "" && s.InstanceProfile == nil:
		errs.Add("spec", "must specify exactly one of ['role', 'instanceProfile'], got neither")
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
	validateNetworkInterfaces(s.NetworkInterfaces, errs)
	enum := func(field string, v *string, allowed ...string) {
		if v != nil && !slices.Contains(allowed, *v) {
			errs.Add(field, "must be one of %s, got %s", strings.Join(allowed, ", "), karpv1.Quote(*v))
		}
	}
	if m := s.MetadataOptions; m != nil {
		enum("spec.metadataOptions.httpEndpoint", m.HTTPEndpoint, "enabled", "disabled")
		enum("spec.metadataOptions.httpProtocolIPv6", m.HTTPProtocolIPv6, "enabled", "disabled")
		enum("spec.metadataOptions.httpTokens", m.HTTPTokens, "required", "optional")
		if h := m.HTTPPutResponseHopLimit; h != nil && (*h < MinHopLimit || *h > MaxHopLimit) {
			errs.Add("spec.metadataOptions.httpPutResponseHopLimit", "must be between %d and %d, got %d", MinHopLimit, MaxHopLimit, *h)
		}
	}
	if c := s.ConnectionTracking; c != nil {
		validateConnectionTracking("spec.connectionTracking", c, errs)
	}
	if c := s.CPUOptions; c != nil {
		enum("spec.cpuOptions.nestedVirtualization", c.NestedVirtualization, "enabled", "disabled")
	}
	if s.IPPrefixCount != nil && *s.IPPrefixCount < 0 {
		errs.Add("spec.ipPrefixCount", "must be non-negative, got %d", *s.IPPrefixCount)
	}
	return errs.OrNil()
}

// validateSelectorTags: at most 20 tags, no empty key or value. A term's
// tags are set when the map is (even empty), as the CRD's has() sees them.
func validateSelectorTags(path string, tags map[string]string, errs *karpv1.ValidationError) {
	if len(tags) > MaxSelectorTags {
		errs.Add(path, "at most %d tags, got %d", MaxSelectorTags, len(tags))
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if k == "" {
			errs.Add(path, "empty tag keys or values aren't supported, got key \"\" with value %s", karpv1.Quote(tags[k]))
		} else if tags[k] == "" {
			errs.Add(karpv1.Key(path, k), "empty tag keys or values aren't supported (use \"*\" for any value), got \"\"")
		}
	}
}

// eachTerm checks what every selector term list shares: at most
// MaxSelectorTerms terms and, per term, its tags, that one of fields is set
// (get reports none when no field is), and its id against idRE; then check,
// if not nil, applies the term's own rules.
func eachTerm[T any](path string, terms []T, fields string, idRE *regexp.Regexp, get func(T) (tags map[string]string, id string, none bool), check func(p string, t T), errs *karpv1.ValidationError) {
	if len(terms) > MaxSelectorTerms {
		errs.Add(path, "at most %d terms, got %d", MaxSelectorTerms, len(terms))
	}
	for i, t := range terms {
		p := karpv1.Index(path, i)
		tags, id, none := get(t)
		validateSelectorTags(p+".tags", tags, errs)
		if none {
			errs.Add(p, "expected at least one, got none, %s", fields)
		}
		if id != "" && !idRE.MatchString(id) {
			errs.Add(p+".id", "must match %s, got %s", idRE, karpv1.Quote(id))
		}
		if check != nil {
			check(p, t)
		}
	}
}

// allTerms reports whether every one of n terms breaks a rule; Karpenter's
// "mutually exclusive" rules (!self.all(...)) reject only then.
func allTerms(n int, breaks func(i int) bool) bool {
	for i := range n {
		if !breaks(i) {
			return false
		}
	}
	return true
}

func validateSubnetTerms(terms []SubnetSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.subnetSelectorTerms"
	if len(terms) == 0 {
		errs.Add(path, "subnetSelectorTerms cannot be empty, got none")
		return
	}
	eachTerm(path, terms, "['tags', 'id']", subnetIDRE, func(t SubnetSelectorTerm) (map[string]string, string, bool) {
		return t.Tags, t.ID, t.Tags == nil && t.ID == ""
	}, nil, errs)
	if allTerms(len(terms), func(i int) bool { return terms[i].ID != "" && terms[i].Tags != nil }) {
		errs.Add(path, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term, got id %s with tags in every term", karpv1.Quote(terms[0].ID))
	}
}

func validateSecurityGroupTerms(terms []SecurityGroupSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.securityGroupSelectorTerms"
	if len(terms) == 0 {
		errs.Add(path, "securityGroupSelectorTerms cannot be empty, got none")
		return
	}
	eachTerm(path, terms, "['tags', 'id', 'name']", sgIDRE, func(t SecurityGroupSelectorTerm) (map[string]string, string, bool) {
		return t.Tags, t.ID, t.Tags == nil && t.ID == "" && t.Name == ""
	}, nil, errs)
	if allTerms(len(terms), func(i int) bool { return terms[i].ID != "" && (terms[i].Tags != nil || terms[i].Name != "") }) {
		errs.Add(path, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term, got id %s with tags or name in every term", karpv1.Quote(terms[0].ID))
	}
	if allTerms(len(terms), func(i int) bool { return terms[i].Name != "" && (terms[i].Tags != nil || terms[i].ID != "") }) {
		errs.Add(path, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term, got name %s with tags or id in every term", karpv1.Quote(terms[0].Name))
	}
}

func validateCapacityReservationTerms(terms []CapacityReservationSelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.capacityReservationSelectorTerms"
	if terms == nil {
		return
	}
	eachTerm(path, terms, "['tags', 'id', 'instanceMatchCriteria']", crIDRE, func(t CapacityReservationSelectorTerm) (map[string]string, string, bool) {
		return t.Tags, t.ID, t.Tags == nil && t.ID == "" && t.InstanceMatchCriteria == ""
	}, func(p string, t CapacityReservationSelectorTerm) {
		if t.OwnerID != "" && !ownerIDRE.MatchString(t.OwnerID) {
			errs.Add(p+".ownerID", "must be a 12-digit AWS account ID, got %s", karpv1.Quote(t.OwnerID))
		}
		if t.InstanceMatchCriteria != "" && t.InstanceMatchCriteria != "open" && t.InstanceMatchCriteria != "targeted" {
			errs.Add(p+".instanceMatchCriteria", "must be one of open, targeted, got %s", karpv1.Quote(t.InstanceMatchCriteria))
		}
	}, errs)
	// Karpenter's rule is !self.all(...): it also rejects an empty list.
	if allTerms(len(terms), func(i int) bool {
		t := terms[i]
		return t.ID != "" && (t.Tags != nil || t.OwnerID != "" || t.InstanceMatchCriteria != "")
	}) {
		errs.Add(path, "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term, got %d terms each with id and tags, ownerID or instanceMatchCriteria (an empty list is rejected too)", len(terms))
	}
}

func validatePlacementGroup(pg *PlacementGroupSelector, errs *karpv1.ValidationError) {
	const path = "spec.placementGroupSelector"
	if pg == nil {
		return
	}
	switch {
	case pg.Name == nil && pg.ID == nil:
		errs.Add(path, "expected at least one, got none, ['name', 'id']")
	case pg.Name != nil && pg.ID != nil:
		errs.Add(path, "'name' and 'id' are mutually exclusive, got name %s and id %s", karpv1.Quote(*pg.Name), karpv1.Quote(*pg.ID))
	}
	if pg.Name != nil && *pg.Name == "" {
		errs.Add(path+".name", "must not be empty, got \"\"")
	}
	if pg.ID != nil && !pgIDRE.MatchString(*pg.ID) {
		errs.Add(path+".id", "must match %s, got %s", PlacementGroupIDPattern, karpv1.Quote(*pg.ID))
	}
}

func validateAMITerms(terms []AMISelectorTerm, errs *karpv1.ValidationError) {
	const path = "spec.amiSelectorTerms"
	if len(terms) == 0 {
		errs.Add(path, "at least one term is required, got none")
		return
	}
	eachTerm(path, terms, "['tags', 'id', 'name', 'alias', 'ssmParameter']", amiIDRE, func(t AMISelectorTerm) (map[string]string, string, bool) {
		return t.Tags, t.ID, t.Tags == nil && t.ID == "" && t.Name == "" && t.Alias == "" && t.SSMParameter == ""
	}, func(p string, t AMISelectorTerm) {
		others := t.Tags != nil || t.Name != "" || t.Owner != ""
		switch {
		case t.ID != "" && (others || t.Alias != ""):
			errs.Add(p+".id", "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (alias, tags, name, owner), got id %s", karpv1.Quote(t.ID))
		case t.Alias != "" && others:
			errs.Add(p+".alias", "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (id, tags, name, owner), got alias %s", karpv1.Quote(t.Alias))
		}
		if t.Alias != "" {
			validateAlias(p+".alias", t.Alias, errs)
			if len(terms) != 1 {
				errs.Add(p+".alias", "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms, got alias %s among %d terms", karpv1.Quote(t.Alias), len(terms))
			}
		}
	}, errs)
}

func validateAlias(path, alias string, errs *karpv1.ValidationError) {
	if len(alias) > MaxAliasLength {
		errs.Add(path, "at most %d characters, got %s", MaxAliasLength, karpv1.Quote(alias))
	}
	if !aliasRE.MatchString(alias) {
		errs.Add(path, "'alias' is improperly formatted, must match the format 'family@version', got %s", karpv1.Quote(alias))
		return
	}
	family, version, _ := strings.Cut(alias, "@")
	if _, ok := AliasFamilies[family]; !ok {
		errs.Add(path, "family is not supported, must be one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025, got %s", karpv1.Quote(alias))
		return
	}
	if strings.HasPrefix(family, "windows") && version != "latest" {
		errs.Add(path, "windows families may only specify version 'latest', got %s", karpv1.Quote(alias))
	}
}

// aliasFamily is the family of an alias as the CRD's rules compute it,
// alias.find('^[^@]+').
func aliasFamily(alias string) string {
	f, _, _ := strings.Cut(alias, "@")
	return f
}

func validateAMIFamily(in *EC2NodeClass, errs *karpv1.ValidationError) {
	fam := in.Spec.AMIFamily
	if fam != nil && !slices.Contains(AMIFamilies, *fam) {
		errs.Add("spec.amiFamily", "must be one of %s, got %s", strings.Join(AMIFamilies, ", "), karpv1.Quote(*fam))
	}
	hasAlias := false
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias == "" {
			continue
		}
		hasAlias = true
		want, ok := AliasFamilies[aliasFamily(t.Alias)]
		if ok && fam != nil && *fam != want && *fam != AMIFamilyCustom {
			errs.Add("spec.amiFamily", "if set, amiFamily must be '%s' or 'Custom' when using a %s alias, got %s", want, want, karpv1.Quote(*fam))
		}
	}
	if !hasAlias && fam == nil && len(in.Spec.AMISelectorTerms) > 0 {
		errs.Add("spec.amiFamily", "must specify amiFamily if amiSelectorTerms does not contain an alias, got none")
	}
}

// RestrictedTag returns why key may not be used in spec.tags, or "".
func RestrictedTag(key string) string {
	if key == "" {
		return "empty tag keys aren't supported"
	}
	for _, p := range RestrictedTagPrefixes {
		if strings.HasPrefix(key, p) {
			return "tag contains a restricted tag matching " + p + " (set by Karpenter and Joiner)"
		}
	}
	if slices.Contains(RestrictedTags, key) {
		return "tag contains a restricted tag matching " + key + " (set by Karpenter and Joiner)"
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
			errs.Add(karpv1.Index(path+".clusterDNS", i), "must be an IP address (kubelet refuses anything else), got %s", karpv1.Quote(ip))
		}
	}
	nonNeg := func(field string, v *int32) {
		if v != nil && *v < 0 {
			errs.Add(path+"."+field, "must be non-negative, got %d", *v)
		}
	}
	nonNeg("maxPods", k.MaxPods)
	nonNeg("podsPerCore", k.PodsPerCore)
	pct := func(field string, v *int32) {
		if v != nil && (*v < 0 || *v > 100) {
			errs.Add(path+"."+field, "must be between 0 and 100, got %d", *v)
		}
	}
	pct("imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent)
	pct("imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
	if h, l := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent; h != nil && l != nil && *h <= *l {
		errs.Add(path+".imageGCHighThresholdPercent", "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent (%d), got %d", *l, *h)
	}
	reserved := func(field string, m map[string]string) {
		for _, key := range slices.Sorted(maps.Keys(m)) {
			p := karpv1.Key(path+"."+field, key)
			if !slices.Contains(ReservedResourceKeys, key) {
				errs.Add(p, "valid keys for %s are ['cpu','memory','ephemeral-storage','pid'], got %s", field, karpv1.Quote(key))
			}
			if v := m[key]; strings.HasPrefix(v, "-") || !quantityRE.MatchString(v) {
				errs.Add(p, "must be a non-negative quantity such as \"100m\" or \"1Gi\", got %s", karpv1.Quote(v))
			}
		}
	}
	reserved("systemReserved", k.SystemReserved)
	reserved("kubeReserved", k.KubeReserved)
	eviction := func(field string, m map[string]string) {
		for _, key := range slices.Sorted(maps.Keys(m)) {
			p := karpv1.Key(path+"."+field, key)
			if !slices.Contains(EvictionSignals, key) {
				errs.Add(p, "valid keys for %s are %s, got %s", field, strings.Join(EvictionSignals, ", "), karpv1.Quote(key))
			}
			if v := m[key]; !evictionRE.MatchString(v) {
				errs.Add(p, "must be a percentage such as \"10%%\" or a quantity such as \"100Mi\", got %s", karpv1.Quote(v))
			}
		}
	}
	eviction("evictionHard", k.EvictionHard)
	eviction("evictionSoft", k.EvictionSoft)
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoftGracePeriod)) {
		p := karpv1.Key(path+".evictionSoftGracePeriod", key)
		if !slices.Contains(EvictionSignals, key) {
			errs.Add(p, "valid keys for evictionSoftGracePeriod are %s, got %s", strings.Join(EvictionSignals, ", "), karpv1.Quote(key))
		}
		if d := k.EvictionSoftGracePeriod[key]; d.Duration == nil || *d.Duration < 0 {
			errs.Add(p, "must be a non-negative duration such as \"1m30s\", got %s", karpv1.Quote(d.String()))
		}
		if _, ok := k.EvictionSoft[key]; !ok {
			errs.Add(p, "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft: %s", karpv1.Quote(key))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(k.EvictionSoft)) {
		if _, ok := k.EvictionSoftGracePeriod[key]; !ok {
			errs.Add(karpv1.Key(path+".evictionSoft", key), "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod: %s", karpv1.Quote(key))
		}
	}
}

// VolumeSizeValid reports whether an EBS volume size is one Karpenter's CRD
// accepts: n Gi (1..59000), n G (1..64000), 58Ti, or the same sizes in Ti
// and T. The Go type keeps the size's value, not its text, so a size the
// CRD refuses as written (0.5Ti, 18Ti) passes if its value is allowed; the
// API server never stores those.
func VolumeSizeValid(q *resource.Quantity) bool {
	if volumeSizeRE.MatchString(q.String()) {
		return true
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return false
	}
	const gi, g = int64(1) << 30, int64(1_000_000_000)
	return v%gi == 0 && v/gi <= 59000 || v%g == 0 && v/g <= 64000 || v == 58<<40
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
		if e.SnapshotID == nil && e.VolumeSize == nil {
			errs.Add(p+".ebs", "snapshotID or volumeSize must be defined, got neither")
		}
		if e.VolumeSize != nil && !VolumeSizeValid(e.VolumeSize) {
			errs.Add(p+".ebs.volumeSize", "must be 1-59000Gi, 1-64000G, 1-58Ti or 1-64T, got %s", karpv1.Quote(e.VolumeSize.String()))
		}
		if e.VolumeType != nil && !slices.Contains(VolumeTypes, *e.VolumeType) {
			errs.Add(p+".ebs.volumeType", "must be one of %s, got %s", strings.Join(VolumeTypes, ", "), karpv1.Quote(*e.VolumeType))
		}
		if r := e.VolumeInitializationRate; r != nil {
			if *r < MinVolumeInitRate || *r > MaxVolumeInitRate {
				errs.Add(p+".ebs.volumeInitializationRate", "must be between %d and %d MiB/s, got %d", MinVolumeInitRate, MaxVolumeInitRate, *r)
			}
			if e.SnapshotID == nil || *e.SnapshotID == "" {
				errs.Add(p+".ebs.volumeInitializationRate", "snapshotID must be set when volumeInitializationRate is set, got rate %d without a snapshot", *r)
			}
		}
	}
}

func validateNetworkInterfaces(nis []*NetworkInterface, errs *karpv1.ValidationError) {
	const path = "spec.networkInterfaces"
	if len(nis) > MaxNetworkInterfaces {
		errs.Add(path, "at most %d network interfaces, got %d", MaxNetworkInterfaces, len(nis))
	}
	primary := false
	for i, n := range nis {
		p := karpv1.Index(path, i)
		if n == nil {
			errs.Add(p, "must not be null")
			continue
		}
		if n.NetworkCardIndex < 0 {
			errs.Add(p+".networkCardIndex", "must be non-negative, got %d", n.NetworkCardIndex)
		}
		if n.DeviceIndex < 0 {
			errs.Add(p+".deviceIndex", "must be non-negative, got %d", n.DeviceIndex)
		}
		if n.InterfaceType != InterfaceTypeInterface && n.InterfaceType != InterfaceTypeEFAOnly {
			errs.Add(p+".interfaceType", "must be one of interface, efa-only, got %s", karpv1.Quote(string(n.InterfaceType)))
		}
		if n.NetworkCardIndex == 0 && n.DeviceIndex == 0 && n.InterfaceType == InterfaceTypeInterface {
			primary = true
		}
		for j, m := range nis[:i] {
			if m == nil {
				continue
			}
			if m.NetworkCardIndex == n.NetworkCardIndex && m.DeviceIndex == n.DeviceIndex {
				errs.Add(p, "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs: %d/%d is also [%d]", n.NetworkCardIndex, n.DeviceIndex, j)
			} else if n.InterfaceType == InterfaceTypeEFAOnly && m.InterfaceType == InterfaceTypeEFAOnly && m.NetworkCardIndex == n.NetworkCardIndex {
				errs.Add(p, "networkInterfaces can have at most one efa-only device per network card: card %d also has [%d]", n.NetworkCardIndex, j)
			}
		}
	}
	if len(nis) > 0 && !primary {
		errs.Add(path, "networkInterfaces must include a primary interface with interfaceType='interface' (networkCardIndex 0, deviceIndex 0), got none")
	}
}

func validateConnectionTracking(path string, c *ConnectionTracking, errs *karpv1.ValidationError) {
	if c.TCPEstablishedTimeout == nil && c.UDPStreamTimeout == nil && c.UDPTimeout == nil {
		errs.Add(path, "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set, got none")
	}
	bound := func(field string, v *int32, lo, hi int32) {
		if v != nil && (*v < lo || *v > hi) {
			errs.Add(path+"."+field, "must be between %d and %d seconds, got %d", lo, hi, *v)
		}
	}
	bound("tcpEstablishedTimeout", c.TCPEstablishedTimeout, MinTCPEstablishedTimeout, MaxTCPEstablishedTimeout)
	bound("udpStreamTimeout", c.UDPStreamTimeout, MinUDPStreamTimeout, MaxUDPStreamTimeout)
	bound("udpTimeout", c.UDPTimeout, MinUDPTimeout, MaxUDPTimeout)
}
