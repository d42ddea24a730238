package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// KubernetesVersions are the versions DefaultConfig publishes images for.
var KubernetesVersions = []string{"1.31", "1.32", "1.33", "1.34", "1.35"}

// release is one release of every image line: the EKS optimized AMIs'
// date version, Bottlerocket's and Windows' versions, and when it was
// built.
type release struct{ eks, bottlerocket, windows, created string }

// defaultReleases are the releases DefaultConfig publishes, oldest first;
// the last is the recommended/latest one.
var defaultReleases = []release{
	{"v20251201", "1.49.0", "2025.12.01", "2025-12-01T00:00:00.000Z"},
	{"v20260101", "1.50.0", "2026.01.01", "2026-01-01T00:00:00.000Z"},
}

// imageLine is one family × architecture × variant AWS publishes per
// Kubernetes version: its SSM parameter, the names of its images and which
// versions it is built for.
type imageLine struct {
	family string // the sim's Image.Family
	arch   string // x86_64 or arm64
	// id is the ID of the newest release for DefaultKubernetesVersion;
	// other versions and releases add a suffix.
	id string
	// minMinor, maxMinor bound the Kubernetes minor versions (0: none).
	minMinor, maxMinor int
	// param is the parameter that follows the newest release
	// (recommended, latest).
	param func(k8s string) string
	// name is an image's name for a version and a release.
	name func(k8s string, r release) string
	// version is the release's version for this line.
	version func(r release) string
}

func eksVersion(r release) string          { return r.eks }
func bottlerocketVersion(r release) string { return r.bottlerocket }
func windowsVersion(r release) string      { return r.windows }

// imageLines are the images AWS publishes for EKS nodes, as the EKS user
// guide lists them: AL2023 x86_64 standard, nvidia, neuron and arm64
// standard, nvidia; AL2 x86_64, arm64 and gpu (up to 1.32); Bottlerocket
// aws-k8s and aws-k8s-nvidia for x86_64 and arm64; Windows Server 2019 and
// 2022 Core, and 2025 Core from 1.35.
func imageLines() []imageLine {
	var out []imageLine
	for _, l := range []struct{ arch, short, variant string }{
		{"x86_64", "x86", "standard"}, {"x86_64", "x86", "nvidia"}, {"x86_64", "x86", "neuron"},
		{"arm64", "arm", "standard"}, {"arm64", "arm", "nvidia"},
	} {
		out = append(out, imageLine{family: "AL2023", arch: l.arch, id: "ami-0sim2023" + l.short + strings.TrimPrefix(l.variant, "standard"),
			param: func(k8s string) string {
				return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/recommended/image_id", k8s, l.arch, l.variant)
			},
			name: func(k8s string, r release) string {
				return fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", l.arch, l.variant, k8s, r.eks)
			},
			version: eksVersion})
	}
	for _, l := range []struct{ arch, short, path, node string }{
		{"x86_64", "x86", "amazon-linux-2", "node"}, {"arm64", "arm", "amazon-linux-2-arm64", "arm64-node"},
		{"x86_64", "gpu", "amazon-linux-2-gpu", "gpu-node"},
	} {
		out = append(out, imageLine{family: "AL2", arch: l.arch, id: "ami-0simal2" + l.short, maxMinor: 32,
			param: func(k8s string) string {
				return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/recommended/image_id", k8s, l.path)
			},
			name:    func(k8s string, r release) string { return fmt.Sprintf("amazon-eks-%s-%s-%s", l.node, k8s, r.eks) },
			version: eksVersion})
	}
	for _, l := range []struct{ arch, short, imageArch, track string }{
		{"x86_64", "x86", "x86_64", ""}, {"arm64", "arm", "aarch64", ""},
		{"x86_64", "x86", "x86_64", "-nvidia"}, {"arm64", "arm", "aarch64", "-nvidia"},
	} {
		out = append(out, imageLine{family: "Bottlerocket", arch: l.arch, id: "ami-0simbr" + l.short + strings.TrimPrefix(l.track, "-"),
			param: func(k8s string) string {
				return fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/latest/image_id", k8s, l.track, l.arch)
			},
			name: func(k8s string, r release) string {
				return fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s", k8s, l.track, l.imageArch, r.bottlerocket)
			},
			version: bottlerocketVersion})
	}
	for _, y := range []struct {
		year     string
		minMinor int
	}{{"2019", 0}, {"2022", 0}, {"2025", 35}} {
		out = append(out, imageLine{family: "Windows" + y.year, arch: "x86_64", id: "ami-0simwin" + y.year, minMinor: y.minMinor,
			param: func(k8s string) string {
				return fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", y.year, k8s)
			},
			name: func(k8s string, r release) string {
				return fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s-%s", y.year, k8s, r.windows)
			},
			version: windowsVersion})
	}
	return out
}

