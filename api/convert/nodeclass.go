package convert

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
)

// Annotations Karpenter v1.0's EC2NodeClass conversion reads and writes
// (aws/karpenter-provider-aws pkg/apis/v1/labels.go).
const (
	// AnnotationUbuntuCompatibility marks a class converted from amiFamily
	// Ubuntu: its value lists what the conversion changed (UbuntuAMIFamily,
	// then UbuntuBlockDeviceMappings, then UbuntuIncompatible), so that
	// Karpenter can convert it back.
	AnnotationUbuntuCompatibility = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu"
	// AnnotationAliasVersion on a v1beta1 class is the version of the v1
	// alias it was converted from; converting back restores it.
	AnnotationAliasVersion = "compatibility.karpenter.k8s.aws/v1-alias-version"

	UbuntuAMIFamily           = "amiFamily"
	UbuntuBlockDeviceMappings = "blockDeviceMappings"
	UbuntuIncompatible        = "incompatible"

	// UbuntuAMIPlaceholder is the AMI selector term Karpenter's conversion
	// writes for an Ubuntu class that selects no AMIs, so that the v1 class
	// is valid; Karpenter then leaves the class alone (not ready).
	UbuntuAMIPlaceholder = "ami-placeholder"
)

// ubuntuRootVolume is the root volume Karpenter's conversion gives an Ubuntu
// class without block device mappings: Ubuntu's default, which the AL2
// family it becomes does not have (AL2's root device is /dev/xvda).
func ubuntuRootVolume() *awsv1.BlockDeviceMapping {
	size := resource.MustParse("20Gi")
	return &awsv1.BlockDeviceMapping{
		DeviceName: stringPtr("/dev/sda1"),
		RootVolume: true,
		EBS:        &awsv1.BlockDevice{Encrypted: boolPtr(true), VolumeType: stringPtr("gp3"), VolumeSize: &size},
	}
}

// Metadata options of every legacy node class whose metadataOptions (or a
// field of them) were unset: the v1beta1 CRD defaults, which the API server
// wrote into every stored v1beta1 EC2NodeClass (karpenter-convert leaves
// them unset) and Karpenter's v1 conversion copies. A v1alpha1 template
// without metadataOptions launched with the same (Karpenter v0.32's
// DefaultMetadataOptions). v1's own default hop limit is 1, which would cut
// pods off IMDS on nodes that had it.
const (
	legacyHTTPEndpoint     = "enabled"
	legacyHTTPProtocolIPv6 = "disabled"
	legacyHopLimit         = int64(2)
	legacyHTTPTokens       = "required"
)

// metadataOptions keeps the legacy values and fills unset ones with the
// v1beta1 defaults.
func metadataOptions(m *awsv1alpha1.MetadataOptions) *awsv1.MetadataOptions {
	if m == nil {
		m = &awsv1alpha1.MetadataOptions{}
	}
	out := &awsv1.MetadataOptions{
		HTTPEndpoint:            m.HTTPEndpoint,
		HTTPProtocolIPv6:        m.HTTPProtocolIPv6,
		HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit,
		HTTPTokens:              m.HTTPTokens,
	}
	if out.HTTPEndpoint == nil {
		out.HTTPEndpoint = stringPtr(legacyHTTPEndpoint)
	}
	if out.HTTPProtocolIPv6 == nil {
		out.HTTPProtocolIPv6 = stringPtr(legacyHTTPProtocolIPv6)
	}
	if out.HTTPPutResponseHopLimit == nil {
		h := legacyHopLimit
		out.HTTPPutResponseHopLimit = &h
	}
	if out.HTTPTokens == nil {
		out.HTTPTokens = stringPtr(legacyHTTPTokens)
	}
	return out
}

// blockDevice copies an EBS volume (the same fields since v1alpha1).
func blockDevice(e *awsv1alpha1.BlockDevice) *awsv1.BlockDevice {
	if e == nil {
		return nil
	}
	return &awsv1.BlockDevice{
		DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
		KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
		VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
	}
}

// identity settles spec.role and spec.instanceProfile. A class that names
// neither relied on the aws.defaultInstanceProfile setting (v1alpha1; a
// v1beta1 class had to name one): it gets the default role or instance
// profile of the options, or RolePlaceholder as karpenter-convert writes;
// unset says what was missing, for the warning.
func (c *converter) identity(what string, spec *awsv1.EC2NodeClassSpec, role string, profile *string, unset string) {
	switch {
	case profile != nil && *profile != "":
		spec.Role, spec.InstanceProfile = role, stringPtr(*profile)
		return
	case role != "":
		spec.Role = role
		return
	}
	switch {
	case c.opts.DefaultInstanceProfile != "":
		spec.InstanceProfile = stringPtr(c.opts.DefaultInstanceProfile)
		c.warnf(what, "%s; written as instanceProfile %s (the default instance profile given)", unset, c.opts.DefaultInstanceProfile)
	case c.opts.DefaultRole != "":
		spec.Role = c.opts.DefaultRole
		c.warnf(what, "%s; written as role %s (the default role given)", unset, c.opts.DefaultRole)
	default:
		spec.Role = RolePlaceholder
		c.warnf(what, "%s; written as role %s, as karpenter-convert does: substitute your node role (envsubst) or convert with --default-role or --default-instance-profile", unset, RolePlaceholder)
	}
}

