package aws_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// selectorConfig is the default sim plus subnets and security groups
// tagged to tell selector semantics apart (Karpenter's subnet and
// securitygroup provider suites use such a set).
func selectorConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Subnets = append(cfg.Subnets,
		sim.Subnet{ID: "subnet-0sel0001", Zone: "us-east-1a", AvailableIPs: 100, Tags: map[string]string{"team": "a", "env": "prod"}},
		sim.Subnet{ID: "subnet-0sel0002", Zone: "us-east-1b", AvailableIPs: 300, Tags: map[string]string{"team": "b", "env": "prod"}},
		sim.Subnet{ID: "subnet-0sel0003", Zone: "us-east-1c", AvailableIPs: 300, Tags: map[string]string{"team": "a", "env": "dev"}},
	)
	cfg.SecurityGroups = append(cfg.SecurityGroups,
		sim.SecGroup{ID: "sg-0sel0001", Name: "sel-one", Tags: map[string]string{"team": "a", "env": "prod"}},
		sim.SecGroup{ID: "sg-0sel0002", Name: "sel-two", Tags: map[string]string{"team": "b", "env": "prod"}},
		sim.SecGroup{ID: "sg-0sel0003", Name: "sel-three", Tags: map[string]string{"team": "a", "env": "dev"}},
	)
	return cfg
}

// selectorCase is one row of a selector table: terms of one kind, and the
// resolved listing they must give (or the error Resolve must wrap).
type selectorCase[T any] struct {
	name    string
	terms   []T
	want    []string
	wantErr error
}

// runSelectorCases resolves the default node class with each case's terms
// put in place by set, and compares what list renders of the result,
// in order, with the case's want (what names the listing in messages).
func runSelectorCases[T any](t *testing.T, e *env, what string, cases []selectorCase[T],
	set func(*awsv1.EC2NodeClass, []T), list func(cloud.Resolved) []string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := nodeClass()
			set(nc, tc.terms)
			r, err := e.provider.Resolve(context.Background(), nc)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := list(r); !slices.Equal(got, tc.want) {
				t.Errorf("%s:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestSubnetSelectorTerms ports Karpenter's subnet provider cases: terms
// are ORed, the tags of one term ANDed, "*" matches any value, an id term
// names its subnet whatever else the term says (Karpenter builds one
// subnet-id filter from the id terms alone; the CRD's rule refuses id
// beside tags only when every term has both, so the mixed cases here are
// admitted), and the status lists the subnets most free addresses
// first, then by ID, each with its zone and zone ID.
func TestSubnetSelectorTerms(t *testing.T) {
	e := newEnvWith(t, selectorConfig())
	cases := []selectorCase[awsv1.SubnetSelectorTerm]{ // want: status.subnets as id/zone/zoneID
		{name: "by id", terms: []awsv1.SubnetSelectorTerm{{ID: "subnet-0sel0002"}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2"}},
		{name: "by ids", terms: []awsv1.SubnetSelectorTerm{{ID: "subnet-0sel0001"}, {ID: "subnet-0sel0003"}},
			want: []string{"subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "ids and tags in separate terms", terms: []awsv1.SubnetSelectorTerm{{ID: "subnet-0sel0001"}, {Tags: map[string]string{"team": "b"}}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "a single tag", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a"}}},
			want: []string{"subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "one tag, several values", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a"}}, {Tags: map[string]string{"team": "b"}}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2", "subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "tags of one term are ANDed", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a", "env": "prod"}}},
			want: []string{"subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "terms are ORed", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a"}}, {Tags: map[string]string{"env": "prod"}}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2", "subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "wildcard value", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"env": "*"}}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2", "subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "an id term ignores its tags", terms: []awsv1.SubnetSelectorTerm{{ID: "subnet-0sel0002", Tags: map[string]string{"team": "a"}}, {Tags: map[string]string{"team": "c"}}},
			want: []string{"subnet-0sel0002/us-east-1b/use1-az2"}},
		// Karpenter's suites' default class: any tag at all.
		{name: "any tagged subnet", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			want: []string{"subnet-0sim0001/us-east-1a/use1-az1", "subnet-0sim0002/us-east-1b/use1-az2", "subnet-0sim0003/us-east-1c/use1-az3",
				"subnet-0sel0002/us-east-1b/use1-az2", "subnet-0sel0003/us-east-1c/use1-az3", "subnet-0sel0001/us-east-1a/use1-az1"}},
		{name: "nothing matches", terms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "c"}}}, wantErr: cloud.ErrNoSubnets},
	}
	runSelectorCases(t, e, "status.subnets", cases,
		func(nc *awsv1.EC2NodeClass, terms []awsv1.SubnetSelectorTerm) { nc.Spec.SubnetSelectorTerms = terms },
		func(r cloud.Resolved) []string {
			var got []string
			for _, s := range r.StatusSubnets() {
				got = append(got, s.ID+"/"+s.Zone+"/"+s.ZoneID)
			}
			return got
		})
}

