package aws_test

// Ports of aws/karpenter-provider-aws v1.14.1's provider suites
// pkg/providers/subnet/suite_test.go, pkg/providers/securitygroup/
// suite_test.go and pkg/providers/amifamily/suite_test.go, run against the
// sim through the real SDK. Cases ported elsewhere are not repeated:
// selector semantics (by id, ids, names, tags ANDed, terms ORed, an id or
// name term ignoring its tags) in selectors_test.go; every alias family,
// AL2 on 1.33+ and Windows 2025 before 1.35 in amis_test.go and
// amialias_test.go; ssmParameter terms in amis_test.go; the AMI ordering
// ("AMI List requirements", "should sort amis ...") in amiorder_test.go;
// status.amis and AMIsReady in coordinator/nodeclass's
// karpenter_ami_test.go. The AMIResolver's launch template cases
// (metadata options per region, EnclaveEnabled) belong to the launch
// template suites (karpenter_launchtemplate_test.go).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// resolveKind is one of the selector kinds the suites cover: how a case's
// terms go into the class, which Describe action answers them and how the
// resolution lists them.
type resolveKind struct {
	name   string
	action string
	list   func(cloud.Resolved) []string
}

var (
	subnetKind = resolveKind{name: "subnets", action: "DescribeSubnets", list: func(r cloud.Resolved) []string {
		var out []string
		for _, s := range r.Subnets {
			out = append(out, s.ID)
		}
		return out
	}}
	groupKind = resolveKind{name: "security groups", action: "DescribeSecurityGroups", list: func(r cloud.Resolved) []string {
		var out []string
		for _, g := range r.SecurityGroups {
			out = append(out, g.ID)
		}
		return out
	}}
	imageKind = resolveKind{name: "amis", action: "DescribeImages", list: func(r cloud.Resolved) []string {
		var out []string
		for _, a := range r.AMIs {
			out = append(out, a.ID)
		}
		return out
	}}
)

// terms is a class change of one selector kind.
type terms func(*awsv1.EC2NodeClass)

func subnetTerms(ts ...awsv1.SubnetSelectorTerm) terms {
	return func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms = ts }
}

func groupTerms(ts ...awsv1.SecurityGroupSelectorTerm) terms {
	return func(nc *awsv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = ts }
}

func imageTerms(ts ...awsv1.AMISelectorTerm) terms {
	return func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMIFamily = new(awsv1.AMIFamilyAL2023)
		nc.Spec.AMISelectorTerms = ts
	}
}

