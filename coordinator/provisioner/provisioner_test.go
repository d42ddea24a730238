package provisioner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/nodeclass"
	"github.com/joiner-dev/joiner/coordinator/nodeclass/nodeclasstest"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/userdata"
)

// fakeWriter records writes; created NodeClaims land in the cache.
type fakeWriter struct {
	mu      sync.Mutex
	cache   *fake.Cache
	created []*karpv1.NodeClaim
	nodeclasstest.Writer
}

func (w *fakeWriter) CreateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.created = append(w.created, nc)
	w.cache.ClaimList = append(w.cache.ClaimList, nc)
	return nc, nil
}

// fakeCloud resolves every class to one subnet per zone, a security group
// and AL2023 images, serves the embedded catalogue and counts the calls
// that would reach AWS.
type fakeCloud struct {
	mu                     sync.Mutex
	resolves, typeListings int
	amis                   []cloud.AMI // nil: one image per architecture
	// offer adds offerings to the listed types (nil: the catalogue's).
	offer func(its []*catalog.InstanceType) []*catalog.InstanceType
	// types, when set, are listed instead of the catalogue's; zones, when
	// set, get a subnet each instead of us-east-1a and us-east-1b.
	types []*catalog.InstanceType
	zones []string
}

func (c *fakeCloud) Resolve(_ context.Context, _ *awsv1.EC2NodeClass) (cloud.Resolved, error) {
	c.mu.Lock()
	c.resolves++
	amis := c.amis
	c.mu.Unlock()
	if amis == nil {
		amis = []cloud.AMI{{ID: "ami-x86", Arch: "amd64"}, {ID: "ami-arm", Arch: "arm64"}}
	}
	subnets := []cloud.Subnet{{ID: "subnet-a", Zone: "us-east-1a", AvailableIPs: 100}, {ID: "subnet-b", Zone: "us-east-1b", AvailableIPs: 100}}
	if c.zones != nil {
		subnets = nil
		for _, z := range c.zones {
			subnets = append(subnets, cloud.Subnet{ID: "subnet-" + z, Zone: z, AvailableIPs: 100})
		}
	}
	return cloud.Resolved{
		Subnets:         subnets,
		SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-1", Name: "nodes"}},
		AMIs:            amis,
		InstanceProfile: "role",
	}, nil
}

func (*fakeCloud) SubnetsByZone(s []cloud.Subnet) map[string]string {
	return cloud.SubnetPerZone(s)
}

func (c *fakeCloud) InstanceTypes(_ context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	c.mu.Lock()
	c.typeListings++
	c.mu.Unlock()
	if c.types != nil {
		return c.types, nil
	}
	its := catalog.InstanceTypes(catalog.Options{NodeClass: nc})
	if c.offer != nil {
		its = c.offer(its)
	}
	return its, nil
}

var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func pool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
			ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"team": "a"}},
			Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: reqs,
			}}}}
}

func class() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "role",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"k": "v"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"k": "v"}}},
	}}
}

func req(key, op string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: karpv1.NodeSelectorOperator(op), Values: values}
}

func yes() *bool { b := true; return &b }

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: yes()}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

// rig is a provisioner on fakes, with the nodeclass loop that publishes
// the classes it plans with.
type rig struct {
	p       *Provisioner
	w       *fakeWriter
	state   *fsm.FSM
	raft    *fsmtest.Direct
	cloud   *fakeCloud
	classes *nodeclass.Loop
	views   *view.Builder
	deps    Deps
}

func newTestProvisioner(t testing.TB, c *fake.Cache) *rig {
	t.Helper()
	return newTestProvisionerOn(t, c, &fakeCloud{})
}

// newTestProvisionerOn is newTestProvisioner on a given fake cloud.
func newTestProvisionerOn(t testing.TB, c *fake.Cache, fc *fakeCloud) *rig {
	t.Helper()
	r := newRigOn(t, c, fc)
	r.cloud = fc
	return r
}

