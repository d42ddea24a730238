package aws_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/fakeclock"
	"github.com/joiner-dev/joiner/test/simstack"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
)

type env struct {
	sim      *sim.Sim
	provider *joineraws.Provider
	clock    *fakeclock.Clock
	endpoint string
}

// newEnv starts a sim on loopback and a provider that reaches it through
// the real SDK clients (BaseEndpoint, static credentials, us-east-1).
func newEnv(t testing.TB) *env { return newEnvWith(t, sim.DefaultConfig()) }

// newEnvWith is newEnv on a sim of cfg.
func newEnvWith(t testing.TB, cfg sim.Config) *env {
	t.Helper()
	return newEnvOn(t, sim.New(sim.Options{Config: cfg}))
}

// newEnvOn is newEnv on the sim s.
func newEnvOn(t testing.TB, s *sim.Sim) *env {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &env{sim: s, clock: fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), endpoint: srv.URL}
	e.provider = e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion})
	return e
}

// clientsAs reach the env's sim through the real SDK as the caller whose
// access key ID is key.
func (e *env) clientsAs(key string) joineraws.Clients { return simstack.Clients(e.endpoint, key) }

// clients reach the env's sim through the real SDK under the shipped
// policy.
func (e *env) clients() joineraws.Clients { return e.clientsAs(simstack.AccessKeyID) }

// newProvider is a provider of opts on e.clients(): cluster "test" in
// us-east-1 on e's clock unless opts names others.
func (e *env) newProvider(t testing.TB, opts joineraws.Options) *joineraws.Provider {
	t.Helper()
	ac := e.clients()
	opts.EC2, opts.SSM, opts.IAM = ac.EC2, ac.SSM, ac.IAM
	if opts.Cluster == "" {
		opts.Cluster = "test"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	p, err := joineraws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nodeClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-default", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "sim"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Name: "sim-nodes"}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-test",
		},
	}
}

func TestResolve(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*awsv1.EC2NodeClass)
		wantErr error
		check   func(t *testing.T, r cloud.Resolved)
	}{
		{name: "tags, name, alias", check: func(t *testing.T, r cloud.Resolved) {
			if len(r.Subnets) != 3 || len(r.SecurityGroups) != 1 || r.SecurityGroups[0].ID != "sg-0sim0001" {
				t.Errorf("subnets %v, security groups %v", r.Subnets, r.SecurityGroups)
			}
			if r.ImageFor(archLabels("amd64")) != "ami-0sim2023x86" || r.ImageFor(archLabels("arm64")) != "ami-0sim2023arm" {
				t.Errorf("AMIs %v", r.AMIs)
			}
		}},
		{name: "ids", mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-0sim0002"}}
			nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sim0001"}}
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0simbrx86"}}
		}, check: func(t *testing.T, r cloud.Resolved) {
			if len(r.Subnets) != 1 || r.Subnets[0].Zone != "us-east-1b" || len(r.AMIs) != 1 || r.AMIs[0].ID != "ami-0simbrx86" {
				t.Errorf("resolved %+v", r)
			}
		}},
		{name: "AMI by name and owner, tag wildcard", mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "*"}}}
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.32-x86_64-*", Owner: "amazon"}}
		}, check: func(t *testing.T, r cloud.Resolved) { // the newer of the two releases
			if len(r.Subnets) != 3 || r.ImageFor(archLabels("amd64")) != "ami-0simbrx86" || r.ImageFor(archLabels("arm64")) != "" {
				t.Errorf("resolved %+v", r)
			}
		}},
		{name: "al2 alias", mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}
		}, check: func(t *testing.T, r cloud.Resolved) {
			if r.ImageFor(archLabels("amd64")) != "ami-0simal2x86" || r.ImageFor(archLabels("arm64")) != "ami-0simal2arm" {
				t.Errorf("AMIs %v", r.AMIs)
			}
		}},
		{name: "no subnet", wantErr: cloud.ErrNoSubnets, mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "other"}}}
		}},
		{name: "no security group", wantErr: cloud.ErrNoSecurityGroups, mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "nope"}}
		}},
		{name: "unknown alias version", wantErr: cloud.ErrNoAMIs, mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v19990101"}}
		}},
		{name: "unknown alias family", wantErr: cloud.ErrUnknownAlias, mutate: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "plan9@latest"}}
		}},
		{name: "role missing", wantErr: cloud.ErrNoRole, mutate: func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := nodeClass()
			if tt.mutate != nil {
				tt.mutate(nc)
			}
			r, err := e.provider.Resolve(ctx, nc)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Resolve error = %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			cloud.ApplyStatus(nc, r, err, metav1.Now())
			ready := condition(nc, awsv1.ConditionReady)
			if (err == nil) != (ready.Status == metav1.ConditionTrue) {
				t.Errorf("Ready = %+v with error %v", ready, err)
			}
			if err != nil && !strings.Contains(ready.Message, "=False") {
				t.Errorf("Ready message %q names no failed condition", ready.Message)
			}
		})
	}
}

