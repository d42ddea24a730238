package aws

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/cloud"
)

// Requirement sets as Karpenter's amifamily tests expect them, written
// "key Operator [values]".
const (
	reqStandard = "karpenter.k8s.aws/instance-accelerator-count DoesNotExist; karpenter.k8s.aws/instance-gpu-count DoesNotExist"
	reqNvidia   = "karpenter.k8s.aws/instance-gpu-count Exists"
	reqNeuron   = "karpenter.k8s.aws/instance-accelerator-count Exists"
	reqWin2019  = "kubernetes.io/os In [windows]; node.kubernetes.io/windows-build In [10.0.17763]"
	reqWin2022  = "kubernetes.io/os In [windows]; node.kubernetes.io/windows-build In [10.0.20348]"
	reqWin2025  = "kubernetes.io/os In [windows]; node.kubernetes.io/windows-build In [10.0.26100]"
)

func requirementSet(reqs []corev1.NodeSelectorRequirement) string {
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = string(r.Key) + " " + string(r.Operator)
		if len(r.Values) > 0 {
			parts[i] += fmt.Sprintf(" %v", r.Values)
		}
	}
	return strings.Join(parts, "; ")
}

// TestAliasParameters: the SSM parameters each alias reads, per
// architecture and variant, and the requirements of the images they name,
// as Karpenter v1.14's amifamily tests list them.
func TestAliasParameters(t *testing.T) {
	const eks = "/aws/service/eks/optimized-ami/"
	for _, tc := range []struct {
		alias, k8s string
		want       map[string][]string // parameter -> requirement sets
		wantErr    error
	}{
		{alias: "al2023@latest", k8s: "1.31", want: map[string][]string{
			eks + "1.31/amazon-linux-2023/x86_64/standard/recommended/image_id": {reqStandard},
			eks + "1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id":   {reqNvidia},
			eks + "1.31/amazon-linux-2023/x86_64/neuron/recommended/image_id":   {reqNeuron},
			eks + "1.31/amazon-linux-2023/arm64/standard/recommended/image_id":  {reqStandard},
			eks + "1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id":    {reqNvidia},
		}},
		{alias: "al2023@v20240807", k8s: "1.34", want: map[string][]string{
			eks + "1.34/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.34-v20240807/image_id": {reqStandard},
			eks + "1.34/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.34-v20240807/image_id":     {reqNvidia},
			eks + "1.34/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.34-v20240807/image_id":     {reqNeuron},
			eks + "1.34/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.34-v20240807/image_id":   {reqStandard},
			eks + "1.34/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.34-v20240807/image_id":       {reqNvidia},
		}},
		{alias: "al2@latest", k8s: "1.32", want: map[string][]string{
			eks + "1.32/amazon-linux-2/recommended/image_id":       {reqStandard},
			eks + "1.32/amazon-linux-2-arm64/recommended/image_id": {reqStandard},
			eks + "1.32/amazon-linux-2-gpu/recommended/image_id":   {reqNeuron, reqNvidia},
		}},
		{alias: "al2@v20240807", k8s: "1.31", want: map[string][]string{
			eks + "1.31/amazon-linux-2/amazon-eks-node-1.31-v20240807/image_id":             {reqStandard},
			eks + "1.31/amazon-linux-2-arm64/amazon-eks-arm64-node-1.31-v20240807/image_id": {reqStandard},
			eks + "1.31/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20240807/image_id":     {reqNeuron, reqNvidia},
		}},
		{alias: "al2@latest", k8s: "1.33", wantErr: cloud.ErrUnsupportedAlias},
		{alias: "al2@latest", k8s: "1.34.2", wantErr: cloud.ErrUnsupportedAlias},
		{alias: "bottlerocket@latest", k8s: "1.35", want: map[string][]string{
			"/aws/service/bottlerocket/aws-k8s-1.35/x86_64/latest/image_id":        {reqStandard, reqNeuron},
			"/aws/service/bottlerocket/aws-k8s-1.35/arm64/latest/image_id":         {reqStandard},
			"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/x86_64/latest/image_id": {reqNvidia},
			"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/arm64/latest/image_id":  {reqNvidia},
		}},
		{alias: "bottlerocket@v1.20.0", k8s: "1.32", want: map[string][]string{ // the v is GitHub's, not SSM's
			"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.20.0/image_id":        {reqStandard, reqNeuron},
			"/aws/service/bottlerocket/aws-k8s-1.32/arm64/1.20.0/image_id":         {reqStandard},
			"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/1.20.0/image_id": {reqNvidia},
			"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/1.20.0/image_id":  {reqNvidia},
		}},
		{alias: "windows2019@latest", k8s: "1.32", want: map[string][]string{
			"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.32/image_id": {reqWin2019},
		}},
		{alias: "windows2022@latest", k8s: "1.33", want: map[string][]string{
			"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id": {reqWin2022},
		}},
		{alias: "windows2025@latest", k8s: "1.35", want: map[string][]string{
			"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id": {reqWin2025},
		}},
		{alias: "windows2025@latest", k8s: "1.34", wantErr: cloud.ErrUnsupportedAlias},
		{alias: "windows2022@v20240807", k8s: "1.32", wantErr: cloud.ErrUnknownAlias},
		{alias: "plan9@latest", k8s: "1.32", wantErr: cloud.ErrUnknownAlias},
		{alias: "al2023", k8s: "1.32", wantErr: cloud.ErrUnknownAlias},
		{alias: "al2023@", k8s: "1.32", wantErr: cloud.ErrUnknownAlias},
	} {
		t.Run(tc.alias+"/"+tc.k8s, func(t *testing.T) {
			params, err := aliasParameters(tc.alias, tc.k8s)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.alias) {
				t.Errorf("error %q does not name the alias", err)
			}
			got := map[string][]string{}
			for _, p := range params {
				for _, set := range p.Requirements {
					got[p.Name] = append(got[p.Name], requirementSet(set))
				}
			}
			for _, name := range slices.Sorted(maps.Keys(tc.want)) {
				if !slices.Equal(got[name], tc.want[name]) {
					t.Errorf("%s: requirements %q, want %q", name, got[name], tc.want[name])
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("parameters %v, want %d", slices.Sorted(maps.Keys(got)), len(tc.want))
			}
		})
	}
}