// rigCloud is what the rig's loops ask the cloud: a *fakeCloud, or the
// AWS provider on the simulated region.
type rigCloud interface {
	nodeclass.Cloud
	Cloud
}

// newRigOn is newTestProvisioner on any cloud (rig.cloud stays nil).
func newRigOn(t testing.TB, c *fake.Cache, cl rigCloud) *rig {
	t.Helper()
	r := &rig{w: &fakeWriter{cache: c}, state: fsm.New()}
	r.raft = fsmtest.New(r.state)
	catalog := view.NewCatalog()
	r.classes = nodeclass.New(nodeclass.Config{Now: func() time.Time { return now }},
		nodeclass.Deps{Cache: c, Kube: r.w, Cloud: cl, Catalog: catalog, Recorder: record.NewFakeRecorder(100)})
	r.classes.Reconcile(context.Background())
	n := 0
	r.views = &view.Builder{Cache: c, State: r.state, Classes: catalog}
	r.deps = Deps{Cache: c, Kube: r.w, State: r.state, Raft: r.raft, Cloud: cl,
		Views: r.views, Classes: catalog, Recorder: record.NewFakeRecorder(100)}
	p, err := New(Config{Cluster: userdata.Cluster{Name: "test", Endpoint: "https://k8s.example", ServiceCIDR: "10.100.0.0/16"},
		Now: func() time.Time { return now }, NewID: func() string {
			n++
			return "intent" + string(rune('a'+n-1)) + "xyz"
		}}, r.deps)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	return r
}

