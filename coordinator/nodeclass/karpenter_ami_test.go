package nodeclass_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// Ports of Karpenter's "NodeClass AMI Status Controller" suite
// (ami_test.go): status.amis, one entry per image and requirement set
// (architecture, and for an alias the variant: standard, NVIDIA or
// Neuron; Windows' os and build), Deprecated once EC2's deprecation time
// passed, and AMIsReady.

// Requirements of status.amis entries, as amiLines writes them.
const (
	amd64Standard = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-gpu-count DoesNotExist; karpenter.k8s.aws/instance-accelerator-count DoesNotExist"
	arm64Standard = "kubernetes.io/arch In [arm64]; karpenter.k8s.aws/instance-gpu-count DoesNotExist; karpenter.k8s.aws/instance-accelerator-count DoesNotExist"
	amd64Nvidia   = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-gpu-count Exists"
	arm64Nvidia   = "kubernetes.io/arch In [arm64]; karpenter.k8s.aws/instance-gpu-count Exists"
	amd64Neuron   = "kubernetes.io/arch In [amd64]; karpenter.k8s.aws/instance-accelerator-count Exists"
	amd64Only     = "kubernetes.io/arch In [amd64]"
	arm64Only     = "kubernetes.io/arch In [arm64]"
)

// amiLines lists status.amis as "id (name) requirements [deprecated]".
func amiLines(amis []awsv1.AMI) []string {
	var out []string
	for _, a := range amis {
		reqs := make([]string, len(a.Requirements))
		for i, r := range a.Requirements {
			reqs[i] = r.Key + " " + string(r.Operator)
			if len(r.Values) > 0 {
				reqs[i] += fmt.Sprintf(" %v", r.Values)
			}
		}
		line := a.ID + ": " + strings.Join(reqs, "; ")
		if a.Name != "" {
			line = a.ID + " (" + a.Name + "): " + strings.Join(reqs, "; ")
		}
		if a.Deprecated {
			line += " deprecated"
		}
		out = append(out, line)
	}
	return out
}

// withoutNames drops the "(name)" of amiLines' lines.
func withoutNames(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if open, end := strings.Index(l, " ("), strings.Index(l, "): "); open > 0 && end > open {
			l = l[:open] + l[end+1:]
		}
		out[i] = l
	}
	return out
}