func condition(nc *awsv1.EC2NodeClass, typ string) metav1.Condition {
	for _, c := range nc.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func TestStatusConditionNamesTheProblem(t *testing.T) {
	e := newEnv(t)
	nc := nodeClass()
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "none"}}}
	r, err := e.provider.Resolve(context.Background(), nc)
	cloud.ApplyStatus(nc, r, err, metav1.Now())
	c := condition(nc, awsv1.ConditionSubnetsReady)
	if c.Status != metav1.ConditionFalse || c.Reason != "SubnetsNotFound" || c.Message != "SubnetSelector did not match any Subnets" ||
		!strings.Contains(err.Error(), "no subnet matches subnetSelectorTerms") {
		t.Errorf("SubnetsReady = %+v (Karpenter's reason and message), error %v", c, err)
	}
	if c := condition(nc, awsv1.ConditionAMIsReady); c.Status != metav1.ConditionTrue {
		t.Errorf("AMIsReady = %+v", c)
	}
}

// spec builds a launch spec from the resolved default NodeClass with the
// given candidates.
func (e *env) spec(t *testing.T, token string, cands []cloud.Candidate) cloud.LaunchRequest {
	t.Helper()
	r, err := e.provider.Resolve(context.Background(), nodeClass())
	if err != nil {
		t.Fatal(err)
	}
	sgs := []string{}
	for _, g := range r.SecurityGroups {
		sgs = append(sgs, g.ID)
	}
	return cloud.LaunchRequest{LaunchID: "intent-" + token, Attempt: 1, Spec: cloud.LaunchSpec{
		NodeClaim: "default-" + token, NodePool: "default", NodeClass: "default", Candidates: cands,
		Subnets: cloud.SubnetPerZone(r.Subnets), SecurityGroupIDs: sgs, UserData: []byte("#!/bin/bash\necho hi\n"),
		InstanceProfile: r.InstanceProfile, Tags: map[string]string{"team": "platform"},
	}}
}

// ready resolves nc on e's provider and records the result in its status,
// as the nodeclass loop does, failing the test on an error.
func (e *env) ready(t *testing.T, nc *awsv1.EC2NodeClass) *awsv1.EC2NodeClass {
	t.Helper()
	r, err := e.provider.Resolve(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	cloud.ApplyStatus(nc, r, nil, metav1.Now())
	return nc
}

// launch launches req on e's provider, failing the test on an error.
func (e *env) launch(t *testing.T, req cloud.LaunchRequest) cloud.Instance {
	t.Helper()
	inst, err := e.provider.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("launching %s: %v", req.LaunchID, err)
	}
	return inst
}

func cand(it, zone, ct string) cloud.Candidate {
	e, _ := catalog.Lookup(it)
	price := e.OnDemandPrice
	if ct == "spot" {
		price = catalog.DefaultSpotModel.Price(e, zone)
	}
	img := "ami-0sim2023x86"
	if e.Arch == "arm64" {
		img = "ami-0sim2023arm"
	}
	return cloud.Candidate{InstanceType: it, Zone: zone, CapacityType: ct, Price: price, ImageID: img}
}