// tagged is a tag map of key=value pairs.
func tagged(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// ownImages are the account's images the image cases select among (the
// EKS ones left out, so tag wildcards see these alone): two x86_64 and one
// arm64 tagged team=a, one x86_64 team=b.
func ownImages() []sim.Image {
	img := func(id, arch, created string, tags map[string]string) sim.Image {
		return sim.Image{ID: id, Name: "team-" + id, Owner: "self", Arch: arch, Family: awsv1.AMIFamilyAL2023, CreationDate: created, Tags: tags}
	}
	return []sim.Image{
		img("ami-0img0001", "x86_64", "2025-01-01T00:00:00Z", tagged("team", "a", "env", "prod")),
		img("ami-0img0002", "x86_64", "2025-02-01T00:00:00Z", tagged("team", "b", "env", "prod")),
		img("ami-0img0003", "arm64", "2025-03-01T00:00:00Z", tagged("team", "a", "env", "dev")),
		img("ami-0img0004", "x86_64", "2025-04-01T00:00:00Z", tagged("team", "a", "stage", "canary")),
	}
}

// resolveConfig is selectorConfig with the images of ownImages alone.
func resolveConfig() sim.Config {
	cfg := selectorConfig()
	cfg.Images = ownImages()
	return cfg
}

// TestSelectorPagingAsKarpenter ports "should handle empty pages when
// describing subnets/security groups" and "should not overwrite found
// values when handling multiple pages of subnets/security groups": EC2
// counts a page before its filters, so a page may come back empty with a
// NextToken; every page is read and what earlier pages found is kept. The
// sim cuts pages of PageSizes items; the look-ups ask for Karpenter's
// page size (MaxResults 500, images 1000).
func TestSelectorPagingAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kind      resolveKind
		pageSize  int
		terms     terms
		want      []string
		wantCalls int // Describe calls: one per page
	}{
		// The sim lists the 3 default subnets, then subnet-0sel0001..3.
		{name: "subnets: an empty page first", kind: subnetKind, pageSize: 3, terms: subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("team", "*")}),
			want: []string{"subnet-0sel0001", "subnet-0sel0002", "subnet-0sel0003"}, wantCalls: 2},
		{name: "subnets: found across pages, none lost", kind: subnetKind, pageSize: 2, terms: subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("env", "*")}),
			want: []string{"subnet-0sel0001", "subnet-0sel0002", "subnet-0sel0003"}, wantCalls: 3},
		{name: "subnets: one per page", kind: subnetKind, pageSize: 1, terms: subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("*", "*")}),
			want: []string{"subnet-0sel0001", "subnet-0sel0002", "subnet-0sel0003", "subnet-0sim0001", "subnet-0sim0002", "subnet-0sim0003"}, wantCalls: 6},
		// The sim lists sg-0sim0001, then sg-0sel0001..3.
		{name: "security groups: an empty page first", kind: groupKind, pageSize: 1, terms: groupTerms(awsv1.SecurityGroupSelectorTerm{Tags: tagged("team", "b")}),
			want: []string{"sg-0sel0002"}, wantCalls: 4},
		{name: "security groups: found across pages, none lost", kind: groupKind, pageSize: 2, terms: groupTerms(awsv1.SecurityGroupSelectorTerm{Tags: tagged("env", "*")}),
			want: []string{"sg-0sel0001", "sg-0sel0002", "sg-0sel0003"}, wantCalls: 2},
		{name: "images: an empty page first", kind: imageKind, pageSize: 2, terms: imageTerms(awsv1.AMISelectorTerm{Tags: tagged("stage", "canary")}),
			want: []string{"ami-0img0004"}, wantCalls: 2},
		{name: "images: found across pages, none lost", kind: imageKind, pageSize: 1, terms: imageTerms(awsv1.AMISelectorTerm{Tags: tagged("team", "a")}),
			want: []string{"ami-0img0004", "ami-0img0003"}, wantCalls: 4}, // newest per architecture
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := resolveConfig()
			cfg.PageSizes = map[string]int{tc.kind.action: tc.pageSize}
			e := newEnvWith(t, cfg)
			nc := nodeClass()
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0img0001"}}
			tc.terms(nc)
			before := e.sim.Calls(tc.kind.action)
			r, err := e.provider.Resolve(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.kind.list(r); !slices.Equal(got, tc.want) {
				t.Errorf("%s %v, want %v", tc.kind.name, got, tc.want)
			}
			if got := e.sim.Calls(tc.kind.action) - before; got != tc.wantCalls {
				t.Errorf("%s calls %d, want %d (one per page)", tc.kind.action, got, tc.wantCalls)
			}
			last, _ := e.sim.LastRequest(tc.kind.action)
			want := "500"
			if tc.kind.action == "DescribeImages" {
				want = "1000"
			}
			if got := last.Get("MaxResults"); got != want {
				t.Errorf("%s MaxResults %q, want %s (Karpenter's)", tc.kind.action, got, want)
			}
		})
	}
}

