package aws

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// aliasLatest is the alias version that follows AWS's newest release.
const aliasLatest = "latest"

// amiVariant is the kind of instance an EKS optimized image is built for:
// its drivers.
type amiVariant string

const (
	variantStandard amiVariant = "standard"
	variantNvidia   amiVariant = "nvidia"
	variantNeuron   amiVariant = "neuron"
)

// requirements are what the variant needs of an instance type, as
// Karpenter's Variant.Requirements: the standard image neither a GPU nor
// an accelerator, the NVIDIA image a GPU, the Neuron image an accelerator.
func (v amiVariant) requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case variantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}
	case variantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}
	}
	return []corev1.NodeSelectorRequirement{
		{Key: karpv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: karpv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}
}

// aliasParameter is one SSM parameter an alias reads, and the requirement
// sets of the image it names besides its architecture: one per kind of
// instance the image serves.
type aliasParameter struct {
	Name         string
	Requirements [][]corev1.NodeSelectorRequirement
}

func variantParameter(name string, variants ...amiVariant) aliasParameter {
	p := aliasParameter{Name: name}
	for _, v := range variants {
		p.Requirements = append(p.Requirements, v.requirements())
	}
	return p
}

// aliasParameters are the SSM parameters AWS publishes for an alias
// (family@version) and a Kubernetes version ("1.32"), per architecture and
// variant, as Karpenter v1.14 reads them:
//
//   - al2023: /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/<recommended|name>/image_id
//     for x86_64 standard, nvidia, neuron and arm64 standard, nvidia;
//   - al2: .../amazon-linux-2 (x86_64), -arm64, and -gpu (NVIDIA and Neuron),
//     pinned as amazon-eks[-arm64|-gpu]-node-<k8s>-<version>; not on 1.33+;
//   - bottlerocket: /aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/<latest|version>/image_id,
//     the version without its "v"; the standard x86_64 image also serves
//     Neuron instances;
//   - windows<year>: /aws/service/ami-windows-latest/Windows_Server-<year>-English-Core-EKS_Optimized-<k8s>/image_id,
//     @latest only; 2025 from 1.35.
func aliasParameters(alias, k8s string) ([]aliasParameter, error) {
	family, version, ok := strings.Cut(alias, "@")
	if !ok || version == "" {
		return nil, fmt.Errorf("alias %q: want family@version: %w", alias, cloud.ErrUnknownAlias)
	}
	family = strings.ToLower(family)
	latest := version == aliasLatest
	minor := -1 // unknown: no version gate
	if _, m, ok := strings.Cut(k8s, "."); ok {
		m, _, _ = strings.Cut(m, ".")
		if n, err := strconv.Atoi(m); err == nil {
			minor = n
		}
	}
	eks := "/aws/service/eks/optimized-ami/" + k8s + "/"
	switch family {
	case "al2023":
		var out []aliasParameter
		for _, av := range []struct {
			arch    string
			variant amiVariant
		}{
			{"x86_64", variantStandard}, {"x86_64", variantNvidia}, {"x86_64", variantNeuron},
			{"arm64", variantStandard}, {"arm64", variantNvidia},
		} {
			leaf := "recommended"
			if !latest {
				leaf = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", av.arch, av.variant, k8s, version)
			}
			out = append(out, variantParameter(fmt.Sprintf("%samazon-linux-2023/%s/%s/%s/image_id", eks, av.arch, av.variant, leaf), av.variant))
		}
		return out, nil
	case "al2":
		if minor >= 33 {
			return nil, &cloud.StatusError{Message: "AL2 aliases are no longer supported on EKS 1.33+ " +
				"(see https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions-standard.html#kubernetes-1-33)",
				Err: fmt.Errorf("alias %q: AL2 aliases are no longer supported on EKS 1.33+, the cluster runs %s "+
					"(see https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions-standard.html#kubernetes-1-33): %w",
					alias, k8s, cloud.ErrUnsupportedAlias)}
		}
		leaf := func(node string) string {
			if latest {
				return "recommended"
			}
			return fmt.Sprintf("amazon-eks-%s-%s-%s", node, k8s, version)
		}
		return []aliasParameter{
			variantParameter(eks+"amazon-linux-2/"+leaf("node")+"/image_id", variantStandard),
			variantParameter(eks+"amazon-linux-2-arm64/"+leaf("arm64-node")+"/image_id", variantStandard),
			variantParameter(eks+"amazon-linux-2-gpu/"+leaf("gpu-node")+"/image_id", variantNeuron, variantNvidia),
		}, nil
	case "bottlerocket":
		v := strings.TrimLeft(version, "v") // GitHub names releases v1.2.3, SSM 1.2.3
		br := func(track, arch string) string {
			return fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", k8s, track, arch, v)
		}
		return []aliasParameter{
			variantParameter(br("", "x86_64"), variantStandard, variantNeuron),
			variantParameter(br("", "arm64"), variantStandard),
			variantParameter(br("-nvidia", "x86_64"), variantNvidia),
			variantParameter(br("-nvidia", "arm64"), variantNvidia),
		}, nil
	case "windows2019", "windows2022", "windows2025":
		if !latest {
			return nil, fmt.Errorf("alias %q: windows aliases only support @latest: %w", alias, cloud.ErrUnknownAlias)
		}
		year := strings.TrimPrefix(family, "windows")
		if year == "2025" && minor >= 0 && minor < 35 {
			return nil, &cloud.StatusError{Message: "Windows Server 2025 requires EKS version 1.35 or higher, current version: " + k8s,
				Err: fmt.Errorf("alias %q: Windows Server 2025 requires EKS version 1.35 or higher, the cluster runs %s: %w",
					alias, k8s, cloud.ErrUnsupportedAlias)}
		}
		return []aliasParameter{{
			Name: fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, k8s),
			Requirements: [][]corev1.NodeSelectorRequirement{{
				{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}},
				{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{catalog.WindowsBuild(awsv1.AliasFamilies[family])}},
			}},
		}}, nil
	}
	return nil, fmt.Errorf("alias %q: family %q: %w", alias, family, cloud.ErrUnknownAlias)
}
