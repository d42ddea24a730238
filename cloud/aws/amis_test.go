package aws_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
)

func archLabels(arch string) map[string]string {
	return map[string]string{corev1.LabelArchStable: arch}
}

// providerFor is a provider on e's sim for a cluster of Kubernetes k8s.
func (e *env) providerFor(t *testing.T, k8s string) *joineraws.Provider {
	t.Helper()
	return e.newProvider(t, joineraws.Options{KubernetesVersion: k8s})
}

// EC2NodeClass status.amis[].requirements as Karpenter writes them (sorted
// by key length, then key), "key Operator [values]" joined by "; ".
const (
	amd64Standard = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-gpu-count DoesNotExist; karpenter.k8s.aws/instance-accelerator-count DoesNotExist"
	arm64Standard = "kubernetes.io/arch In [arm64]; karpenter.k8s.aws/instance-gpu-count DoesNotExist; karpenter.k8s.aws/instance-accelerator-count DoesNotExist"
	amd64Nvidia   = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-gpu-count Exists"
	arm64Nvidia   = "kubernetes.io/arch In [arm64]; karpenter.k8s.aws/instance-gpu-count Exists"
	amd64Neuron   = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-accelerator-count Exists"
)

func statusAMIs(amis []awsv1.AMI) []string {
	out := make([]string, len(amis))
	for i, a := range amis {
		reqs := make([]string, len(a.Requirements))
		for j, r := range a.Requirements {
			reqs[j] = string(r.Key) + " " + string(r.Operator)
			if len(r.Values) > 0 {
				reqs[j] += fmt.Sprintf(" %v", r.Values)
			}
		}
		out[i] = a.ID + ": " + strings.Join(reqs, "; ")
	}
	return out
}