// TestSelectorCacheAsKarpenter ports the suites' "Provider Cache" cases:
// terms resolved once are answered from the cache (no Describe call) until
// it expires, whether they select by id, name or tags; terms whose tags
// are ANDed in one term and the same tags ORed over two terms are told
// apart (each its own entry and result).
func TestSelectorCacheAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter string
		kind      resolveKind
		first     terms    // resolved, then again from the cache
		want      []string // first's result
		other     terms    // resolved after first (nil: none)
		wantOther []string
	}{
		{karpenter: "should resolve subnets from cache that are filtered by id", kind: subnetKind,
			first: subnetTerms(awsv1.SubnetSelectorTerm{ID: "subnet-0sel0002"}), want: []string{"subnet-0sel0002"}},
		{karpenter: "should resolve subnets from cache that are filtered by tags", kind: subnetKind,
			first: subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("Name", "sim-private-us-east-1b")}), want: []string{"subnet-0sim0002"}},
		{karpenter: "should correctly disambiguate AND vs OR semantics for tags (subnets)", kind: subnetKind,
			first: subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("team", "a", "env", "prod")}), want: []string{"subnet-0sel0001"},
			other:     subnetTerms(awsv1.SubnetSelectorTerm{Tags: tagged("team", "a")}, awsv1.SubnetSelectorTerm{Tags: tagged("env", "prod")}),
			wantOther: []string{"subnet-0sel0001", "subnet-0sel0002", "subnet-0sel0003"}},
		{karpenter: "should resolve security groups from cache that are filtered by id", kind: groupKind,
			first: groupTerms(awsv1.SecurityGroupSelectorTerm{ID: "sg-0sel0003"}), want: []string{"sg-0sel0003"}},
		{karpenter: "should resolve security groups from cache that are filtered by Name", kind: groupKind,
			first: groupTerms(awsv1.SecurityGroupSelectorTerm{Name: "sel-two"}), want: []string{"sg-0sel0002"}},
		{karpenter: "should resolve security groups from cache that are filtered by tags", kind: groupKind,
			first: groupTerms(awsv1.SecurityGroupSelectorTerm{Tags: tagged("team", "b")}), want: []string{"sg-0sel0002"}},
		{karpenter: "should correctly disambiguate AND vs OR semantics for tags (security groups)", kind: groupKind,
			first: groupTerms(awsv1.SecurityGroupSelectorTerm{Tags: tagged("team", "a", "env", "prod")}), want: []string{"sg-0sel0001"},
			other:     groupTerms(awsv1.SecurityGroupSelectorTerm{Tags: tagged("team", "a")}, awsv1.SecurityGroupSelectorTerm{Tags: tagged("env", "prod")}),
			wantOther: []string{"sg-0sel0001", "sg-0sel0002", "sg-0sel0003"}},
		{karpenter: "should resolve AMIs from cache that are filtered by id", kind: imageKind,
			first: imageTerms(awsv1.AMISelectorTerm{ID: "ami-0img0002"}), want: []string{"ami-0img0002"}},
		{karpenter: "should resolve AMIs from cache that are filtered by name", kind: imageKind,
			first: imageTerms(awsv1.AMISelectorTerm{Name: "team-ami-0img0003"}), want: []string{"ami-0img0003"}},
		{karpenter: "should resolve AMIs from cache that are filtered by tags", kind: imageKind,
			first: imageTerms(awsv1.AMISelectorTerm{Tags: tagged("team", "b")}), want: []string{"ami-0img0002"}},
		{karpenter: "should correctly disambiguate AND vs OR semantics for tags (AMIs)", kind: imageKind,
			first: imageTerms(awsv1.AMISelectorTerm{Tags: tagged("team", "a", "env", "prod")}), want: []string{"ami-0img0001"},
			other:     imageTerms(awsv1.AMISelectorTerm{Tags: tagged("team", "a")}, awsv1.AMISelectorTerm{Tags: tagged("env", "prod")}),
			wantOther: []string{"ami-0img0004", "ami-0img0003"}}, // newest per architecture
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			e := newEnvWith(t, resolveConfig())
			resolve := func(set terms) ([]string, int) {
				t.Helper()
				nc := nodeClass()
				nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0img0001"}}
				set(nc)
				before := e.sim.Calls(tc.kind.action)
				r, err := e.provider.Resolve(context.Background(), nc)
				if err != nil {
					t.Fatal(err)
				}
				return tc.kind.list(r), e.sim.Calls(tc.kind.action) - before
			}
			check := func(step string, set terms, want []string, wantAsked bool) {
				t.Helper()
				got, calls := resolve(set)
				if !slices.Equal(got, want) {
					t.Errorf("%s: %s %v, want %v", step, tc.kind.name, got, want)
				}
				if (calls > 0) != wantAsked {
					t.Errorf("%s: %d %s calls, want EC2 asked: %v", step, calls, tc.kind.action, wantAsked)
				}
			}
			check("first", tc.first, tc.want, true)
			check("again", tc.first, tc.want, false)
			if tc.other != nil {
				check("other terms", tc.other, tc.wantOther, true)
				check("other terms again", tc.other, tc.wantOther, false)
				check("first terms again", tc.first, tc.want, false)
			}
			e.clock.Add(6 * time.Minute) // past the cache
			check("after the cache expired", tc.first, tc.want, true)
		})
	}
}