func TestReconcileCommitsFrozenIntentsAndCreatesNodeClaims(t *testing.T) {
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"), req(karpv1.LabelCapacityType, "In", "spot", "on-demand"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		// Small enough that the three share the cheapest type: a pod that
		// would push a claim into a dearer type per unit of what it ran
		// out of starts a claim of its own (see the scheduler's upgradeOK).
		PodList: []*corev1.Pod{pendingPod("a", "100m"), pendingPod("b", "100m"), pendingPod("c", "100m")},
	}
	r := newTestProvisioner(t, c)
	p, w, state, raft := r.p, r.w, r.state, r.raft
	ctx := context.Background()
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	intents := state.Intents()
	if len(intents) != 1 || len(w.created) != 1 {
		t.Fatalf("%d intents, %d nodeclaims created; want 1 and 1", len(intents), len(w.created))
	}
	in, nc := intents[0], w.created[0]
	if in.State != fsm.IntentPending || !slices.Equal(in.Pods, []string{"default/a", "default/b", "default/c"}) {
		t.Fatalf("intent state %s pods %v", in.State, in.Pods)
	}
	spec := in.Spec
	if spec.NodeClaim != nc.Name || !strings.HasPrefix(nc.Name, "general-") {
		t.Fatalf("intent nodeclaim %q, object %q", spec.NodeClaim, nc.Name)
	}
	if len(spec.UserData) == 0 || !slices.Equal(spec.SecurityGroupIDs, []string{"sg-1"}) || spec.Subnets["us-east-1a"] != "subnet-a" || spec.InstanceProfile != "role" {
		t.Fatalf("frozen spec incomplete: userdata %d bytes, sgs %v, subnets %v, profile %q", len(spec.UserData), spec.SecurityGroupIDs, spec.Subnets, spec.InstanceProfile)
	}
	capTypes := map[string]bool{}
	for _, cand := range spec.Candidates {
		// Both capacity types the pool allows: the launch filters them
		// and picks one, as Karpenter's Create does.
		capTypes[cand.CapacityType] = true
		if cand.Zone == "us-east-1c" {
			t.Fatalf("candidate %+v: no subnet in us-east-1c", cand)
		}
		if cand.ImageID != "ami-x86" {
			t.Fatalf("candidate %+v: want the amd64 image", cand)
		}
	}
	if len(capTypes) != 2 || !capTypes[karpv1.CapacityTypeSpot] || !capTypes[karpv1.CapacityTypeOnDemand] || spec.MinValues {
		t.Fatalf("candidates of capacity types %v, minValues %v; want spot and on-demand, no minValues", capTypes, spec.MinValues)
	}
	// The capacity type is the launch's: the claim allows both and is
	// labelled once launched, as Karpenter's.
	if _, labelled := nc.Labels[karpv1.LabelCapacityType]; labelled || !slices.ContainsFunc(nc.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
		return r.Key == karpv1.LabelCapacityType && slices.Equal(r.Values, []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot})
	}) {
		t.Fatalf("nodeclaim labels %v, requirements %v: want capacity type In [on-demand spot], unlabelled", nc.Labels, nc.Spec.Requirements)
	}
	if !slices.Contains(nc.Finalizers, karpv1.TerminationFinalizer) || nc.Annotations[karpv1.AnnotationLaunchID] != in.ID ||
		nc.Labels[karpv1.LabelNodePool] != "general" || nc.Labels["team"] != "a" {
		t.Fatalf("nodeclaim metadata: finalizers %v annotations %v labels %v", nc.Finalizers, nc.Annotations, nc.Labels)
	}
	defaulted := class()
	defaulted.SetDefaults()
	if nc.Annotations[karpv1.AnnotationNodePoolHash] == "" || nc.Annotations[karpv1.AnnotationEC2NodeClassHash] != defaulted.Hash("") {
		t.Fatalf("drift hashes missing: %v", nc.Annotations)
	}
	if nc.Annotations[karpv1.AnnotationInstanceProfile] != "role" { // as Karpenter records it, for instance profile garbage collection
		t.Fatalf("instance profile annotation missing: %v", nc.Annotations)
	}
	var types []string
	for _, r := range nc.Spec.Requirements {
		if r.Key == karpv1.LabelInstanceType {
			types = r.Values
		}
	}
	for _, cand := range spec.Candidates {
		if !slices.Contains(types, cand.InstanceType) {
			t.Fatalf("candidate type %s not in the nodeclaim's instance-type requirement %v", cand.InstanceType, types)
		}
	}
	if q := nc.Spec.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("300m")) != 0 {
		t.Fatalf("requests cpu %s, want 300m", q.String())
	}

	// A second pass sees the pods nominated to the in-flight intent.
	before := raft.Count()
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if raft.Count() != before || len(state.Intents()) != 1 {
		t.Fatalf("second pass proposed %d command(s), %d intents: in-flight capacity must hold the pods", raft.Count()-before, len(state.Intents()))
	}

	// A new pod that fits the in-flight claim's spare room is not planned
	// again; one that does not fit gets a second claim.
	c.PodList = append(c.PodList, pendingPod("d", "2000"))
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(state.Intents()); got != 1 {
		t.Fatalf("a 2000-cpu pod fits no instance type: %d intents, want 1", got)
	}
}

// An invalid pool is left out of the view (the nodeclass loop reports it);
// the valid ones keep serving.
func TestInvalidNodePoolIsSkipped(t *testing.T) {
	bad := pool("bad", req("kubernetes.io/hostname", "In", "x"))
	good := pool("good")
	c := &fake.Cache{PoolList: []*karpv1.NodePool{bad, good}, ClassList: []*awsv1.EC2NodeClass{class()},
		PodList: []*corev1.Pod{pendingPod("p", "1")}}
	r := newTestProvisioner(t, c)
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	ins := r.state.Intents()
	if len(ins) != 1 || ins[0].Spec.NodePool != "good" {
		t.Fatalf("intents %+v: the valid pool must keep serving", ins)
	}
}