// builtFor reports whether AWS builds the line for a Kubernetes version.
func (l imageLine) builtFor(k8s string) bool {
	_, m, _ := strings.Cut(k8s, ".")
	minor, err := strconv.Atoi(m)
	if err != nil {
		return true
	}
	return (l.minMinor == 0 || minor >= l.minMinor) && (l.maxMinor == 0 || minor <= l.maxMinor)
}

// addEKSImages adds every line's images for each Kubernetes version and
// release, and their SSM parameters: the recommended/latest one names the
// newest release, a pinned one (where AWS has them) each release.
func addEKSImages(cfg *Config, versions []string, releases []release) {
	for _, l := range imageLines() {
		for _, k8s := range versions {
			if !l.builtFor(k8s) {
				continue
			}
			for i, r := range releases {
				newest := i == len(releases)-1
				id := l.id
				if k8s != DefaultKubernetesVersion {
					id += "k" + strings.ReplaceAll(k8s, ".", "")
				}
				if !newest {
					id += "r" + strconv.Itoa(i)
				}
				im := Image{ID: id, Name: l.name(k8s, r), Owner: "amazon", Arch: l.arch, Family: l.family, Release: l.version(r),
					CreationDate: r.created, Tags: map[string]string{karpv1.TagSimFamily: l.family}}
				cfg.Images = append(cfg.Images, im)
				param := l.param(k8s)
				if pinned := pinnedParameter(param, im); pinned != "" {
					cfg.Parameters[pinned] = id
				}
				if newest {
					cfg.Parameters[param] = id
				}
			}
		}
	}
}

const (
	eksParameters          = "/aws/service/eks/optimized-ami/"
	bottlerocketParameters = "/aws/service/bottlerocket/"
)

// pinnedParameter is the parameter AWS publishes for one release of the
// image line whose recommended/latest parameter is param: the EKS
// optimized AMIs' is named after the image
// (.../amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.32-v20260101/image_id),
// Bottlerocket's after its version (.../aws-k8s-1.32/x86_64/1.50.0/image_id).
// Windows (ami-windows-latest) and other parameters have none: "".
func pinnedParameter(param string, im Image) string {
	switch {
	case strings.HasPrefix(param, eksParameters) && strings.HasSuffix(param, "/recommended/image_id") && im.Name != "":
		return strings.TrimSuffix(param, "recommended/image_id") + im.Name + "/image_id"
	case strings.HasPrefix(param, bottlerocketParameters) && strings.HasSuffix(param, "/latest/image_id") && im.Release != "":
		return strings.TrimSuffix(param, "latest/image_id") + im.Release + "/image_id"
	}
	return ""
}

// isPinned reports whether param names one release (it never moves).
func isPinned(param string) bool {
	return (strings.HasPrefix(param, eksParameters) && !strings.HasSuffix(param, "/recommended/image_id")) ||
		(strings.HasPrefix(param, bottlerocketParameters) && !strings.HasSuffix(param, "/latest/image_id"))
}

var (
	dateVersion   = regexp.MustCompile(`^(v?)([0-9]{4})\.?([0-9]{2})\.?([0-9]{2})$`)
	semverVersion = regexp.MustCompile(`^([0-9]+\.[0-9]+\.)([0-9]+)$`)
)

// nextVersion is the release after version: a day later for the date
// versions (v20260101, 2026.01.01), the next patch for Bottlerocket's
// (1.50.0); "" for versions of another shape.
func nextVersion(version string) string {
	if m := dateVersion.FindStringSubmatch(version); m != nil {
		t, err := time.Parse("20060102", m[2]+m[3]+m[4])
		if err != nil {
			return ""
		}
		layout := "20060102"
		if strings.Contains(version, ".") {
			layout = "2006.01.02"
		}
		return m[1] + t.AddDate(0, 0, 1).Format(layout)
	}
	if m := semverVersion.FindStringSubmatch(version); m != nil {
		n, _ := strconv.Atoi(m[2])
		return m[1] + strconv.Itoa(n+1)
	}
	return ""
}
