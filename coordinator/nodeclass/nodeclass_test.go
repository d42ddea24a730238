package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/nodeclass/nodeclasstest"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/observe"
)

// fakeCloud resolves every class (or fails with err, or answers with
// partErr beside what it resolved) and counts calls.
type fakeCloud struct {
	err                    error
	partErr                *cloud.ResolveError
	amiID                  string // default ami-1
	resolves, typeListings int
}

func (c *fakeCloud) Resolve(context.Context, *awsv1.EC2NodeClass) (cloud.Resolved, error) {
	c.resolves++
	r := cloud.Resolved{Subnets: []cloud.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}}, AMIs: []cloud.AMI{{ID: "ami-1", Arch: "amd64"}},
		SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1"}}, InstanceProfile: "p"}
	if c.amiID != "" {
		r.AMIs[0].ID = c.amiID
	}
	if c.err != nil {
		return cloud.Resolved{}, &cloud.ResolveError{AMIs: c.err}
	}
	if c.partErr != nil {
		if c.partErr.AMIs != nil {
			r.AMIs = nil
		}
		if c.partErr.Subnets != nil {
			r.Subnets = nil
		}
		return r, c.partErr
	}
	return r, nil
}

func (c *fakeCloud) InstanceTypes(_ context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	c.typeListings++
	return catalog.InstanceTypes(catalog.Options{NodeClass: nc})[:3], nil
}

func class(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "name", Generation: 1}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "role",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"k": "v"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"k": "v"}}},
	}}
}

func pool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: reqs}}}}
}

type rig struct {
	cache   *fake.Cache
	kube    *nodeclasstest.Writer
	cloud   *fakeCloud
	catalog *view.Catalog
	rec     *record.FakeRecorder
	now     time.Time
	l       *Loop
}

func newRig(c *fake.Cache) *rig {
	r := &rig{cache: c, kube: &nodeclasstest.Writer{}, cloud: &fakeCloud{}, catalog: view.NewCatalog(), rec: record.NewFakeRecorder(100),
		now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	r.l = New(Config{Now: func() time.Time { return r.now }},
		Deps{Cache: c, Kube: r.kube, Cloud: r.cloud, Catalog: r.catalog, Recorder: r.rec})
	return r
}

// step advances the rig's clock by d and runs a pass.
func (r *rig) step(d time.Duration) {
	r.now = r.now.Add(d)
	r.l.Reconcile(context.Background())
}

func TestInvalidObjectsAreReportedAndLeftOut(t *testing.T) {
	badClass := class("bad")
	badClass.Spec.Tags = map[string]string{"kubernetes.io/cluster/x": "owned"}
	c := &fake.Cache{PoolList: []*karpv1.NodePool{pool("bad", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelHostname,
		Operator: karpv1.OpIn, Values: []string{"x"}}), pool("good")}, ClassList: []*awsv1.EC2NodeClass{badClass, class("default")}}
	r := newRig(c)
	r.l.Reconcile(context.Background())

	var badPool *karpv1.NodePool
	for _, np := range r.kube.Pools {
		if np.Name == "bad" {
			badPool = np
		}
	}
	if badPool == nil {
		t.Fatal("no status update for the invalid pool")
	}
	cond := meta.FindStatusCondition(badPool.Status.Conditions, awsv1.ConditionValidationSucceeded)
	if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "kubernetes.io/hostname") {
		t.Fatalf("condition = %+v, want ValidationSucceeded=False naming the field", cond)
	}
	events := strings.Join(observe.Events(r.rec), "\n")
	if !strings.Contains(events, "InvalidNodePool") || !strings.Contains(events, "InvalidEC2NodeClass") {
		t.Fatalf("events %q, want one for the invalid pool and one for the invalid class", events)
	}
	got := r.catalog.Classes()
	if len(got) != 1 || got["default"] == nil || len(got["default"].InstanceTypes) == 0 {
		t.Fatalf("published %v, want the valid class with its instance types", got)
	}
	if got["default"].NodeClass.Status.InstanceProfile != "p" {
		t.Fatalf("published class lacks its resolved status: %+v", got["default"].NodeClass.Status)
	}
	// The same state again: no new Events, no new status writes.
	writes := len(r.kube.Pools) + len(r.kube.Classes)
	r.cache.PoolList[0].Status = badPool.Status
	r.l.Reconcile(context.Background())
	if n := len(observe.Events(r.rec)); n != 0 {
		t.Fatalf("%d events repeated", n)
	}
	if n := len(r.kube.Pools); n > writes {
		t.Fatalf("pool status written again (%d writes, was %d)", n, writes)
	}
}

