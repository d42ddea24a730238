package aws_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
)

// TestNewestImagePerRequirements ports Karpenter's "AMI List requirements"
// and sorting cases: per requirement set a non-deprecated image beats a
// deprecated one whatever their ages, then the newer wins, then the
// greater name; the kept images are listed newest first, ties by ID.
func TestNewestImagePerRequirements(t *testing.T) {
	const (
		older = "2021-08-31T00:10:42.000Z"
		newer = "2021-08-31T00:12:42.000Z"
	)
	ami := func(id, name, created, arch string, deprecated bool) cloud.AMI {
		return cloud.AMI{ID: id, Name: name, CreationDate: created, Arch: arch, Deprecated: deprecated}
	}
	for _, tc := range []struct {
		name  string
		found []cloud.AMI
		want  []string // IDs, in order
	}{
		{name: "the older non-deprecated image over a newer deprecated one",
			found: []cloud.AMI{ami("ami-new", "a", newer, "amd64", true), ami("ami-old", "a", older, "amd64", false)},
			want:  []string{"ami-old"}},
		{name: "same creation time: the non-deprecated one",
			found: []cloud.AMI{ami("ami-1", "a", older, "amd64", true), ami("ami-2", "a", older, "amd64", false)},
			want:  []string{"ami-2"}},
		{name: "same creation time, different names: deprecation first, not the name",
			found: []cloud.AMI{ami("ami-1", "z", older, "amd64", true), ami("ami-2", "a", older, "amd64", false)},
			want:  []string{"ami-2"}},
		{name: "both deprecated: the newer",
			found: []cloud.AMI{ami("ami-old", "a", older, "amd64", true), ami("ami-new", "a", newer, "amd64", true)},
			want:  []string{"ami-new"}},
		{name: "same creation time, neither deprecated: the greater name",
			found: []cloud.AMI{ami("ami-1", "b", older, "amd64", false), ami("ami-2", "c", older, "amd64", false), ami("ami-3", "a", older, "amd64", false)},
			want:  []string{"ami-2"}},
		{name: "per architecture, newest first",
			found: []cloud.AMI{ami("ami-x", "a", older, "amd64", false), ami("ami-y", "a", newer, "arm64", false)},
			want:  []string{"ami-y", "ami-x"}},
		{name: "same creation time across architectures: by ID",
			found: []cloud.AMI{ami("ami-4", "a", older, "arm64", false), ami("ami-1", "a", older, "amd64", false)},
			want:  []string{"ami-1", "ami-4"}},
		{name: "deprecated images of the same date across architectures: by ID",
			found: []cloud.AMI{ami("ami-4", "a", older, "arm64", true), ami("ami-1", "a", older, "amd64", true)},
			want:  []string{"ami-1", "ami-4"}},
		{name: "an image without a creation date ranks last",
			found: []cloud.AMI{ami("ami-undated", "z", "", "amd64", false), ami("ami-dated", "a", older, "amd64", false)},
			want:  []string{"ami-dated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range joineraws.NewestPerRequirements(tc.found) {
				got = append(got, a.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// TestImageDeprecation: an image is deprecated once its deprecation time
// is not after now (Karpenter compares whole seconds: <= now); no time
// or one to come is not; images of other architectures (i386) are left
// out, as Karpenter's AWSToKubeArchitectures skips them.
func TestImageDeprecation(t *testing.T) {
	e := newEnv(t)
	now := e.clock.Now()
	for _, tc := range []struct {
		name       string
		arch       ec2types.ArchitectureValues
		deprecates string
		want       []string // arch/deprecated
	}{
		{name: "no deprecation time", arch: ec2types.ArchitectureValuesX8664, want: []string{"amd64/false"}},
		{name: "deprecated an hour ago", arch: ec2types.ArchitectureValuesX8664, deprecates: now.Add(-time.Hour).Format(time.RFC3339), want: []string{"amd64/true"}},
		{name: "deprecated a second ago, EC2's millisecond format", arch: ec2types.ArchitectureValuesX8664, deprecates: now.Add(-time.Second).Format("2006-01-02T15:04:05.000Z"), want: []string{"amd64/true"}},
		{name: "deprecated now", arch: ec2types.ArchitectureValuesArm64, deprecates: now.Format(time.RFC3339), want: []string{"arm64/true"}},
		{name: "deprecated tomorrow", arch: ec2types.ArchitectureValuesArm64, deprecates: now.Add(24 * time.Hour).Format(time.RFC3339), want: []string{"arm64/false"}},
		{name: "i386 is skipped", arch: ec2types.ArchitectureValuesI386},
		{name: "x86_64_mac is skipped", arch: ec2types.ArchitectureValuesX8664Mac},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := ec2types.Image{ImageId: aws.String("ami-1"), Name: aws.String("n"), Architecture: tc.arch, CreationDate: aws.String("2021-08-31T00:10:42.000Z")}
			if tc.deprecates != "" {
				im.DeprecationTime = aws.String(tc.deprecates)
			}
			var got []string
			for _, a := range e.provider.AMIsOf(im) {
				got = append(got, a.Arch+"/"+map[bool]string{true: "true", false: "false"}[a.Deprecated])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("AMIs %v, want %v", got, tc.want)
			}
		})
	}
}
