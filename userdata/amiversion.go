package userdata

import (
	"strconv"
	"strings"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// BottlerocketVersion is the Bottlerocket release an EC2NodeClass selects,
// found as Karpenter finds it: the version of an alias amiSelectorTerm
// ("bottlerocket@v1.46.0" -> "v1.46.0", "bottlerocket@latest" ->
// "latest"); else the version in a name term; else in the name of the
// status AMI an id term selects; else in the name of any status AMI whose
// name mentions bottlerocket. A version in a name is its first
// dash-separated field that starts with "v" and holds a dot
// ("bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a" -> "v1.46.0").
// "" when none says.
func BottlerocketVersion(nc *awsv1.EC2NodeClass) string {
	terms := nc.Spec.AMISelectorTerms
	for _, t := range terms {
		if t.Alias == "" {
			continue
		}
		if parts := strings.Split(t.Alias, "@"); len(parts) == 2 {
			return parts[1]
		}
	}
	for _, t := range terms {
		if t.Name == "" {
			continue
		}
		if v := versionInName(t.Name); v != "" {
			return v
		}
	}
	isBottlerocket := func(a awsv1.AMI) bool { return a.Name != "" && strings.Contains(a.Name, "bottlerocket") }
	for _, t := range terms {
		if t.ID == "" {
			continue
		}
		for _, a := range nc.Status.AMIs {
			if a.ID == t.ID && isBottlerocket(a) {
				if v := versionInName(a.Name); v != "" {
					return v
				}
				break
			}
		}
	}
	for _, a := range nc.Status.AMIs {
		if isBottlerocket(a) {
			if v := versionInName(a.Name); v != "" {
				return v
			}
		}
	}
	return ""
}

// versionInName is the first dash-separated field of an image name that
// starts with "v" and holds a dot.
func versionInName(name string) string {
	for f := range strings.SplitSeq(name, "-") {
		if strings.HasPrefix(f, "v") && strings.Contains(f, ".") {
			return f
		}
	}
	return ""
}

// SupportsDefaultBind reports whether a Bottlerocket release binds its
// ephemeral storage to the default directories by itself ("apiclient
// ephemeral-storage bind" without --dirs): "latest", or 1.46.0 and later
// ("v" prefix optional; a version needs three dot-separated fields, of
// which the first two are numbers). Unknown or unparsable: false.
func SupportsDefaultBind(version string) bool {
	if version == "latest" {
		return true
	}
	parts := strings.Split(strings.TrimLeft(version, "v"), ".")
	if len(parts) < 3 {
		return false
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	return major > 1 || major == 1 && minor >= 46
}