// Resolution happens when a class changes, when it is older than Refresh,
// and Retry after a failure; instance types are listed again every
// TypesRefresh or when woken; nothing else calls the cloud.
func TestResolutionSchedule(t *testing.T) {
	c := &fake.Cache{ClassList: []*awsv1.EC2NodeClass{class("default")}}
	r := newRig(c)
	step := r.step
	step(0)
	for range 10 {
		step(time.Second)
	}
	if r.cloud.resolves != 1 || r.cloud.typeListings != 1 {
		t.Fatalf("11 passes: %d resolves, %d listings; want 1 and 1", r.cloud.resolves, r.cloud.typeListings)
	}
	step(time.Minute)
	if r.cloud.resolves != 1 || r.cloud.typeListings != 2 {
		t.Fatalf("after TypesRefresh: %d resolves, %d listings; want 1 and 2", r.cloud.resolves, r.cloud.typeListings)
	}
	r.l.typesStale = true // what Wake sets when the loop runs
	step(time.Second)
	if r.cloud.typeListings != 3 {
		t.Fatalf("after a wake: %d listings, want 3", r.cloud.typeListings)
	}
	step(5 * time.Minute)
	if r.cloud.resolves != 2 {
		t.Fatalf("after Refresh: %d resolves, want 2", r.cloud.resolves)
	}
	changed := class("default")
	changed.Spec.Tags = map[string]string{"a": "b"}
	c.ClassList[0] = changed
	step(time.Second)
	if r.cloud.resolves != 3 {
		t.Fatalf("after a spec change: %d resolves, want 3", r.cloud.resolves)
	}
	// A failure: the class is not ready, Ready=False with the reason, and
	// it is tried again after Retry, not every pass.
	r.cloud.err = fmt.Errorf("amiSelectorTerms[0]: %w", cloud.ErrNoAMIs)
	changed = class("default")
	changed.Spec.Tags = map[string]string{"a": "c"}
	c.ClassList[0] = changed
	step(time.Second)
	if len(r.catalog.Classes()) != 0 {
		t.Fatal("a class that failed to resolve was published")
	}
	last := r.kube.Classes[len(r.kube.Classes)-1]
	if cond := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionReady); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("Ready = %+v, want False", cond)
	}
	before := r.cloud.resolves
	step(time.Second)
	if r.cloud.resolves != before {
		t.Fatal("a failed class was resolved again before Retry")
	}
	r.cloud.err = nil
	step(30 * time.Second)
	if r.cloud.resolves != before+1 || len(r.catalog.Classes()) != 1 {
		t.Fatalf("after Retry: %d resolves (want %d), %d classes published", r.cloud.resolves, before+1, len(r.catalog.Classes()))
	}
}

// A part EC2 could not be asked for (throttled, timed out) keeps its last
// resolution, status and condition, as Karpenter's reconcilers leave the
// status alone on an error, and is asked again after Retry; an answer
// ("matched nothing") takes the class out of service.
func TestFailedCallsKeepTheLastResolution(t *testing.T) {
	c := &fake.Cache{ClassList: []*awsv1.EC2NodeClass{class("default")}}
	r := newRig(c)
	step := func(d time.Duration) {
		r.step(d)
		if n := len(r.kube.Classes); n > 0 {
			c.ClassList[0] = r.kube.Classes[n-1] // the cache sees the status written
		}
	}
	step(0)
	written := len(r.kube.Classes)
	r.cloud.amiID = "ami-2" // a newer image, which this resolution does see
	r.cloud.partErr = &cloud.ResolveError{Subnets: fmt.Errorf("describing subnets: %w", errors.New("RequestLimitExceeded: Request limit exceeded."))}
	step(5 * time.Minute) // Refresh
	got := r.catalog.Classes()["default"]
	if got == nil {
		t.Fatal("a throttled subnet lookup took the class out of service")
	}
	if s := got.Resolved.Subnets; len(s) != 1 || s[0].ID != "subnet-a" || got.Resolved.AMIs[0].ID != "ami-2" {
		t.Fatalf("published subnets %+v and AMIs %+v: want the last subnets kept and the new AMI", s, got.Resolved.AMIs)
	}
	last := r.kube.Classes[len(r.kube.Classes)-1]
	for _, typ := range []string{awsv1.ConditionSubnetsReady, awsv1.ConditionReady} {
		if cond := meta.FindStatusCondition(last.Status.Conditions, typ); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("%s = %+v, want True kept", typ, cond)
		}
	}
	if len(last.Status.Subnets) != 1 || len(r.kube.Classes) != written+1 || last.Status.AMIs[0].ID != "ami-2" {
		t.Errorf("status written %d times (before %d), subnets %+v, AMIs %+v: want one write, for the new AMI only",
			len(r.kube.Classes), written, last.Status.Subnets, last.Status.AMIs)
	}
	before := r.cloud.resolves
	step(time.Second)
	if r.cloud.resolves != before {
		t.Fatal("a partly failed class was resolved again before Retry")
	}
	// Now EC2 answers: no subnet matches.
	r.cloud.partErr = &cloud.ResolveError{Subnets: cloud.ErrNoSubnets}
	step(30 * time.Second)
	if r.cloud.resolves != before+1 || len(r.catalog.Classes()) != 0 {
		t.Fatalf("after Retry: %d resolves (want %d), published %v: want the class out of service", r.cloud.resolves, before+1, r.catalog.Classes())
	}
	last = r.kube.Classes[len(r.kube.Classes)-1]
	if cond := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionSubnetsReady); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "SubnetsNotFound" {
		t.Errorf("SubnetsReady = %+v, want False SubnetsNotFound", cond)
	}
}