func TestLaunchTemplateReuse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cands := []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}
	for _, tok := range []string{"a", "b"} {
		e.launch(t, e.spec(t, tok, cands))
	}
	if got := e.sim.LaunchTemplateNames(); len(got) != 1 || e.sim.Calls("CreateLaunchTemplate") != 1 {
		t.Fatalf("launch templates after two equal launches: %v (%d creates)", got, e.sim.Calls("CreateLaunchTemplate"))
	}
	s := e.spec(t, "c", cands)
	s.Spec.UserData = []byte("#!/bin/bash\necho changed\n")
	e.launch(t, s)
	if got := e.sim.LaunchTemplateNames(); len(got) != 2 {
		t.Fatalf("launch templates after a user data change: %v", got)
	}
	// A fresh provider (new leader) finds the template by name instead of
	// creating it again.
	p2 := newProviderFor(t, e)
	if _, err := p2.Launch(ctx, e.spec(t, "d", cands)); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Calls("CreateLaunchTemplate"); n != 2 {
		t.Errorf("CreateLaunchTemplate calls = %d, want 2", n)
	}
	// Unused templates are deleted after the TTL.
	e.clock.Add(2 * time.Hour)
	deleted, err := e.provider.DeleteUnusedLaunchTemplates(ctx)
	if err != nil || len(deleted) != 2 {
		t.Fatalf("DeleteUnusedLaunchTemplates = %v, %v", deleted, err)
	}
	if got := e.sim.LaunchTemplateNames(); len(got) != 0 {
		t.Errorf("launch templates left: %v", got)
	}
}