// TestConcurrentResolveAsKarpenter ports "should not cause data races when
// calling List() simultaneously" (subnets, security groups) and "... Get()
// simultaneously" (AMIs): many resolutions at once, each reordering what
// it got, all see the same lists, and a caller's reordering never reaches
// the cache (Karpenter hands out copies of its cached lists). Run with
// -race to see the races themselves.
func TestConcurrentResolveAsKarpenter(t *testing.T) {
	e := newEnvWith(t, resolveConfig())
	nc := nodeClass()
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: tagged("*", "*")}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: tagged("*", "*")}}
	imageTerms(awsv1.AMISelectorTerm{ID: "ami-0img0001"}, awsv1.AMISelectorTerm{ID: "ami-0img0003"})(nc)
	want := map[string][]string{
		subnetKind.name: {"subnet-0sel0001", "subnet-0sel0002", "subnet-0sel0003", "subnet-0sim0001", "subnet-0sim0002", "subnet-0sim0003"},
		groupKind.name:  {"sg-0sel0001", "sg-0sel0002", "sg-0sel0003", "sg-0sim0001"},
		imageKind.name:  {"ami-0img0003", "ami-0img0001"}, // newest first
	}
	check := func(who string, r cloud.Resolved) error {
		for _, k := range []resolveKind{subnetKind, groupKind, imageKind} {
			if got := k.list(r); !slices.Equal(got, want[k.name]) {
				return fmt.Errorf("%s: %s %v, want %v", who, k.name, got, want[k.name])
			}
		}
		return nil
	}
	// A caller that reorders its resolution does not reorder the next.
	r, err := e.provider.Resolve(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(r.Subnets)
	slices.Reverse(r.SecurityGroups)
	slices.Reverse(r.AMIs)
	const callers = 32
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r, err := e.provider.Resolve(context.Background(), nc)
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = check(fmt.Sprintf("caller %d", i), r)
			// Reorder in place, as Karpenter's test sorts its copy.
			slices.SortFunc(r.Subnets, func(a, b cloud.Subnet) int { return strings.Compare(b.ID, a.ID) })
			slices.SortFunc(r.SecurityGroups, func(a, b awsv1.SecurityGroup) int { return strings.Compare(b.ID, a.ID) })
			slices.SortFunc(r.AMIs, func(a, b cloud.AMI) int { return strings.Compare(a.ID, b.ID) })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	r, err = e.provider.Resolve(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := check("after the callers", r); err != nil {
		t.Error(err)
	}
}

// TestAMIProviderAsKarpenter ports the AMIProvider cases not ported
// elsewhere: images not available are never picked, an image's tags
// (even ones named like node labels) never become requirements, an alias
// resolves what AWS publishes of it when some of its SSM parameters do
// not exist, and Amazon's deprecated images are still found (Karpenter
// asks with IncludeDeprecated; EC2 leaves them out otherwise).
func TestAMIProviderAsKarpenter(t *testing.T) {
	type row struct {
		karpenter string
		k8s       string            // the cluster's version (default: the sim's)
		region    func(*sim.Config) // the region's images and parameters
		terms     []awsv1.AMISelectorTerm
		want      []string // status.amis, in any order
		wantDepr  []string // the IDs resolved deprecated
	}
	alias := func(a string) []awsv1.AMISelectorTerm { return []awsv1.AMISelectorTerm{{Alias: a}} }
	// keepParams keeps, of the parameters of the alias's path prefix, only
	// those containing one of keep.
	keepParams := func(prefix string, keep ...string) func(*sim.Config) {
		return func(c *sim.Config) {
			for name := range c.Parameters {
				if strings.HasPrefix(name, prefix) && !slices.ContainsFunc(keep, func(k string) bool { return strings.Contains(name, k) }) {
					delete(c.Parameters, name)
				}
			}
		}
	}
	const amd64Only, arm64Only = "kubernetes.io/arch In [amd64]", "kubernetes.io/arch In [arm64]"
	var rows []row
	for _, state := range ec2types.ImageState("").Values() {
		if state == ec2types.ImageStateAvailable {
			continue
		}
		rows = append(rows, row{karpenter: "should ignore images when image.state != available: " + string(state),
			region: func(c *sim.Config) {
				c.Images = []sim.Image{
					{ID: "ami-123", Name: "available", Owner: "self", Arch: "x86_64", CreationDate: "2022-08-15T12:00:00Z", Tags: tagged("test", "test")},
					{ID: "ami-456", Name: string(state), Owner: "self", Arch: "arm64", CreationDate: "2022-08-15T12:00:00Z", Tags: tagged("test", "test"),
						State: string(state)},
				}
			},
			terms: []awsv1.AMISelectorTerm{{Tags: tagged("test", "test")}}, want: []string{"ami-123: " + amd64Only}})
	}
	rows = append(rows,
		row{karpenter: "should succeed to not resolve tags as requirements for NodeClasses",
			region: func(c *sim.Config) {
				c.Images = []sim.Image{{ID: "ami-id-amd64", Name: "amd64-ami", Owner: "self", Arch: "x86_64", CreationDate: "2025-01-01T00:00:00Z",
					Tags: tagged("Name", "amd64-ami", "foo", "bar", corev1.LabelInstanceTypeStable, "m5.large", corev1.LabelTopologyZone, "us-east-1a")}}
			},
			terms: []awsv1.AMISelectorTerm{{Tags: tagged("*", "*")}}, want: []string{"ami-id-amd64: " + amd64Only}},
		row{karpenter: "should succeed to partially resolve AMIs if all SSM aliases don't exist (Al2)", k8s: "1.32",
			region: keepParams("/aws/service/eks/optimized-ami/1.32/amazon-linux-2", "amazon-linux-2023", "amazon-linux-2/", "amazon-linux-2-arm64/"),
			terms:  alias("al2@latest"), want: []string{"ami-0simal2x86: " + amd64Standard, "ami-0simal2arm: " + arm64Standard}},
		row{karpenter: "should succeed to partially resolve AMIs if all SSM aliases don't exist (AL2023)", k8s: "1.32",
			region: keepParams("/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/", "x86_64/standard/"),
			terms:  alias("al2023@latest"), want: []string{"ami-0sim2023x86: " + amd64Standard}},
		row{karpenter: "should succeed to partially resolve AMIs if all SSM aliases don't exist (Bottlerocket)", k8s: "1.32",
			region: keepParams("/aws/service/bottlerocket/aws-k8s-1.32", "aws-k8s-1.32/", "aws-k8s-1.32-nvidia/x86_64/"),
			terms:  alias("bottlerocket@latest"), want: []string{"ami-0simbrx86: " + amd64Standard, "ami-0simbrx86: " + amd64Neuron,
				"ami-0simbrarm: " + arm64Standard, "ami-0simbrx86nvidia: " + amd64Nvidia}},
		row{karpenter: "deprecated public images are still found (IncludeDeprecated), ranked after the others",
			region: func(c *sim.Config) {
				c.Images = []sim.Image{
					{ID: "ami-0legacyx86", Name: "legacy-node-x86", Owner: "amazon", Arch: "x86_64", CreationDate: "2019-06-01T00:00:00Z",
						DeprecationTime: "2020-01-01T00:00:00Z"},
					{ID: "ami-0legacyarm", Name: "legacy-node-arm", Owner: "amazon", Arch: "arm64", CreationDate: "2019-06-01T00:00:00Z",
						DeprecationTime: "2020-01-01T00:00:00Z"},
					{ID: "ami-0currentarm", Name: "legacy-node-arm-2", Owner: "amazon", Arch: "arm64", CreationDate: "2019-01-01T00:00:00Z"},
				}
			},
			terms:    []awsv1.AMISelectorTerm{{Name: "legacy-node-*", Owner: "amazon"}},
			want:     []string{"ami-0legacyx86: " + amd64Only, "ami-0currentarm: " + arm64Only},
			wantDepr: []string{"ami-0legacyx86"}},
	)
	for _, tc := range rows {
		t.Run(tc.karpenter, func(t *testing.T) {
			cfg := sim.DefaultConfig()
			tc.region(&cfg)
			e := newEnvWith(t, cfg)
			p := e.provider
			if tc.k8s != "" {
				p = e.providerFor(t, tc.k8s)
			}
			nc := nodeClass()
			nc.Spec.AMISelectorTerms = tc.terms
			r, err := p.Resolve(context.Background(), nc)
			if err != nil {
				t.Fatal(err)
			}
			if got := statusAMIs(r.StatusAMIs()); !sameItems(got, tc.want) {
				t.Errorf("status.amis\n  %s\nwant (any order)\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			var depr []string
			for _, a := range r.AMIs {
				if a.Deprecated {
					depr = append(depr, a.ID)
				}
			}
			if !slices.Equal(depr, tc.wantDepr) {
				t.Errorf("deprecated %v, want %v", depr, tc.wantDepr)
			}
		})
	}
}

// sameItems reports whether a and b hold the same strings, in any order.
func sameItems(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestImageQueriesAsKarpenter ports the "AMI Selectors" cases of
// DescribeImageQueries: the DescribeImages request each kind of term
// makes. Tags alone ask every owner (tags are the account's own view);
// a name without an owner asks the account's and Amazon's images only;
// an owner alone or beside a name asks that owner; ids ask by an image-id
// filter without owners. Every request asks for available images,
// deprecated ones included, 1000 a page.
func TestImageQueriesAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter   string
		term        awsv1.AMISelectorTerm
		wantOwners  []string
		wantFilters []string // "name=value,value", sorted
	}{
		{karpenter: "should have empty owners and use tags when prefixes aren't set", term: awsv1.AMISelectorTerm{Tags: tagged("Name", "my-ami")},
			wantFilters: []string{"state=available", "tag:Name=my-ami"}},
		{karpenter: "should have default owners and use name when prefixed", term: awsv1.AMISelectorTerm{Name: "my-ami"},
			wantOwners: []string{"amazon", "self"}, wantFilters: []string{"name=my-ami", "state=available"}},
		{karpenter: "should not set owners when legacy ids are passed", term: awsv1.AMISelectorTerm{ID: "ami-abcd1234"},
			wantFilters: []string{"image-id=ami-abcd1234", "state=available"}},
		{karpenter: "should allow only specifying owners", term: awsv1.AMISelectorTerm{Owner: "123456789012"},
			wantOwners: []string{"123456789012"}, wantFilters: []string{"state=available"}},
		{karpenter: "should allow prefixed name and prefixed owners", term: awsv1.AMISelectorTerm{Name: "my-name", Owner: "0123456789"},
			wantOwners: []string{"0123456789"}, wantFilters: []string{"name=my-name", "state=available"}},
		{karpenter: "tag wildcards ask for the key (tag-key)", term: awsv1.AMISelectorTerm{Tags: tagged("team", "*", "env", "prod")},
			wantFilters: []string{"state=available", "tag-key=team", "tag:env=prod"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			e := newEnvWith(t, resolveConfig())
			nc := nodeClass()
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{tc.term}
			_, _ = e.provider.Resolve(context.Background(), nc) // the request matters, not whether it matched
			req, ok := e.sim.LastRequest("DescribeImages")
			if !ok {
				t.Fatal("no DescribeImages request")
			}
			owners := slices.Sorted(slices.Values(req.Strings("Owner")))
			if !slices.Equal(owners, tc.wantOwners) {
				t.Errorf("owners %v, want %v", owners, tc.wantOwners)
			}
			var filters []string
			for _, f := range req.Filters() {
				filters = append(filters, f.Name+"="+strings.Join(f.Values, ","))
			}
			slices.Sort(filters)
			if !slices.Equal(filters, tc.wantFilters) {
				t.Errorf("filters %v, want %v", filters, tc.wantFilters)
			}
			if req.Get("IncludeDeprecated") != "true" || req.Get("MaxResults") != "1000" {
				t.Errorf("IncludeDeprecated %q, MaxResults %q; want true, 1000", req.Get("IncludeDeprecated"), req.Get("MaxResults"))
			}
		})
	}
}