// TestSecurityGroupSelectorTerms ports Karpenter's securitygroup provider
// cases: by id, ids, names, tags (ANDed within a term, terms ORed,
// wildcards); an id or name term selects by that alone, as Karpenter's
// group-id and group-name filters are built from those terms only (the
// CRD admits such a term beside tags when another term has neither).
func TestSecurityGroupSelectorTerms(t *testing.T) {
	e := newEnvWith(t, selectorConfig())
	cases := []selectorCase[awsv1.SecurityGroupSelectorTerm]{ // want: id/name, by ID
		{name: "by id", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sel0002"}}, want: []string{"sg-0sel0002/sel-two"}},
		{name: "by ids", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sel0003"}, {ID: "sg-0sel0001"}},
			want: []string{"sg-0sel0001/sel-one", "sg-0sel0003/sel-three"}},
		{name: "ids and tags in separate terms", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sel0001"}, {Tags: map[string]string{"team": "b"}}},
			want: []string{"sg-0sel0001/sel-one", "sg-0sel0002/sel-two"}},
		{name: "by names", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "sel-two"}, {Name: "sel-three"}},
			want: []string{"sg-0sel0002/sel-two", "sg-0sel0003/sel-three"}},
		{name: "a single tag", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"team": "a"}}},
			want: []string{"sg-0sel0001/sel-one", "sg-0sel0003/sel-three"}},
		{name: "tags of one term are ANDed", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"team": "a", "env": "prod"}}},
			want: []string{"sg-0sel0001/sel-one"}},
		{name: "terms are ORed", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"team": "b"}}, {Tags: map[string]string{"env": "dev"}}},
			want: []string{"sg-0sel0002/sel-two", "sg-0sel0003/sel-three"}},
		{name: "wildcard value", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"env": "*"}}},
			want: []string{"sg-0sel0001/sel-one", "sg-0sel0002/sel-two", "sg-0sel0003/sel-three"}},
		{name: "an id term ignores its tags", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sel0002", Tags: map[string]string{"team": "a"}}, {Tags: map[string]string{"team": "c"}}},
			want: []string{"sg-0sel0002/sel-two"}},
		// Karpenter's "should default to the clusters security groups"
		// (its test class selects any tag; sg-0sim0001's only key,
		// karpenter.sh/discovery, has a slash) and "should discover
		// security groups by tag" (a kubernetes.io/cluster/<name> key).
		{name: "any tagged group", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			want: []string{"sg-0sel0001/sel-one", "sg-0sel0002/sel-two", "sg-0sel0003/sel-three", "sg-0sim0001/sim-nodes"}},
		{name: "a key with slashes", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "sim"}}},
			want: []string{"sg-0sim0001/sim-nodes"}},
		{name: "a name term ignores its tags", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "sel-three", Tags: map[string]string{"team": "b"}}, {Tags: map[string]string{"team": "c"}}},
			want: []string{"sg-0sel0003/sel-three"}},
		{name: "nothing matches", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"team": "c"}}}, wantErr: cloud.ErrNoSecurityGroups},
	}
	runSelectorCases(t, e, "security groups", cases,
		func(nc *awsv1.EC2NodeClass, terms []awsv1.SecurityGroupSelectorTerm) {
			nc.Spec.SecurityGroupSelectorTerms = terms
		},
		func(r cloud.Resolved) []string {
			var got []string
			for _, g := range r.SecurityGroups {
				got = append(got, g.ID+"/"+g.Name)
			}
			return got
		})
}