// Karpenter renders one launch template per max-pods value: a candidate
// with its own user data variant gets its own template and, launched,
// boots that user data.
func TestUserDataVariantsGetTheirOwnLaunchTemplates(t *testing.T) {
	e := newEnv(t)
	small, big := cand("m5.large", "us-east-1a", "on-demand"), cand("m5.xlarge", "us-east-1a", "on-demand")
	big.UserDataVariant = 1
	req := e.spec(t, "v", []cloud.Candidate{small, big})
	variant := "#!/bin/bash\necho max-pods 58\n"
	req.Spec.UserDataVariants = [][]byte{[]byte(variant)}
	e.sim.InjectCapacityError("m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity")
	inst := e.launch(t, req)
	if inst.InstanceType != "m5.xlarge" {
		t.Fatalf("launched %s, want m5.xlarge (m5.large has no capacity)", inst.InstanceType)
	}
	fleet, _ := e.sim.LastRequest("CreateFleet")
	if n := len(fleet.Sub("LaunchTemplateConfigs")); n != 2 {
		t.Errorf("CreateFleet has %d launch template configs, want 2 (one per user data)", n)
	}
	if got := e.sim.LaunchTemplateNames(); len(got) != 2 {
		t.Errorf("launch templates %v, want 2", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, err := e.sim.ServeIMDS(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := imds.New(imds.Options{Endpoint: endpoint}).GetUserData(ctx, &imds.GetUserDataInput{})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Content.Close()
	if b, _ := io.ReadAll(out.Content); string(b) != variant {
		t.Errorf("the instance booted user data %q, want its variant %q", b, variant)
	}
}

// newProviderFor is a second provider on e's sim (a new leader, with
// empty caches).
func newProviderFor(t *testing.T, e *env) *joineraws.Provider {
	t.Helper()
	return e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion})
}

func TestCreateFleetCarriesTheSixtyCheapestOverrides(t *testing.T) {
	e := newEnv(t)
	var cands []cloud.Candidate
	for _, it := range catalog.InstanceTypes(catalog.Options{}) {
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Available {
				cands = append(cands, cand(it.Name, o.Zone, "on-demand"))
			}
		}
	}
	if len(cands) < 200 {
		t.Fatalf("only %d candidates", len(cands))
	}
	inst := e.launch(t, e.spec(t, "many", cands))
	req, _ := e.sim.LastRequest("CreateFleet")
	var got []float64
	for _, cfg := range req.Sub("LaunchTemplateConfigs") {
		for _, o := range cfg.Sub("Overrides") {
			c := cand(o.Get("InstanceType"), o.Get("AvailabilityZone"), "on-demand")
			got = append(got, c.Price)
		}
	}
	// Karpenter's truncation: the 60 cheapest instance types, each with
	// every zone it is offered in.
	cheapest := map[string]float64{}
	zones := map[string]int{}
	for _, c := range cands {
		if p, ok := cheapest[c.InstanceType]; !ok || c.Price < p {
			cheapest[c.InstanceType] = c.Price
		}
		zones[c.InstanceType]++
	}
	byPrice := make([]string, 0, len(cheapest))
	for it := range cheapest {
		byPrice = append(byPrice, it)
	}
	sort.Slice(byPrice, func(i, j int) bool {
		if cheapest[byPrice[i]] != cheapest[byPrice[j]] {
			return cheapest[byPrice[i]] < cheapest[byPrice[j]]
		}
		return byPrice[i] < byPrice[j]
	})
	wantOverrides := 0
	for _, it := range byPrice[:joineraws.MaxInstanceTypes] {
		wantOverrides += zones[it]
	}
	gotTypes := map[string]bool{}
	for _, cfg := range req.Sub("LaunchTemplateConfigs") {
		for _, o := range cfg.Sub("Overrides") {
			gotTypes[o.Get("InstanceType")] = true
		}
	}
	if len(gotTypes) != joineraws.MaxInstanceTypes || len(got) != wantOverrides {
		t.Fatalf("CreateFleet carried %d overrides of %d types, want %d of %d", len(got), len(gotTypes), wantOverrides, joineraws.MaxInstanceTypes)
	}
	for _, it := range byPrice[:joineraws.MaxInstanceTypes] {
		if !gotTypes[it] {
			t.Errorf("%s (one of the 60 cheapest types) missing", it)
		}
	}
	all := make([]float64, len(cands))
	for i, c := range cands {
		all[i] = c.Price
	}
	sort.Float64s(all)
	if req.Get("Type") != "instant" || req.Get("OnDemandOptions.AllocationStrategy") != "lowest-price" {
		t.Errorf("Type=%q OnDemandOptions.AllocationStrategy=%q", req.Get("Type"), req.Get("OnDemandOptions.AllocationStrategy"))
	}
	if c := cand(inst.InstanceType, inst.Zone, "on-demand"); c.Price != all[0] {
		t.Errorf("launched %s in %s at %v, cheapest is %v", inst.InstanceType, inst.Zone, c.Price, all[0])
	}
	// Spot uses price-capacity-optimized.
	spot := []cloud.Candidate{cand("m5.large", "us-east-1a", "spot"), cand("m5.large", "us-east-1a", "on-demand")}
	inst = e.launch(t, e.spec(t, "spot", spot))
	req, _ = e.sim.LastRequest("CreateFleet")
	if inst.CapacityType != "spot" || req.Get("SpotOptions.AllocationStrategy") != "price-capacity-optimized" ||
		req.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot" {
		t.Errorf("spot launch: %+v, request %v", inst, req.Params)
	}
}

func TestClientTokenDedup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.spec(t, "same", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand"), cand("c5.large", "us-east-1b", "on-demand")})
	a := e.launch(t, s)
	// Another provider (a new leader) retries the same spec.
	b, err := newProviderFor(t, e).Launch(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Errorf("same token launched %s and %s", a.ID, b.ID)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Errorf("sim has %d instances, want 1", n)
	}
	got, err := e.provider.List(ctx, map[string]string{karpv1.TagLaunchID: s.LaunchID})
	if err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("List by launch-id = %v, %v", got, err)
	}
}

func TestCapacityErrorFallbackAndCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nc := e.ready(t, nodeClass())
	cheap := cand("m5.large", "us-east-1a", "spot")
	next := cand("m5.large", "us-east-1b", "spot")
	od := cand("m5.large", "us-east-1a", "on-demand")
	e.sim.InjectCapacityError("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")

	inst := e.launch(t, e.spec(t, "ice1", []cloud.Candidate{cheap, next, od}))
	if inst.Zone != "us-east-1b" || inst.CapacityType != "spot" {
		t.Errorf("launched %+v, want the next offering m5.large spot in us-east-1b", inst)
	}
	available := func(zone, ct string) bool {
		for _, o := range joineraws.InstanceTypeOf(t, e.provider, nc, "m5.large").Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				return o.Available
			}
		}
		t.Fatalf("no m5.large %s %s offering", zone, ct)
		return false
	}
	if available("us-east-1a", "spot") {
		t.Error("the offering that failed is still available")
	}
	if !available("us-east-1b", "spot") || !available("us-east-1a", "on-demand") {
		t.Error("other offerings became unavailable")
	}

	// Every spot offering out of capacity: the launch falls back to
	// on-demand in a second call.
	e.sim.InjectCapacityError("m5.large", "us-east-1b", "spot", "InsufficientInstanceCapacity")
	inst = e.launch(t, e.spec(t, "ice2", []cloud.Candidate{cheap, next, od}))
	if inst.CapacityType != "on-demand" {
		t.Errorf("launched %+v, want on-demand after spot ran out", inst)
	}
	// Nothing left: an InsufficientCapacityError naming the offerings.
	_, err := e.provider.Launch(ctx, e.spec(t, "ice3", []cloud.Candidate{cheap, next}))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || !errors.Is(err, cloud.ErrInsufficientCapacity) || len(ice.Offerings) != 2 || !cloud.IsRetryable(err) {
		t.Fatalf("err = %v, want an InsufficientCapacityError for 2 offerings", err)
	}

	e.clock.Add(3*time.Minute - time.Second)
	if available("us-east-1a", "spot") {
		t.Error("offering available again before 3 minutes")
	}
	e.clock.Add(2 * time.Second)
	if !available("us-east-1a", "spot") {
		t.Error("offering still unavailable after 3 minutes")
	}
}

func TestTags(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.spec(t, "tags", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	inst := e.launch(t, s)
	got := e.sim.Instances()[0].Tags
	want := map[string]string{
		"Name": s.Spec.NodeClaim, "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": s.Spec.NodeClaim,
		"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/test": "owned", "eks:eks-cluster-name": "test",
		"joiner.io/launch-id": s.LaunchID, "joiner.io/attempt": "1", "team": "platform",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tag %s = %q, want %q (instance %s)", k, got[k], v, inst.ID)
		}
	}
	for _, key := range []string{"karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass", "kubernetes.io/cluster/other", "joiner.io/attempt"} {
		bad := e.spec(t, "bad", s.Spec.Candidates)
		bad.Spec.Tags = map[string]string{key: "x"}
		_, err := e.provider.Launch(ctx, bad)
		if !errors.Is(err, cloud.ErrInvalidSpec) || !strings.Contains(err.Error(), key) || cloud.IsRetryable(err) {
			t.Errorf("tag %s: err = %v, want a non-retryable error naming the key", key, err)
		}
	}
	if n := e.sim.Calls("CreateFleet"); n != 1 {
		t.Errorf("CreateFleet calls = %d, want 1 (rejected specs must not reach EC2)", n)
	}
}

func TestTerminateIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	inst := e.launch(t, e.spec(t, "term", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}))
	for i := 0; i < 2; i++ {
		if err := e.provider.Terminate(ctx, inst.ID); err != nil {
			t.Fatalf("terminate #%d: %v", i+1, err)
		}
	}
	if err := e.provider.Terminate(ctx, "i-0000000000000dead"); err != nil {
		t.Errorf("terminating an unknown instance: %v", err)
	}
	got, err := e.provider.Get(ctx, inst.ID)
	if err != nil || (got.State != "shutting-down" && got.State != "terminated") {
		t.Errorf("Get after terminate = %+v, %v", got, err)
	}
	if _, err := e.provider.Get(ctx, "i-0000000000000dead"); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("Get unknown = %v, want ErrNotFound", err)
	}
}