// TestAliasResolution resolves each alias through the real SDK against the
// sim's published parameters: every family, variant and architecture AWS
// publishes, pinned releases, and the versions without images. The status
// lists the images newest first (then by ID), one entry per requirement
// set, as Karpenter's.
func TestAliasResolution(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		alias, k8s string
		want       []string // status.amis
		wantErr    error
		wantReason string // AMIsReady's reason when False
		wantMsg    string // and its message, Karpenter's
	}{
		{alias: "al2023@latest", k8s: "1.32", want: []string{
			"ami-0sim2023arm: " + arm64Standard, "ami-0sim2023armnvidia: " + arm64Nvidia,
			"ami-0sim2023x86: " + amd64Standard, "ami-0sim2023x86neuron: " + amd64Neuron, "ami-0sim2023x86nvidia: " + amd64Nvidia,
		}},
		{alias: "al2023@v20251201", k8s: "1.34", want: []string{ // a pinned, older release
			"ami-0sim2023armk134r0: " + arm64Standard, "ami-0sim2023armnvidiak134r0: " + arm64Nvidia,
			"ami-0sim2023x86k134r0: " + amd64Standard, "ami-0sim2023x86neuronk134r0: " + amd64Neuron, "ami-0sim2023x86nvidiak134r0: " + amd64Nvidia,
		}},
		{alias: "al2@latest", k8s: "1.31", want: []string{ // the GPU image serves NVIDIA and Neuron types
			"ami-0simal2armk131: " + arm64Standard, "ami-0simal2gpuk131: " + amd64Neuron, "ami-0simal2gpuk131: " + amd64Nvidia,
			"ami-0simal2x86k131: " + amd64Standard,
		}},
		{alias: "al2@v20260101", k8s: "1.32", want: []string{
			"ami-0simal2arm: " + arm64Standard, "ami-0simal2gpu: " + amd64Neuron, "ami-0simal2gpu: " + amd64Nvidia, "ami-0simal2x86: " + amd64Standard,
		}},
		{alias: "bottlerocket@latest", k8s: "1.35", want: []string{ // the standard x86_64 image serves Neuron types
			"ami-0simbrarmk135: " + arm64Standard, "ami-0simbrarmnvidiak135: " + arm64Nvidia,
			"ami-0simbrx86k135: " + amd64Neuron, "ami-0simbrx86k135: " + amd64Standard, "ami-0simbrx86nvidiak135: " + amd64Nvidia,
		}},
		{alias: "bottlerocket@v1.49.0", k8s: "1.32", want: []string{
			"ami-0simbrarmnvidiar0: " + arm64Nvidia, "ami-0simbrarmr0: " + arm64Standard,
			"ami-0simbrx86nvidiar0: " + amd64Nvidia, "ami-0simbrx86r0: " + amd64Neuron, "ami-0simbrx86r0: " + amd64Standard,
		}},
		{alias: "windows2019@latest", k8s: "1.31", want: []string{
			"ami-0simwin2019k131: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.17763]",
		}},
		{alias: "windows2022@latest", k8s: "1.32", want: []string{
			"ami-0simwin2022: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.20348]",
		}},
		{alias: "windows2025@latest", k8s: "1.35", want: []string{
			"ami-0simwin2025k135: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.26100]",
		}},
		{alias: "al2@latest", k8s: "1.33", wantErr: cloud.ErrUnsupportedAlias, wantReason: "UnsupportedAlias",
			wantMsg: "AL2 aliases are no longer supported on EKS 1.33+ (see https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions-standard.html#kubernetes-1-33)"},
		{alias: "windows2025@latest", k8s: "1.34", wantErr: cloud.ErrUnsupportedAlias, wantReason: "UnsupportedAlias",
			wantMsg: "Windows Server 2025 requires EKS version 1.35 or higher, current version: 1.34"},
		{alias: "al2023@v20200101", k8s: "1.32", wantErr: cloud.ErrNoAMIs, wantReason: "AMINotFound", wantMsg: "AMISelector did not match any AMIs"},
		{alias: "al2023@latest", k8s: "1.30", wantErr: cloud.ErrNoAMIs, wantReason: "AMINotFound", wantMsg: "AMISelector did not match any AMIs"},
	} {
		t.Run(tc.alias+"/"+tc.k8s, func(t *testing.T) {
			nc := nodeClass()
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
			r, err := e.providerFor(t, tc.k8s).Resolve(context.Background(), nc)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Resolve error %v, want %v", err, tc.wantErr)
			}
			cloud.ApplyStatus(nc, r, err, metav1.Now())
			if err != nil {
				// The condition says it in Karpenter's words, the error (logs,
				// the Event) names the alias.
				c := condition(nc, awsv1.ConditionAMIsReady)
				if c.Reason != tc.wantReason || c.Message != tc.wantMsg {
					t.Errorf("AMIsReady %s %q, want %s %q", c.Reason, c.Message, tc.wantReason, tc.wantMsg)
				}
				if tc.wantErr == cloud.ErrUnsupportedAlias && (!strings.Contains(err.Error(), tc.alias) || !strings.Contains(err.Error(), tc.k8s)) {
					t.Errorf("error %v: want it naming %s and %s", err, tc.alias, tc.k8s)
				}
				return
			}
			got := statusAMIs(nc.Status.AMIs)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("status.amis:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestImagePerInstanceType: each instance type gets the newest image whose
// requirements it meets (Karpenter's MapToInstanceTypes): GPU types the
// NVIDIA image, Neuron types the Neuron one, others the standard image.
func TestImagePerInstanceType(t *testing.T) {
	e := newEnv(t)
	types := map[string]map[string]string{}
	for _, it := range catalog.InstanceTypes(catalog.Options{}) {
		types[it.Name] = it.Labels
	}
	for _, tc := range []struct {
		alias, k8s string
		want       map[string]string // instance type -> image
	}{
		{alias: "al2023@latest", k8s: "1.32", want: map[string]string{
			"m5.large": "ami-0sim2023x86", "g5.xlarge": "ami-0sim2023x86nvidia", "p4d.24xlarge": "ami-0sim2023x86nvidia",
			"inf2.xlarge": "ami-0sim2023x86neuron", "trn1.2xlarge": "ami-0sim2023x86neuron",
			"m7g.large": "ami-0sim2023arm", "g5g.xlarge": "ami-0sim2023armnvidia",
		}},
		{alias: "al2@latest", k8s: "1.32", want: map[string]string{
			"m5.large": "ami-0simal2x86", "g5.xlarge": "ami-0simal2gpu", "inf2.xlarge": "ami-0simal2gpu",
			"m7g.large": "ami-0simal2arm", "g5g.xlarge": "", // AWS builds no arm64 AL2 GPU image
		}},
		{alias: "bottlerocket@latest", k8s: "1.32", want: map[string]string{
			"m5.large": "ami-0simbrx86", "g5.xlarge": "ami-0simbrx86nvidia", "inf2.xlarge": "ami-0simbrx86",
			"m7g.large": "ami-0simbrarm", "g5g.xlarge": "ami-0simbrarmnvidia",
		}},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			nc := nodeClass()
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
			r, err := e.providerFor(t, tc.k8s).Resolve(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			for it, want := range tc.want {
				if types[it] == nil {
					t.Fatalf("%s is not in the catalogue", it)
				}
				if got := r.ImageFor(types[it]); got != want {
					t.Errorf("%s: image %q, want %q", it, got, want)
				}
			}
		})
	}
}

// TestAliasFollowsRelease: after AWS publishes a release, the alias
// resolves (once the cache expires) to the new image of every variant,
// and a pinned alias keeps its release.
func TestAliasFollowsRelease(t *testing.T) {
	e := newEnv(t)
	p := e.providerFor(t, "1.32")
	resolve := func(alias string) []string {
		nc := nodeClass()
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
		r, err := p.Resolve(context.Background(), nc)
		if err != nil {
			t.Fatal(err)
		}
		return statusAMIs(r.StatusAMIs())
	}
	before, pinned := resolve("al2023@latest"), resolve("al2023@v20260101")
	moved := e.sim.ReleaseImages("AL2023")
	e.clock.Add(6 * time.Minute) // past the resolution cache
	after := resolve("al2023@latest")
	var want []string // the release's images are built one after the other: compare as sets
	for _, a := range before {
		id, reqs, _ := strings.Cut(a, ": ")
		want = append(want, moved[id]+": "+reqs)
	}
	slices.Sort(want)
	if slices.Sort(after); !slices.Equal(after, want) {
		t.Errorf("after the release %v, want %v", after, want)
	}
	if got := resolve("al2023@v20260102"); len(got) != len(before) {
		t.Errorf("the new release's pinned alias resolves to %v", got)
	}
	if got := resolve("al2023@v20260101"); strings.Join(got, ",") != strings.Join(pinned, ",") {
		t.Errorf("pinned alias moved: %v, was %v", got, pinned)
	}
}

// throttledSSM answers GetParameter for name with SSM's throttling error
// and passes the other calls on.
type throttledSSM struct {
	joineraws.SSMAPI
	name string
}

func (s throttledSSM) GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	if aws.ToString(in.Name) == s.name {
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
	}
	return s.SSMAPI.GetParameter(ctx, in, opts...)
}

// TestSSMParameterTerms: as Karpenter's DescribeImageQueries, an
// ssmParameter term whose parameter does not exist, or whose value is not
// an image ID, is skipped and the other terms resolve; when no term is
// left the AMIs are not found (EC2 is not asked); a failure to ask SSM (throttled) is an
// error, not a skip.
func TestSSMParameterTerms(t *testing.T) {
	const (
		published = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
		missing   = "/aws/service/team/missing"
		notAnAMI  = "/aws/service/team/not-an-image"
	)
	cfg := sim.DefaultConfig()
	cfg.Parameters[notAnAMI] = "resolve me later"
	e := newEnvWith(t, cfg)
	ctx := context.Background()
	terms := func(names ...string) *awsv1.EC2NodeClass {
		nc := nodeClass()
		nc.Spec.AMISelectorTerms = nil
		for _, n := range names {
			nc.Spec.AMISelectorTerms = append(nc.Spec.AMISelectorTerms, awsv1.AMISelectorTerm{SSMParameter: n})
		}
		return nc
	}
	for _, tc := range []struct {
		name    string
		nc      *awsv1.EC2NodeClass
		want    string // the amd64 image
		wantErr error
		lookups int // DescribeImages calls
	}{
		{"missing and not an image skipped", terms(missing, notAnAMI, published), "ami-0sim2023x86", nil, 1},
		{"nothing left", terms(missing, notAnAMI), "", cloud.ErrNoAMIs, 0},
	} {
		before := e.sim.Calls("DescribeImages")
		r, err := e.provider.Resolve(ctx, tc.nc)
		if got := r.ImageFor(archLabels("amd64")); got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%s: image %q, error %v; want %q, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
		if n := e.sim.Calls("DescribeImages") - before; n != tc.lookups {
			t.Errorf("%s: %d DescribeImages calls, want %d", tc.name, n, tc.lookups)
		}
	}

	ac := e.clients()
	p, err := joineraws.New(joineraws.Options{EC2: ac.EC2, SSM: throttledSSM{SSMAPI: ac.SSM, name: missing}, IAM: ac.IAM, Cluster: "test",
		Region: "us-east-1", KubernetesVersion: "1.32", Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Resolve(ctx, terms(missing, published))
	var rerr *cloud.ResolveError
	if !errors.As(err, &rerr) || !errors.Is(rerr.AMIs, cloud.ErrRetryable) || !strings.Contains(rerr.AMIs.Error(), "amiSelectorTerms[0].ssmParameter") {
		t.Errorf("throttled: %v, want a retryable AMIs error naming the term", err)
	}
}