// amiSelectorConfig adds the account's own images, tagged, beside the EKS
// ones: two releases of one name on x86_64, one arm64, and another
// account's public image of the same name.
func amiSelectorConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Images = append(cfg.Images,
		sim.Image{ID: "ami-0own0001", Name: "team-node-v1", Owner: "self", Arch: "x86_64", Family: awsv1.AMIFamilyAL2023,
			CreationDate: "2025-06-01T00:00:00Z", Tags: map[string]string{"team": "a", "stage": "old"}},
		sim.Image{ID: "ami-0own0002", Name: "team-node-v2", Owner: "self", Arch: "x86_64", Family: awsv1.AMIFamilyAL2023,
			CreationDate: "2025-09-01T00:00:00Z", Tags: map[string]string{"team": "a", "stage": "new"}},
		sim.Image{ID: "ami-0own0003", Name: "team-node-v2", Owner: "self", Arch: "arm64", Family: awsv1.AMIFamilyAL2023,
			CreationDate: "2025-08-01T00:00:00Z", Tags: map[string]string{"team": "b", "stage": "new"}},
		sim.Image{ID: "ami-0pub0001", Name: "team-node-v2", Owner: "999988887777", Arch: "x86_64", Family: awsv1.AMIFamilyAL2023,
			CreationDate: "2025-12-01T00:00:00Z"},
	)
	return cfg
}

// TestAMISelectorTerms ports Karpenter's AMI selector cases: a name
// without an owner looks at the account's and Amazon's images only (not
// another account's public one), an owner opens them; tags are ANDed
// within a term and terms ORed; the newest image per architecture wins;
// an image's tags never become requirements (only its architecture).
func TestAMISelectorTerms(t *testing.T) {
	e := newEnvWith(t, amiSelectorConfig())
	cases := []selectorCase[awsv1.AMISelectorTerm]{ // want: status.amis
		{name: "name without owner: self and amazon only", terms: []awsv1.AMISelectorTerm{{Name: "team-node-v2"}},
			want: []string{"ami-0own0002: kubernetes.io/arch In [amd64]", "ami-0own0003: kubernetes.io/arch In [arm64]"}},
		{name: "name with another account as owner", terms: []awsv1.AMISelectorTerm{{Name: "team-node-v2", Owner: "999988887777"}},
			want: []string{"ami-0pub0001: kubernetes.io/arch In [amd64]"}},
		{name: "owner alone", terms: []awsv1.AMISelectorTerm{{Owner: "999988887777"}},
			want: []string{"ami-0pub0001: kubernetes.io/arch In [amd64]"}},
		{name: "name wildcard, newest per architecture", terms: []awsv1.AMISelectorTerm{{Name: "team-node-*", Owner: "self"}},
			want: []string{"ami-0own0002: kubernetes.io/arch In [amd64]", "ami-0own0003: kubernetes.io/arch In [arm64]"}},
		{name: "tags of one term are ANDed", terms: []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "a", "stage": "old"}}},
			want: []string{"ami-0own0001: kubernetes.io/arch In [amd64]"}},
		{name: "terms are ORed", terms: []awsv1.AMISelectorTerm{{Tags: map[string]string{"stage": "old"}}, {Tags: map[string]string{"team": "b"}}},
			want: []string{"ami-0own0003: kubernetes.io/arch In [arm64]", "ami-0own0001: kubernetes.io/arch In [amd64]"}},
		{name: "tag wildcard", terms: []awsv1.AMISelectorTerm{{Tags: map[string]string{"stage": "*"}}},
			want: []string{"ami-0own0002: kubernetes.io/arch In [amd64]", "ami-0own0003: kubernetes.io/arch In [arm64]"}},
		{name: "ids", terms: []awsv1.AMISelectorTerm{{ID: "ami-0own0001"}, {ID: "ami-0pub0001"}},
			want: []string{"ami-0pub0001: kubernetes.io/arch In [amd64]"}},
		{name: "nothing matches", terms: []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "c"}}}, wantErr: cloud.ErrNoAMIs},
	}
	runSelectorCases(t, e, "status.amis", cases,
		func(nc *awsv1.EC2NodeClass, terms []awsv1.AMISelectorTerm) {
			nc.Spec.AMIFamily = new(awsv1.AMIFamilyAL2023)
			nc.Spec.AMISelectorTerms = terms
		},
		func(r cloud.Resolved) []string { return statusAMIs(r.StatusAMIs()) })
}