// NodeClass resolution runs once per change, not once per pass: ten
// provisioning passes (and ten cluster views) make no cloud call.
func TestPassesMakeNoCloudCalls(t *testing.T) {
	c := &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, ClassList: []*awsv1.EC2NodeClass{class()}}
	r := newTestProvisioner(t, c)
	ctx := context.Background()
	for i := range 10 {
		c.PodList = append(c.PodList, pendingPod(fmt.Sprintf("p%d", i), "1"))
		if err := r.p.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r.deps.Views.Build(now)
	}
	if len(r.state.Intents()) == 0 {
		t.Fatal("nothing was planned")
	}
	if r.cloud.resolves != 1 || r.cloud.typeListings != 1 {
		t.Fatalf("after 10 passes: %d Resolve and %d InstanceTypes calls, want 1 each (at the nodeclass loop's start)",
			r.cloud.resolves, r.cloud.typeListings)
	}
	// A change to the class is resolved again, once.
	c.ClassList[0] = class()
	c.ClassList[0].Spec.Tags = map[string]string{"team": "b"}
	r.classes.Reconcile(ctx)
	r.classes.Reconcile(ctx)
	if r.cloud.resolves != 2 {
		t.Fatalf("after a class change: %d Resolve calls, want 2", r.cloud.resolves)
	}
}

func TestCandidates(t *testing.T) {
	cat := catalog.InstanceTypes(catalog.Options{})
	r, _ := (&fakeCloud{}).Resolve(context.Background(), nil)
	subnets := cloud.SubnetPerZone(r.Subnets)
	mustReqs := func(rs ...*requirements.Requirement) requirements.Requirements {
		return requirements.NewRequirements(rs...)
	}
	for _, tc := range []struct {
		name    string
		types   []string
		reqs    requirements.Requirements
		wantCap []string
		zones   []string
		exotic  []string
	}{
		// Spot and on-demand alike: the launch applies Karpenter's spot
		// offering filter and picks the capacity type.
		{name: "spot and on-demand", types: []string{"m5.large", "c5.large"}, reqs: mustReqs(), wantCap: []string{"on-demand", "spot"},
			zones: []string{"us-east-1a", "us-east-1b"}},
		{name: "on-demand only", types: []string{"m5.large"}, reqs: mustReqs(requirements.MustNew(karpv1.LabelCapacityType, "In", "on-demand")),
			wantCap: []string{"on-demand"}, zones: []string{"us-east-1a", "us-east-1b"}},
		{name: "spot only", types: []string{"m5.large"}, reqs: mustReqs(requirements.MustNew(karpv1.LabelCapacityType, "In", "spot")),
			wantCap: []string{"spot"}, zones: []string{"us-east-1a", "us-east-1b"}},
		{name: "zone narrowed", types: []string{"m5.large"}, reqs: mustReqs(requirements.MustNew(karpv1.LabelZone, "In", "us-east-1b")),
			wantCap: []string{"on-demand", "spot"}, zones: []string{"us-east-1b"}},
		{name: "zone without subnet", types: []string{"m5.large"}, reqs: mustReqs(requirements.MustNew(karpv1.LabelZone, "In", "us-east-1c"))},
		// Karpenter's exotic instance filter runs at launch; the
		// candidates say which types it takes out.
		{name: "metal marked exotic", types: []string{"m5.large", "m5.metal"}, reqs: mustReqs(requirements.MustNew(karpv1.LabelCapacityType, "In", "on-demand")),
			wantCap: []string{"on-demand"}, zones: []string{"us-east-1a", "us-east-1b"}, exotic: []string{"m5.metal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := candidates(tc.types, cat, tc.reqs, r, subnets)
			if len(tc.wantCap) == 0 {
				if len(got) != 0 {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if len(got) == 0 {
				t.Fatal("no candidates")
			}
			zones, caps := map[string]bool{}, map[string]bool{}
			for i, c := range got {
				caps[c.CapacityType] = true
				if c.Exotic != slices.Contains(tc.exotic, c.InstanceType) {
					t.Fatalf("candidate %+v: exotic %v, want %v", c, c.Exotic, !c.Exotic)
				}
				if i > 0 && got[i-1].Price > c.Price {
					t.Fatalf("candidates not cheapest first: %+v", got)
				}
				zones[c.Zone] = true
			}
			for _, z := range tc.zones {
				if !zones[z] {
					t.Fatalf("zone %s missing from %+v", z, got)
				}
			}
			if len(zones) != len(tc.zones) {
				t.Fatalf("zones %v, want %v", zones, tc.zones)
			}
			if got := slices.Sorted(maps.Keys(caps)); !slices.Equal(got, tc.wantCap) {
				t.Fatalf("capacity types %v, want %v", got, tc.wantCap)
			}
		})
	}
}

// A leader that died between PlanCommit and creating the NodeClaim: the
// next leader recreates the same object from the frozen spec (so drift
// hashes match and nothing is disrupted for being recovered).
func TestRecoveredNodeClaimMatchesTheOriginal(t *testing.T) {
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		PodList:   []*corev1.Pod{pendingPod("a", "1"), pendingPod("b", "2")},
	}
	rig := newTestProvisioner(t, c)
	p, w, state := rig.p, rig.w, rig.state
	if err := p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.created) != 1 {
		t.Fatalf("created %d nodeclaims", len(w.created))
	}
	orig := w.created[0]
	c.ClaimList = nil // the object never reached the API server

	w2 := &fakeWriter{cache: c}
	d := rig.deps
	d.Kube = w2
	p2, err := New(p.cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w2.created) != 1 || len(state.Intents()) != 1 {
		t.Fatalf("new leader created %d nodeclaims, %d intents; want the one recovered object and no new intent", len(w2.created), len(state.Intents()))
	}
	got := w2.created[0]
	if got.Name != orig.Name || !equality.Semantic.DeepEqual(got.Spec, orig.Spec) || !maps.Equal(got.Annotations, orig.Annotations) ||
		!maps.Equal(got.Labels, orig.Labels) {
		t.Fatalf("recovered nodeclaim differs:\n got %+v %v\nwant %+v %v", got.Spec, got.Annotations, orig.Spec, orig.Annotations)
	}
}