func TestSpotPrices(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.provider.RefreshSpotPrices(ctx); err != nil {
		t.Fatal(err)
	}
	its, err := e.provider.InstanceTypes(ctx, nil)
	if err != nil || len(its) == 0 {
		t.Fatalf("InstanceTypes = %d, %v", len(its), err)
	}
	// At least one call each (the SDK may retry a request under load).
	calls := map[string]int{}
	for _, action := range []string{"DescribeSpotPriceHistory", "DescribeInstanceTypes", "DescribeInstanceTypeOfferings"} {
		if calls[action] = e.sim.Calls(action); calls[action] < 1 {
			t.Errorf("%s was not called", action)
		}
	}
	// Offerings are cached: a second call asks EC2 nothing.
	if _, err := e.provider.InstanceTypes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"} {
		if n := e.sim.Calls(action); n != calls[action] {
			t.Errorf("second InstanceTypes called %s again (%d calls, was %d)", action, n, calls[action])
		}
	}
	// Live spot prices replace the modelled ones.
	for _, it := range its {
		if it.Name != "m5.large" {
			continue
		}
		entry, _ := catalog.Lookup("m5.large")
		for _, o := range it.Offerings {
			if o.CapacityType == "spot" && o.Price != catalog.DefaultSpotModel.Price(entry, o.Zone) {
				t.Errorf("spot price %v in %s, sim says %v", o.Price, o.Zone, catalog.DefaultSpotModel.Price(entry, o.Zone))
			}
		}
	}
}

func TestSpotPricedAboveOnDemandIsDropped(t *testing.T) {
	e := newEnv(t)
	dear := cand("c5.large", "us-east-1a", "spot")
	dear.Price = 5 // above every on-demand candidate
	inst := e.launch(t, e.spec(t, "dear", []cloud.Candidate{dear, cand("m5.large", "us-east-1b", "on-demand")}))
	if inst.CapacityType != "on-demand" || inst.InstanceType != "m5.large" {
		t.Errorf("launched %+v, want on-demand m5.large", inst)
	}
}

func TestLaunchTemplatesOfAPreviousLeader(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.launch(t, e.spec(t, "lt", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}))
	p2 := newProviderFor(t, e)
	if err := p2.HydrateLaunchTemplates(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := p2.LaunchTemplates(), e.sim.LaunchTemplateNames(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("hydrated %v, sim has %v", got, want)
	}
	if err := p2.DeleteLaunchTemplatesFor(ctx, "other"); err != nil || len(e.sim.LaunchTemplateNames()) != 1 {
		t.Fatalf("deleting another nodeclass's templates: %v, left %v", err, e.sim.LaunchTemplateNames())
	}
	if err := p2.DeleteLaunchTemplatesFor(ctx, "default"); err != nil || len(e.sim.LaunchTemplateNames()) != 0 {
		t.Fatalf("DeleteLaunchTemplatesFor: %v, left %v", err, e.sim.LaunchTemplateNames())
	}
	// The first provider's cache still names the deleted template: its next
	// launch hits InvalidLaunchTemplateName.NotFoundException, forgets the
	// cache and retries once with a recreated template.
	if _, err := e.provider.Launch(ctx, e.spec(t, "lt2", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})); err != nil {
		t.Fatalf("launch after the template was deleted behind the cache: %v", err)
	}
	if n := len(e.sim.LaunchTemplateNames()); n != 1 {
		t.Errorf("launch templates after the retry: %d", n)
	}
}

func TestTokenOfATerminatedInstance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.spec(t, "gone", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	inst := e.launch(t, s)
	if err := e.provider.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	e.sim.Step(ctx) // shutting-down -> terminated
	if _, err := e.provider.Launch(ctx, s); !errors.Is(err, cloud.ErrTokenInstanceTerminated) || cloud.IsRetryable(err) {
		t.Errorf("relaunch with the token of a terminated instance: %v", err)
	}
	other := s
	other.Spec.Candidates = []cloud.Candidate{cand("c5.large", "us-east-1a", "on-demand")}
	other.LaunchID = "intent-mismatch"
	e.launch(t, other)
	other.Spec.Candidates = []cloud.Candidate{cand("m5.large", "us-east-1b", "on-demand")}
	if _, err := e.provider.Launch(ctx, other); !errors.Is(err, cloud.ErrIdempotentMismatch) {
		t.Errorf("same token, other candidates: %v", err)
	}
}