// With cluster discovery: while the cluster is unknown no class is
// resolved or published, each says why (ValidationSucceeded False,
// ClusterDiscoveryFailed, Ready False from it as operatorpkg derives it,
// one Event); once known the classes resolve, and a new Kubernetes version
// re-resolves them at once.
func TestClusterFacts(t *testing.T) {
	c := &fake.Cache{ClassList: []*awsv1.EC2NodeClass{class("default")}}
	r := newRig(c)
	version, clusterErr := "", fmt.Errorf("cluster x: endpoint neither given nor discovered: %w", cloud.ErrClusterUnknown)
	r.l.d.Cluster = func() (string, error) { return version, clusterErr }
	ctx := context.Background()
	step := func() {
		r.now = r.now.Add(time.Second)
		r.l.Reconcile(ctx)
	}
	step()
	step()
	if r.cloud.resolves != 0 || len(r.catalog.Classes()) != 0 {
		t.Fatalf("unknown cluster: %d resolves, %d classes published; want none", r.cloud.resolves, len(r.catalog.Classes()))
	}
	last := r.kube.Classes[len(r.kube.Classes)-1]
	if cond := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionValidationSucceeded); cond == nil ||
		cond.Status != metav1.ConditionFalse || cond.Reason != "ClusterDiscoveryFailed" || !strings.Contains(cond.Message, "endpoint") {
		t.Errorf("ValidationSucceeded = %+v, want False, ClusterDiscoveryFailed, naming what is missing", cond)
	}
	if cond := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionReady); cond == nil || cond.Status != metav1.ConditionFalse ||
		cond.Reason != "UnhealthyDependents" || !strings.Contains(cond.Message, "ValidationSucceeded=False") {
		t.Errorf("Ready = %+v, want False, UnhealthyDependents, naming ValidationSucceeded", cond)
	}
	if events := observe.Events(r.rec); len(events) != 1 || !strings.Contains(events[0], "ClusterDiscoveryFailed") {
		t.Errorf("events %q, want one ClusterDiscoveryFailed", events)
	}
	version, clusterErr = "1.34", nil
	step()
	if r.cloud.resolves != 1 || len(r.catalog.Classes()) != 1 {
		t.Fatalf("known cluster: %d resolves, %d classes published; want 1 and 1", r.cloud.resolves, len(r.catalog.Classes()))
	}
	step()
	version = "1.35"
	step()
	if r.cloud.resolves != 2 {
		t.Fatalf("after an upgrade: %d resolves, want 2", r.cloud.resolves)
	}
}

// ValidationSucceeded follows the class's resolution as Karpenter's: False
// (DependenciesNotReady, its message) while a part it waits for is False,
// and Ready names it; True once every part resolved.
func TestValidationSucceededFollowsResolution(t *testing.T) {
	c := &fake.Cache{ClassList: []*awsv1.EC2NodeClass{class("default")}}
	r := newRig(c)
	r.cloud.partErr = &cloud.ResolveError{Subnets: cloud.ErrNoSubnets}
	ctx := context.Background()
	r.l.Reconcile(ctx)
	last := r.kube.Classes[len(r.kube.Classes)-1]
	v := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionValidationSucceeded)
	if v == nil || v.Status != metav1.ConditionFalse || v.Reason != "DependenciesNotReady" ||
		v.Message != "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution" {
		t.Errorf("ValidationSucceeded = %+v, want False, DependenciesNotReady", v)
	}
	if ready := meta.FindStatusCondition(last.Status.Conditions, awsv1.ConditionReady); ready == nil ||
		ready.Message != "SubnetsReady=False, ValidationSucceeded=False" {
		t.Errorf("Ready = %+v, want its message naming SubnetsReady and ValidationSucceeded", ready)
	}
	c.ClassList[0] = last
	r.cloud.partErr = nil
	r.now = r.now.Add(time.Minute)
	r.l.Reconcile(ctx)
	last = r.kube.Classes[len(r.kube.Classes)-1]
	for _, typ := range []string{awsv1.ConditionValidationSucceeded, awsv1.ConditionReady} {
		if cond := meta.FindStatusCondition(last.Status.Conditions, typ); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("after the subnets resolved: %s = %+v, want True", typ, cond)
		}
	}
}