// amiAlias returns the v1 alias for a family's AMIs at version, if the
// family has one in v1.
func amiAlias(family, version string) (string, bool) {
	switch family {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket,
		awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022:
		return strings.ToLower(family) + "@" + version, true
	}
	return "", false
}

// amiSelection is what a legacy class's amiFamily and AMI selector become.
type amiSelection struct {
	family *string
	terms  []awsv1.AMISelectorTerm
	// ubuntu lists the Ubuntu compatibility changes, empty for other
	// families.
	ubuntu []string
}

// selectAMIs follows Karpenter's v1 conversion: a family with a v1 alias and
// no terms becomes the alias (at aliasVersion) and no amiFamily; terms keep
// the family; Ubuntu becomes AL2 with its terms (or the placeholder term)
// and Ubuntu's root volume when bdms is empty. A legacy family left unset
// is AL2 (karpenter-convert's choice). selectorPath explains where AMIs
// would have been selected, for errors.
func (c *converter) selectAMIs(what, path string, family *string, terms []awsv1.AMISelectorTerm, bdms int, aliasVersion, selectorPath string) (amiSelection, error) {
	f := awsv1.AMIFamilyAL2
	if family != nil && *family != "" {
		f = *family
	}
	if f == awsv1.AMIFamilyUbuntu {
		return c.ubuntu(what, path, terms, bdms), nil
	}
	if len(terms) > 0 {
		return amiSelection{family: &f, terms: terms}, nil
	}
	alias, ok := amiAlias(f, aliasVersion)
	if !ok {
		return amiSelection{}, fmt.Errorf("%s: %s: requires AMI selector terms (%s)", path, f, selectorPath)
	}
	return amiSelection{terms: []awsv1.AMISelectorTerm{{Alias: alias}}}, nil
}

// ubuntu is Karpenter v1.0's conversion of an Ubuntu class (its v1
// migration guide shows the result): AL2, which has Ubuntu's user data
// format, with the class's AMI selector terms; Ubuntu's root volume
// (/dev/sda1) when the class has no block device mappings; the placeholder
// term when it selects no AMIs; and the annotation listing the changes.
func (c *converter) ubuntu(what, path string, terms []awsv1.AMISelectorTerm, bdms int) amiSelection {
	s := amiSelection{family: stringPtr(awsv1.AMIFamilyAL2), terms: terms, ubuntu: []string{UbuntuAMIFamily}}
	did := "AL2 (the same user data format)"
	if len(terms) > 0 {
		did += " with the selected AMIs"
	}
	if bdms == 0 {
		s.ubuntu = append(s.ubuntu, UbuntuBlockDeviceMappings)
		did += " and Ubuntu's root volume (/dev/sda1, 20Gi gp3, encrypted)"
	} else {
		did += "; your blockDeviceMappings are kept (Ubuntu's root device is /dev/sda1)"
	}
	c.warnf(what, "%s Ubuntu has no v1 equivalent; written as Karpenter's v1 conversion does: %s", path, did)
	if len(terms) == 0 {
		s.ubuntu = append(s.ubuntu, UbuntuIncompatible)
		s.terms = []awsv1.AMISelectorTerm{{ID: UbuntuAMIPlaceholder}}
		c.warnf(what, "%s Ubuntu selects no AMIs: written with the amiSelectorTerms placeholder id %s, as Karpenter's v1 conversion does; the class launches nothing until you select your Ubuntu AMIs", path, UbuntuAMIPlaceholder)
	}
	return s
}

// apply writes the selection into spec and meta; Ubuntu's root volume goes
// in only when spec has no block device mappings.
func (s amiSelection) apply(spec *awsv1.EC2NodeClassSpec, meta *metav1.ObjectMeta) {
	spec.AMIFamily, spec.AMISelectorTerms = s.family, s.terms
	if len(s.ubuntu) == 0 {
		return
	}
	if len(spec.BlockDeviceMappings) == 0 {
		spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{ubuntuRootVolume()}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationUbuntuCompatibility] = strings.Join(s.ubuntu, ",")
}

func stringPtr(s string) *string { return &s }

func boolPtr(b bool) *bool { return &b }