func TestSubnetOutOfAddresses(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Subnets = append(cfg.Subnets, sim.Subnet{ID: "subnet-0sim0small", Zone: "us-east-1a", AvailableIPs: 10,
		Tags: map[string]string{sim.DiscoveryTag: "sim"}})
	e := newEnvWith(t, cfg)
	s, p, clock := e.sim, e.provider, e.clock
	ctx := context.Background()
	r, err := p.Resolve(ctx, nodeClass())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.SubnetsByZone(r.Subnets)["us-east-1a"]; got != "subnet-0sim0001" {
		t.Fatalf("us-east-1a subnet = %s, want the one with the most free addresses", got)
	}
	s.InjectCapacityError("m5.large", "us-east-1a", "on-demand", "InsufficientFreeAddressesInSubnet")
	_, err = p.Launch(ctx, cloud.LaunchRequest{LaunchID: "t", Attempt: 1, Spec: cloud.LaunchSpec{NodeClaim: "nc",
		Candidates: []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}, Subnets: p.SubnetsByZone(r.Subnets),
		SecurityGroupIDs: []string{"sg-0sim0001"}}})
	if !errors.Is(err, cloud.ErrInsufficientCapacity) {
		t.Fatalf("err = %v", err)
	}
	if got := p.SubnetsByZone(r.Subnets)["us-east-1a"]; got != "subnet-0sim0small" {
		t.Errorf("us-east-1a subnet after running out of addresses = %s", got)
	}
	clock.Add(3 * time.Minute)
	if got := p.SubnetsByZone(r.Subnets)["us-east-1a"]; got != "subnet-0sim0001" {
		t.Errorf("us-east-1a subnet after the TTL = %s", got)
	}
}

func TestRunRefreshesPricesAndStops(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.provider.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); e.sim.Calls("DescribeSpotPriceHistory") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("Run did not refresh spot prices")
		}
	}
	if e.sim.Calls("DescribeLaunchTemplates") == 0 {
		t.Error("Run did not adopt existing launch templates first")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// The tag-restriction rule is one rule: a tag EC2NodeClass validation
// accepts is one every launch accepts, and one it rejects never reaches
// EC2. Karpenter v1.14 restricts eks:eks-cluster-name, kubernetes.io/cluster*
// and three karpenter keys, not their domains (karpenter.sh/team is a
// user's tag); Joiner adds its own joiner.io/ prefix.
func TestTagRuleValidationAndLaunchAgree(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i, tc := range []struct {
		key string
		ok  bool
	}{
		{"team", true},
		{"karpenter.sh/team", true},
		{"karpenter.k8s.aws/cost-center", true},
		{"kubernetes.io/role", true},
		{"karpenter.sh/nodepool", false},
		{"karpenter.sh/nodeclaim", false},
		{"karpenter.k8s.aws/ec2nodeclass", false},
		{"eks:eks-cluster-name", false},
		{"kubernetes.io/cluster/other", false},
		{"kubernetes.io/clusterx", false},
		{"joiner.io/launch-id", false},
		{"joiner.io/anything", false},
		{"", false},
	} {
		nc := nodeClass()
		nc.Spec.Tags = map[string]string{tc.key: "v"}
		nc.SetDefaults()
		verr := nc.Validate()
		req := e.spec(t, fmt.Sprintf("tag%d", i), []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
		req.Spec.Tags = map[string]string{tc.key: "v"}
		_, lerr := e.provider.Launch(ctx, req)
		if (verr == nil) != tc.ok || (lerr == nil) != tc.ok {
			t.Errorf("tag %q: validation err %v, launch err %v; want both to accept=%v", tc.key, verr, lerr, tc.ok)
		}
		if lerr != nil && !errors.Is(lerr, cloud.ErrInvalidSpec) {
			t.Errorf("tag %q: launch err %v is not ErrInvalidSpec", tc.key, lerr)
		}
	}
}