// TestAMIAliasStatusAsKarpenter: each alias resolves to the images AWS
// publishes for the cluster's version (the sim's SSM parameters), every
// variant an entry, the image serving two variants (AL2's GPU image,
// Bottlerocket's x86_64 one for Neuron) listed for each.
func TestAMIAliasStatusAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter  string
		alias, k8s string
		want       []string // status.amis without names, in any order (Karpenter: ContainElements)
	}{
		{"Should resolve all AMIs with correct requirements for AL2023", "al2023@latest", "1.32", []string{
			"ami-0sim2023x86: " + amd64Standard, "ami-0sim2023x86nvidia: " + amd64Nvidia, "ami-0sim2023x86neuron: " + amd64Neuron,
			"ami-0sim2023arm: " + arm64Standard, "ami-0sim2023armnvidia: " + arm64Nvidia}},
		{"Should resolve all AMIs with correct requirements for AL2", "al2@latest", "1.32", []string{
			"ami-0simal2x86: " + amd64Standard, "ami-0simal2gpu: " + amd64Nvidia, "ami-0simal2gpu: " + amd64Neuron, "ami-0simal2arm: " + arm64Standard}},
		{"Should resolve all AMIs with correct requirements for Bottlerocket", "bottlerocket@latest", "1.32", []string{
			"ami-0simbrx86: " + amd64Standard, "ami-0simbrarm: " + arm64Standard, "ami-0simbrx86: " + amd64Neuron,
			"ami-0simbrx86nvidia: " + amd64Nvidia, "ami-0simbrarmnvidia: " + arm64Nvidia}},
		{"Should resolve all AMIs with correct requirements for Windows2019", "windows2019@latest", "1.32", []string{
			"ami-0simwin2019: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.17763]"}},
		{"Should resolve all AMIs with correct requirements for Windows2022", "windows2022@latest", "1.32", []string{
			"ami-0simwin2022: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.20348]"}},
		{"Should resolve all AMIs with correct requirements for Windows2025", "windows2025@latest", "1.35", []string{
			"ami-0simwin2025k135: kubernetes.io/os In [windows]; kubernetes.io/arch In [amd64]; node.kubernetes.io/windows-build In [10.0.26100]"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := newWorld(t, func(ws *worldSetup) { ws.provider.KubernetesVersion = tc.k8s })
			nc := ec2NodeClass("default")
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
			w.apply(nc)
			w.reconcile()
			got := withoutNames(amiLines(w.class("default").Status.AMIs))
			if !sameSet(got, tc.want) {
				t.Errorf("status.amis\n  %s\nwant (any order)\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if !w.isTrue("default", awsv1.ConditionAMIsReady) || !w.published("default") {
				t.Errorf("AMIsReady %+v, published %v; want True and published", w.condition("default", awsv1.ConditionAMIsReady), w.published("default"))
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// teamImages are images of the account (AMI family Custom), as Karpenter's
// AMI suite describes them: two releases of amd64-standard (both tagged
// Name=amd64-standard), the NVIDIA and Neuron ones, two arm64 ones.
func teamImages(now time.Time) []sim.Image {
	img := func(id, name, arch string, created time.Time, nameTag string) sim.Image {
		return sim.Image{ID: id, Name: name, Owner: "self", Arch: arch, Family: awsv1.AMIFamilyCustom,
			CreationDate: created.Format(time.RFC3339), Tags: map[string]string{"Name": nameTag, "foo": "bar"}}
	}
	return []sim.Image{
		img("ami-0amd64standard", "amd64-standard", "x86_64", now, "amd64-standard"),
		img("ami-0amd64standardnew", "amd64-standard-new", "x86_64", now.Add(time.Minute), "amd64-standard"),
		img("ami-0amd64nvidia", "amd64-nvidia", "x86_64", now, "amd64-nvidia"),
		img("ami-0amd64neuron", "amd64-neuron", "x86_64", now, "amd64-neuron"),
		img("ami-0arm64standard", "arm64-standard", "arm64", now, "arm64-standard"),
		img("ami-0arm64nvidia", "arm64-nvidia", "arm64", now, "arm64-nvidia"),
	}
}

// TestAMIStatusAsKarpenter: the AMI suite's cases outside its aliases.
func TestAMIStatusAsKarpenter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the rig's clock
	custom := func(terms ...awsv1.AMISelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMIFamily = new(awsv1.AMIFamilyCustom)
			nc.Spec.AMISelectorTerms = terms
		}
	}
	// Karpenter's deprecation images: test-ami-3 (x86_64) is deprecated 30
	// minutes from the start, test-ami-2 (arm64) never; later test-ami-4
	// replaces test-ami-3.
	deprecation := func(ws *worldSetup) {
		ws.cfg.Images = append(ws.cfg.Images,
			sim.Image{ID: "ami-0id789", Name: "test-ami-3", Owner: "self", Arch: "x86_64", CreationDate: "2021-08-31T00:12:42.000Z",
				DeprecationTime: start.Add(30 * time.Minute).Format(time.RFC3339), Tags: map[string]string{"Name": "test-ami-3", "foo": "bar"}},
			sim.Image{ID: "ami-0id456", Name: "test-ami-2", Owner: "self", Arch: "arm64", CreationDate: "2021-08-31T00:12:42.000Z",
				Tags: map[string]string{"Name": "test-ami-2", "foo": "bar"}})
	}
	replaceAMI3 := func(c *sim.Config) {
		c.Images = slices.DeleteFunc(c.Images, func(im sim.Image) bool { return im.ID == "ami-0id789" })
		c.Images = append(c.Images, sim.Image{ID: "ami-0id123", Name: "test-ami-4", Owner: "self", Arch: "x86_64",
			CreationDate: "2021-08-31T00:12:42.000Z", DeprecationTime: start.Add(70 * time.Minute).Format(time.RFC3339),
			Tags: map[string]string{"Name": "test-ami-4", "foo": "bar"}})
	}
	type step struct {
		wait     time.Duration     // the clock moves this much before the pass
		region   func(*sim.Config) // the region changes first
		fault    string            // DescribeImages fails with this code
		want     []string          // status.amis (amiLines, in order)
		anyOrder bool              // want lists them without names, in any order
		ready    metav1.ConditionStatus
	}
	for _, tc := range []struct {
		karpenter string
		setup     func(*worldSetup)
		class     func(*awsv1.EC2NodeClass)
		steps     []step
	}{
		{karpenter: "should resolve amiSelector AMIs and requirements into status when all SSM parameters don't resolve",
			setup: func(ws *worldSetup) { // AWS publishes no NVIDIA Bottlerocket image for the version
				for name := range ws.cfg.Parameters {
					if strings.HasPrefix(name, "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/") {
						delete(ws.cfg.Parameters, name)
					}
				}
			},
			class: func(nc *awsv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
			},
			steps: []step{{ready: metav1.ConditionTrue, anyOrder: true,
				want: []string{"ami-0simbrx86: " + amd64Standard, "ami-0simbrx86: " + amd64Neuron, "ami-0simbrarm: " + arm64Standard}}}},
		{karpenter: "should resolve a valid AMI selector",
			setup: func(ws *worldSetup) { ws.cfg.Images = append(ws.cfg.Images, teamImages(start)...) },
			class: custom(awsv1.AMISelectorTerm{Tags: map[string]string{"Name": "amd64-standard"}}),
			steps: []step{{ready: metav1.ConditionTrue, want: []string{"ami-0amd64standardnew (amd64-standard-new): " + amd64Only}}}},
		{karpenter: "should get error when resolving AMIs and have status condition set to false",
			setup: func(ws *worldSetup) { ws.cfg.Images = append(ws.cfg.Images, teamImages(start)...) },
			class: custom(awsv1.AMISelectorTerm{Tags: map[string]string{"foo": "bar"}}),
			// Karpenter's reconciler returns the error and leaves the
			// condition: Unknown on a new class, not True.
			steps: []step{{fault: "RequestLimitExceeded", ready: metav1.ConditionUnknown}}},
		{karpenter: "should update nodeclass AMI status with correct deprecation value and conditions",
			setup: deprecation, class: custom(awsv1.AMISelectorTerm{Tags: map[string]string{"foo": "bar"}}),
			steps: []step{
				{ready: metav1.ConditionTrue, want: []string{"ami-0id456 (test-ami-2): " + arm64Only, "ami-0id789 (test-ami-3): " + amd64Only}},
				{wait: 40 * time.Minute, ready: metav1.ConditionTrue,
					want: []string{"ami-0id456 (test-ami-2): " + arm64Only, "ami-0id789 (test-ami-3): " + amd64Only + " deprecated"}}}},
		{karpenter: "should remove AMIDeprecated status condition when non deprecated AMIs are discovered",
			setup: deprecation, class: custom(awsv1.AMISelectorTerm{Tags: map[string]string{"foo": "bar"}}),
			steps: []step{
				{wait: 40 * time.Minute, ready: metav1.ConditionTrue,
					want: []string{"ami-0id456 (test-ami-2): " + arm64Only, "ami-0id789 (test-ami-3): " + amd64Only + " deprecated"}},
				{wait: 5 * time.Minute, region: replaceAMI3, ready: metav1.ConditionTrue,
					want: []string{"ami-0id123 (test-ami-4): " + amd64Only, "ami-0id456 (test-ami-2): " + arm64Only}}}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := newWorld(t, tc.setup)
			nc := ec2NodeClass("default")
			tc.class(nc)
			w.apply(nc)
			for i, st := range tc.steps {
				if st.region != nil {
					w.sim.Configure(st.region)
				}
				if st.fault != "" {
					w.faults.fail("DescribeImages", st.fault, 0)
				}
				w.step(st.wait)
				got := amiLines(w.class("default").Status.AMIs)
				if st.anyOrder {
					if got = withoutNames(got); !sameSet(got, st.want) {
						t.Errorf("step %d: status.amis %v, want %v in any order", i, got, st.want)
					}
				} else if !slices.Equal(got, st.want) {
					t.Errorf("step %d: status.amis\n  %s\nwant\n  %s", i, strings.Join(got, "\n  "), strings.Join(st.want, "\n  "))
				}
				if c := w.condition("default", awsv1.ConditionAMIsReady); c.Status != st.ready {
					t.Errorf("step %d: AMIsReady %+v, want %s", i, c, st.ready)
				}
				if w.published("default") != (st.ready == metav1.ConditionTrue) {
					t.Errorf("step %d: published %v", i, w.published("default"))
				}
			}
		})
	}
}