// TestMinValuesPolicy: a pool whose minValues nothing can keep leaves the
// pod pending under Strict; under BestEffort the claim is created with
// minValues lowered to what its candidates offer, and says so.
func TestMinValuesPolicy(t *testing.T) {
	for _, policy := range []scheduler.MinValuesPolicy{scheduler.MinValuesStrict, scheduler.MinValuesBestEffort} {
		t.Run(string(policy), func(t *testing.T) {
			families := req(karpv1.LabelInstanceFamily, "In", "m5", "c5", "nosuch1", "nosuch2", "nosuch3")
			families.MinValues = ptr(5) // m5 and c5 are the only ones offered
			c := &fake.Cache{
				PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"), families)},
				ClassList: []*awsv1.EC2NodeClass{class()},
				PodList:   []*corev1.Pod{pendingPod("a", "1")},
			}
			r := newTestProvisioner(t, c)
			r.views.MinValuesPolicy = policy
			if err := r.p.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			if policy == scheduler.MinValuesStrict {
				if len(r.w.created) != 0 {
					t.Fatalf("Strict created %d nodeclaims for an unkeepable minValues", len(r.w.created))
				}
				return
			}
			if len(r.w.created) != 1 {
				t.Fatalf("BestEffort created %d nodeclaims, want 1", len(r.w.created))
			}
			nc := r.w.created[0]
			if nc.Annotations[karpv1.AnnotationMinValuesRelaxed] != "true" {
				t.Errorf("annotations %v: want %s=true", nc.Annotations, karpv1.AnnotationMinValuesRelaxed)
			}
			for _, rq := range nc.Spec.Requirements {
				if rq.Key == karpv1.LabelInstanceFamily && (rq.MinValues == nil || *rq.MinValues != 2) {
					t.Errorf("instance-family minValues %v, want 2 (the families its candidates offer)", rq.MinValues)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestNominatedEvents: Karpenter's Nominated Event tells a pending pod
// where it will go: a new NodeClaim, or an existing managed Node with its
// NodeClaim; once per place, again after it moves.
func TestNominatedEvents(t *testing.T) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Labels: map[string]string{karpv1.LabelArch: "amd64", corev1.LabelOSStable: "linux", corev1.LabelHostname: "ip-10-0-0-1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "general-abcde"}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		NodeList:  []*corev1.Node{node},
		PodList:   []*corev1.Pod{pendingPod("fits", "1"), pendingPod("big", "8")},
	}
	r := newTestProvisioner(t, c)
	rec := record.NewFakeRecorder(100)
	r.p.d.Recorder = rec
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.w.created) != 1 {
		t.Fatalf("%d nodeclaims created, want 1 (for big)", len(r.w.created))
	}
	want := []string{
		"Normal Nominated Pod should schedule on: nodeclaim/general-abcde, node/ip-10-0-0-1",
		"Normal Nominated Pod should schedule on: nodeclaim/" + r.w.created[0].Name,
	}
	if got := observe.Events(rec); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	// fits is still pending (kube-scheduler has not bound it yet): the
	// next pass plans it onto the same node and says nothing again.
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := observe.Events(rec); len(got) != 0 {
		t.Fatalf("events repeated: %q", got)
	}
}

// TestPoolsWithoutTypes: a pool is reported when its requirements and
// offerings exclude every type of its class (Karpenter's filter); types
// excluded for DaemonSet overhead or limits do not make it so.
func TestPoolsWithoutTypes(t *testing.T) {
	a, b := pool("a"), pool("b")
	excl := func(reason string, n int) scheduler.Exclusion { return scheduler.Exclusion{Reason: reason, Count: n} }
	cases := []struct {
		name string
		expl scheduler.PoolExplanation
		want bool
		// minValues: reported as Karpenter's minValues incompatibility.
		minValues bool
	}{
		{"some types left", scheduler.PoolExplanation{NodePool: "a", InstanceTypes: 10, Excluded: []scheduler.Exclusion{excl(scheduler.ExcludedRequirements, 9)}}, false, false},
		{"requirements exclude all", scheduler.PoolExplanation{NodePool: "a", InstanceTypes: 10, Excluded: []scheduler.Exclusion{excl(scheduler.ExcludedRequirements, 10)}}, true, false},
		{"requirements and offerings exclude all", scheduler.PoolExplanation{NodePool: "a", InstanceTypes: 10,
			Excluded: []scheduler.Exclusion{excl(scheduler.ExcludedRequirements, 4), excl(scheduler.ExcludedNoOffering, 6)}}, true, false},
		{"class has no types", scheduler.PoolExplanation{NodePool: "a"}, true, false},
		{"too small and limits do not count", scheduler.PoolExplanation{NodePool: "a", InstanceTypes: 10,
			Excluded: []scheduler.Exclusion{excl(scheduler.ExcludedRequirements, 5), excl(scheduler.ExcludedTooSmall, 3), excl(scheduler.ExcludedLimits, 2)}}, false, false},
		{"pool not in the view", scheduler.PoolExplanation{NodePool: "gone"}, false, false},
		{"types left cannot meet minValues", scheduler.PoolExplanation{NodePool: "a", InstanceTypes: 10, MinValuesUnmet: true}, true, true},
		{"no types at all says so, not minValues", scheduler.PoolExplanation{NodePool: "a", MinValuesUnmet: true}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := poolsWithoutTypes([]*karpv1.NodePool{a, b}, []scheduler.PoolExplanation{tc.expl})
			minValues, reported := got[a]
			if tc.want != reported || len(got) > 1 || minValues != tc.minValues {
				t.Fatalf("got %v, want pool a: %v (minValues %v)", got, tc.want, tc.minValues)
			}
		})
	}
}

// TestNoCompatibleInstanceTypesEvent: a pool whose requirements leave no
// instance type gets Karpenter's NoCompatibleInstanceTypes Warning on a
// provisioning pass, at most once a minute per pool (by UID, or by name
// while it has none).
func TestNoCompatibleInstanceTypesEvent(t *testing.T) {
	none := pool("none", req(corev1.LabelInstanceTypeStable, "In", "no-such-type"))
	none.TypeMeta = metav1.TypeMeta{Kind: "NodePool", APIVersion: "karpenter.sh/v1"} // the fake recorder names the object by it
	unsaved := func(name string) *karpv1.NodePool {
		np := none.DeepCopy()
		np.Name, np.UID = name, ""
		return np
	}
	c := &fake.Cache{PoolList: []*karpv1.NodePool{none, unsaved("unsaved-a"), unsaved("unsaved-b")},
		ClassList: []*awsv1.EC2NodeClass{class()}, PodList: []*corev1.Pod{pendingPod("p", "1")}}
	r := newTestProvisioner(t, c)
	rec := record.NewFakeRecorder(100)
	rec.IncludeObject = true
	r.p.d.Recorder = rec
	clock := now
	r.p.dedupe = events.NewDedupe(func() time.Time { return clock })
	const want = "Warning NoCompatibleInstanceTypes NodePool requirements filtered out all compatible available instance types involvedObject{kind=NodePool,apiVersion=karpenter.sh/v1}"
	noTypes := func() []string {
		var out []string
		for _, e := range observe.Events(rec) {
			if strings.Contains(e, events.NoCompatibleInstanceTypes) {
				out = append(out, e)
			}
		}
		return out
	}
	for i, step := range []struct {
		advance time.Duration
		want    []string
	}{{0, []string{want, want, want}}, {30 * time.Second, nil}, {30 * time.Second, []string{want, want, want}}} {
		clock = clock.Add(step.advance)
		if err := r.p.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := noTypes(); !slices.Equal(got, step.want) {
			t.Fatalf("pass %d: events %q, want %q", i, got, step.want)
		}
	}
}

// A pod no NodePool can take hears why, again every 5 minutes while it
// waits (Karpenter's FailedScheduling dedupe), not on every pass, and at
// once when the reason changes.
func TestFailedSchedulingRepeatsEveryFiveMinutes(t *testing.T) {
	p := pendingPod("big", "1000")
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general")},
		ClassList: []*awsv1.EC2NodeClass{class()},
		PodList:   []*corev1.Pod{p},
	}
	r := newTestProvisionerOn(t, c, &fakeCloud{})
	clock := now
	r.p.cfg.Now = func() time.Time { return clock }
	r.p.dedupe = events.NewDedupe(r.p.cfg.Now)
	rec := r.deps.Recorder.(*record.FakeRecorder)
	told := func() int {
		n := 0
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, "FailedScheduling") {
					n++
				}
			default:
				return n
			}
		}
	}
	for _, step := range []struct {
		after time.Duration
		edit  func()
		want  int
	}{
		{0, nil, 1},
		{time.Minute, nil, 0},
		{4*time.Minute - time.Second, nil, 0},
		{time.Second, nil, 1}, // 5 minutes after the first
		{time.Minute, func() { p.Labels = map[string]string{"app": "big"} }, 0},              // the same reason
		{time.Minute, func() { p.Spec.NodeSelector = map[string]string{"team": "none"} }, 1}, // a new reason
	} {
		clock = clock.Add(step.after)
		if step.edit != nil {
			step.edit()
		}
		if err := r.p.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := told(); got != step.want {
			t.Errorf("at +%s: %d FailedScheduling events, want %d", clock.Sub(now), got, step.want)
		}
	}
}

// Each pass rearms the provisioning triggers (Karpenter's batcher forgets
// its window's pods as the window closes), so a pod still pending after
// the pass triggers the next batch with its next event.
func TestPassRearmsTriggers(t *testing.T) {
	c := &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, ClassList: []*awsv1.EC2NodeClass{class()}}
	r := newTestProvisionerOn(t, c, &fakeCloud{})
	for i := 1; i <= 2; i++ {
		if err := r.p.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.Rearmed != i {
			t.Fatalf("after %d passes the triggers were rearmed %d times", i, c.Rearmed)
		}
	}
}
