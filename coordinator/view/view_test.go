package view

import (
	"slices"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/internal/podutil"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func yes() *bool { b := true; return &b }

func pendingPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: yes()}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

// nodeRunning is the node n1 of the pool general (3 cpu, 10 pods) and the
// pods named names (1 cpu each) running there.
func nodeRunning(names ...string) (*corev1.Node, []*corev1.Pod) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.LabelNodePool: "general"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"),
			corev1.ResourcePods: resource.MustParse("10")}}}
	var pods []*corev1.Pod
	for _, name := range names {
		p := pendingPod(name)
		p.Spec.NodeName, p.Status = "n1", corev1.PodStatus{Phase: corev1.PodRunning}
		pods = append(pods, p)
	}
	return node, pods
}

func pool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: reqs}}}}
}

// classes is one published class, "default", with the embedded catalogue.
func classes() *Catalog {
	c := NewCatalog()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	c.Publish(map[string]*Class{"default": {NodeClass: nc, Hash: "h", InstanceTypes: catalog.InstanceTypes(catalog.Options{}),
		Resolved: cloud.Resolved{AMIs: []cloud.AMI{{ID: "ami-1", Arch: "amd64"}}}}})
	return c
}

// The view is built from fixtures alone (no provider, no API server):
// pending pods, capacity nodes, disruption, in-flight intents.
func TestBuildFromFixtures(t *testing.T) {
	deleting := metav1.NewTime(now)
	bound := pendingPod("bound")
	bound.Spec.NodeName = "n1"
	bound.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	onDisrupted := pendingPod("evictee")
	onDisrupted.Spec.NodeName = "n2"
	onDisrupted.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	dsPod := pendingPod("ds")
	dsPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: yes()}}
	notYet := pendingPod("not-yet")
	notYet.Status.Conditions = nil
	gated := pendingPod("gated")
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}}
	nominated := pendingPod("nominated")
	node := func(name, providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "general"}},
			Spec: corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourcePods: resource.MustParse("10")}}}
	}
	claim2 := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-n2", DeletionTimestamp: &deleting},
		Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-2"}}
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general"), pool("invalid", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelHostname, Operator: karpv1.OpIn, Values: []string{"x"}})},
		PodList:   []*corev1.Pod{pendingPod("p"), bound, onDisrupted, dsPod, notYet, gated, nominated},
		NodeList:  []*corev1.Node{node("n1", "aws:///us-east-1a/i-1"), node("n2", "aws:///us-east-1a/i-2")},
		ClaimList: []*karpv1.NodeClaim{claim2},
	}
	state := fsm.New()
	spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: "general-new",
		Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
	if res := state.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: now,
		Intents: []fsm.NewIntent{{ID: "in1", Spec: spec, Pods: []string{"default/nominated"}}}}), 1); res != nil {
		t.Fatal(res)
	}
	b := &Builder{Cache: c, State: state, Classes: classes()}
	v := b.Build(now)

	var pending []string
	for _, pod := range v.Pending {
		pending = append(pending, pod.Name)
		if pod.Spec.NodeName != "" {
			t.Errorf("pending pod %s keeps node %s", pod.Name, pod.Spec.NodeName)
		}
	}
	if !slices.Equal(pending, []string{"p", "evictee"}) {
		t.Fatalf("pending = %v, want [p evictee] (unschedulable, then pods of the disrupted node)", pending)
	}
	if onDisrupted.Spec.NodeName != "n2" {
		t.Fatal("the cached pod was modified")
	}
	if v.Nominated["default/nominated"] != "in1" {
		t.Fatalf("nominated = %v: a pod held by a pending intent waits for it", v.Nominated)
	}
	var nodes []string
	for _, n := range v.Nodes {
		nodes = append(nodes, n.Name)
	}
	if !slices.Equal(nodes, []string{"n1", "general-new"}) || !v.Disrupting["n2"] {
		t.Fatalf("capacity nodes %v, disrupting %v: a node whose nodeclaim is deleting gives no capacity; the in-flight intent does",
			nodes, v.Disrupting)
	}
	if len(v.DaemonSetPods) != 0 || len(v.NodePools) != 1 || v.NodePoolHashes["general"] == "" || v.NodeClassHashes["default"] != "h" {
		t.Fatalf("view: %d daemonset pods, %d pools, pool hashes %v, class hashes %v", len(v.DaemonSetPods), len(v.NodePools),
			v.NodePoolHashes, v.NodeClassHashes)
	}
	// Building again gives the same view: it reads, never changes, its inputs.
	again := b.Build(now)
	if len(again.Pending) != len(v.Pending) || len(again.Nodes) != len(v.Nodes) {
		t.Fatal("a second build differs")
	}
}

func TestUnpublishedCatalogHasNoClasses(t *testing.T) {
	c := NewCatalog()
	select {
	case <-c.Published():
		t.Fatal("published before Publish")
	default:
	}
	b := &Builder{Cache: &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}}, State: fsm.New(), Classes: c}
	if v := b.Build(now); len(v.NodePools) != 0 {
		t.Fatalf("pools %d without a ready class", len(v.NodePools))
	}
	c.Publish(map[string]*Class{})
	<-c.Published()
}

// A pod nominated to a node that kube-scheduler filled with other pods is
// planned again at once (its nomination is stale); one that still fits
// keeps its room.
func TestStaleNominationIsReleased(t *testing.T) {
	node, pods := nodeRunning("other-1", "other-2") // bound there by kube-scheduler
	fits, late := pendingPod("a-fits"), pendingPod("b-late")
	pods = append(pods, fits, late)
	state := fsm.New()
	spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: "general-1",
		Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
	for i, cmd := range [][]byte{
		fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: now, Intents: []fsm.NewIntent{{ID: "in1", Spec: spec,
			Pods: []string{"default/a-fits", "default/b-late"}}}}),
		fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "in1", Attempt: 1, At: now}),
		fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "in1", Attempt: 1, At: now, Launched: &fsm.Launched{
			InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: now}}),
		fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-1", State: fsm.InstanceReady, NodeName: "n1", At: now}),
	} {
		if res := state.ApplyCommand(cmd, uint64(i+1)); res != nil {
			t.Fatal(res)
		}
	}
	b := &Builder{Cache: &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, PodList: pods, NodeList: []*corev1.Node{node}},
		State: state, Classes: classes()}
	v := b.Build(now) // well inside the nomination grace
	if len(v.Pending) != 1 || v.Pending[0].Name != "b-late" {
		t.Fatalf("pending %v, want [b-late]: the node has room for one of its two nominated pods", names(v.Pending))
	}
	if v.Nominated["default/a-fits"] != "in1" {
		t.Fatalf("a-fits lost its nomination: %v", v.Nominated)
	}
	if n := len(v.Nodes[0].Pods); n != 3 {
		t.Fatalf("node n1 holds %d pods in the view, want 3 (2 bound, 1 nominated)", n)
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestSchedulingTaints: a managed node that is not initialized yet is
// planned on without the taints that are about to go (Karpenter's
// StateNode.Taints); other nodes keep theirs.
func TestSchedulingTaints(t *testing.T) {
	unreg := corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute}
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	own := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{StartupTaints: []corev1.Taint{startup}, Taints: []corev1.Taint{own}}}
	node := func(initialized bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{unreg, notReady, startup, own}}}
		if initialized { // registration came first
			n.Labels[karpv1.LabelRegistered], n.Labels[karpv1.LabelInitialized] = "true", "true"
		}
		return n
	}
	for _, tc := range []struct {
		name        string
		node        *corev1.Node
		nc          *karpv1.NodeClaim
		managed     bool
		wantTaints  int
		wantOwnOnly bool
	}{
		{name: "managed, not initialized: only its own taint", node: node(false), nc: nc, managed: true, wantTaints: 1, wantOwnOnly: true},
		{name: "managed, initialized: every taint", node: node(true), nc: nc, managed: true, wantTaints: 4},
		{name: "not managed: every taint", node: node(false), managed: false, wantTaints: 4},
		{name: "managed without a claim: ephemeral ones go", node: node(false), managed: true, wantTaints: 2},
	} {
		n := tc.node
		got := schedulingTaints(n, tc.nc, tc.managed)
		if len(got) != tc.wantTaints || (tc.wantOwnOnly && got[0].Key != own.Key) {
			t.Errorf("%s: taints %v", tc.name, got)
		}
		if len(n.Spec.Taints) != 4 {
			t.Errorf("%s: the cached node was modified: %v", tc.name, n.Spec.Taints)
		}
	}
}

// TestNominationHeldWhileItsPlanIsInFlight: kube-scheduler bound pods
// planned for a node still booting onto the first node of the plan that
// registered, so a pod planned there no longer fits. It keeps its
// nomination while the other node of the same plan is in flight (the room
// those pods left there is where it fits); a new plan would be a second
// node for nothing.
func TestNominationHeldWhileItsPlanIsInFlight(t *testing.T) {
	node, pods := nodeRunning("planned-for-2a", "planned-for-2b") // swapped onto n1 by kube-scheduler
	fits, late := pendingPod("a-fits"), pendingPod("b-late")
	pods = append(pods, fits, late)
	spec := func(claim string) fsm.LaunchSpec {
		return fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: claim,
			Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
	}
	for _, tc := range []struct {
		name          string
		secondOnNode  bool // the plan's second node registered too
		wantPending   []string
		wantNominated bool
	}{
		{name: "other node of the plan still booting", wantPending: nil, wantNominated: true},
		{name: "every node of the plan registered", secondOnNode: true, wantPending: []string{"b-late"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := fsm.New()
			cmds := [][]byte{
				fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: now, Intents: []fsm.NewIntent{
					{ID: "in1", Spec: spec("general-1"), Pods: []string{"default/a-fits", "default/b-late"}},
					{ID: "in2", Spec: spec("general-2"), Pods: []string{"default/planned-for-2a", "default/planned-for-2b"}}}}),
				fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "in1", Attempt: 1, At: now}),
				fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "in1", Attempt: 1, At: now, Launched: &fsm.Launched{
					InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: now}}),
				fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-1", State: fsm.InstanceReady, NodeName: "n1", At: now}),
			}
			nodes := []*corev1.Node{node}
			if tc.secondOnNode {
				cmds = append(cmds,
					fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "in2", Attempt: 1, At: now}),
					fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "in2", Attempt: 1, At: now, Launched: &fsm.Launched{
						InstanceID: "i-2", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: now}}),
					fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-2", State: fsm.InstanceReady, NodeName: "n2", At: now}))
				n2 := node.DeepCopy()
				n2.Name, n2.Spec.ProviderID = "n2", "aws:///us-east-1a/i-2"
				// n2 is full of other pods: b-late fits nowhere planned.
				for _, name := range []string{"x", "y", "z"} {
					p := pendingPod(name)
					p.Spec.NodeName, p.Status = "n2", corev1.PodStatus{Phase: corev1.PodRunning}
					pods = append(pods, p)
				}
				nodes = append(nodes, n2)
			}
			for i, cmd := range cmds {
				if res := state.ApplyCommand(cmd, uint64(i+1)); res != nil {
					t.Fatal(res)
				}
			}
			b := &Builder{Cache: &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, PodList: pods, NodeList: nodes},
				State: state, Classes: classes()}
			v := b.Build(now)
			if got := names(v.Pending); !slices.Equal(got, tc.wantPending) {
				t.Fatalf("pending %v, want %v", got, tc.wantPending)
			}
			if _, held := v.Nominated["default/b-late"]; held != tc.wantNominated {
				t.Fatalf("b-late nominated %v, want %v (nominations %v)", held, tc.wantNominated, v.Nominated)
			}
			if _, said := v.Released["default/b-late"]; said == tc.wantNominated {
				t.Fatalf("released %v", v.Released)
			}
		})
	}
}

// TestExpiredNominationLeavesTheNode: a pod nominated to a launch whose
// instance has been ready longer than the nomination grace (kube-scheduler
// did not bind it there, e.g. its pod affinity now points at another zone)
// is planned again as a pending pod only. It must not also stand on the
// launched node as a waiting pod: there it would satisfy its own pod
// affinity, the plan would nominate it to that node again and again, and
// kube-scheduler (which counts bound pods only) would never bind it.
func TestExpiredNominationLeavesTheNode(t *testing.T) {
	node, pods := nodeRunning()
	late := pendingPod("cache-late")
	pods = append(pods, late)
	spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: "general-1",
		Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
	for _, tc := range []struct {
		name        string
		readyFor    time.Duration
		wantPending bool
	}{
		{name: "within the grace: waits on the node", readyFor: 10 * time.Second},
		{name: "past the grace: pending only", readyFor: 5 * time.Minute, wantPending: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := fsm.New()
			ready := now.Add(-tc.readyFor)
			for i, cmd := range append([][]byte{
				fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: ready, Intents: []fsm.NewIntent{
					{ID: "in1", Spec: spec, Pods: []string{"default/cache-late"}}}}),
			}, append(fsmtest.LaunchCommands("in1", fsm.Launched{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a",
				CapacityType: "on-demand", LaunchedAt: ready}, ready),
				fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-1", State: fsm.InstanceReady, NodeName: "n1", At: ready}))...) {
				if res := state.ApplyCommand(cmd, uint64(i+1)); res != nil {
					t.Fatal(res)
				}
			}
			b := &Builder{Cache: &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, PodList: pods, NodeList: []*corev1.Node{node}},
				State: state, Classes: classes()}
			v := b.Build(now)
			pending := slices.Contains(names(v.Pending), "cache-late")
			var onNode bool
			for _, n := range v.Nodes {
				for _, p := range n.Pods {
					onNode = onNode || (n.Name == "n1" && p.Name == "cache-late")
				}
			}
			if pending != tc.wantPending || onNode == tc.wantPending {
				t.Fatalf("cache-late pending %v, waiting on n1 %v; want pending %v and on the node %v", pending, onNode, tc.wantPending, !tc.wantPending)
			}
		})
	}
}

// TestOfferingPrice: a node's labels name one offering of one instance type.
func TestOfferingPrice(t *testing.T) {
	types := []*catalog.InstanceType{
		{Name: "m5.large", Offerings: []catalog.Offering{
			{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096},
			{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04},
		}},
		{Name: "c5.large", Offerings: []catalog.Offering{{Zone: "us-east-1b", CapacityType: karpv1.CapacityTypeSpot, Price: 0.03}}},
	}
	labels := func(typ, zone, ct string) map[string]string {
		return map[string]string{karpv1.LabelInstanceType: typ, karpv1.LabelZone: zone, karpv1.LabelCapacityType: ct}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		price  float64
		ok     bool
	}{
		{"on-demand offering", labels("m5.large", "us-east-1a", karpv1.CapacityTypeOnDemand), 0.096, true},
		{"spot offering of the same type", labels("m5.large", "us-east-1a", karpv1.CapacityTypeSpot), 0.04, true},
		{"another type", labels("c5.large", "us-east-1b", karpv1.CapacityTypeSpot), 0.03, true},
		{"no offering in that zone", labels("m5.large", "us-east-1b", karpv1.CapacityTypeOnDemand), 0, false},
		{"unknown type", labels("t3.nano", "us-east-1a", karpv1.CapacityTypeOnDemand), 0, false},
		{"no labels", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if price, ok := OfferingPrice(types, tc.labels); price != tc.price || ok != tc.ok {
				t.Errorf("OfferingPrice = %v, %v; want %v, %v", price, ok, tc.price, tc.ok)
			}
		})
	}
}

// The pods of a node being taken away that need capacity elsewhere:
// Karpenter's IsCurrentlyReschedulable, with a controller.
func TestReschedulable(t *testing.T) {
	zero := intstr.FromInt32(0)
	pdbs, err := podutil.NewPDBs([]*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frozen"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	deleting := metav1.NewTime(now)
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}{
		{"running, with a controller", func(*corev1.Pod) {}, true},
		{"bare pod (nothing recreates it)", func(p *corev1.Pod) { p.OwnerReferences = nil }, false},
		{"do-not-disrupt keeps it there", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"} }, false},
		{"a fully blocking PDB keeps it there", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "frozen"} }, false},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }, false},
		{"terminating StatefulSet pod (its successor needs the room)", func(p *corev1.Pod) {
			p.DeletionTimestamp = &deleting
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: yes()}}
		}, true},
		{"a DaemonSet's", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: yes()}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pendingPod("p")
			p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
			tc.edit(p)
			if got := Reschedulable(p, now, pdbs); got != tc.want {
				t.Errorf("Reschedulable = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestNominationUsedUpOnceBound: kube-scheduler bound "swapped", planned
// for n2 at scale-out, onto n1. That old nomination reserves no room on
// n2, and when n1 is disrupted it does not hold the pod either: the pod
// needs capacity until a replacement planned since the disruption holds
// it (which then keeps its room on the replacement once it registers).
func TestNominationUsedUpOnceBound(t *testing.T) {
	spec := func(claim string) fsm.LaunchSpec {
		return fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: claim,
			Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
	}
	scaleOut, disrupted := now.Add(-10*time.Minute), now.Add(-5*time.Second)
	launch := func(intent, instance, node string, at time.Time) [][]byte {
		return append(fsmtest.LaunchCommands(intent, fsm.Launched{InstanceID: instance, InstanceType: "m5.large", Zone: "us-east-1a",
			CapacityType: "on-demand", LaunchedAt: at}, at),
			fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: instance, State: fsm.InstanceReady, NodeName: node, At: at}))
	}
	for _, tc := range []struct {
		name string
		// disrupt: n1's termination is decided; started: the disruption
		// went on to taint n1 (after launching its replacements, if any);
		// replaced: a replacement (n3's intent) then nominates the pod;
		// registered: n3 joined.
		disrupt, started, replaced, registered bool
		evicted                                bool // the pod terminates (its ReplicaSet makes a new one)
		// taintOnly: n1 is disrupted by the karpenter.sh/disrupted taint
		// alone (no termination, no deletion); the pod was bound a
		// minute after the scale-out.
		taintOnly bool
		// userDeleted: n1's NodeClaim was deleted before the termination
		// was committed, and the replacement planned in between.
		userDeleted   bool
		wantPending   bool
		wantNominated string
		wantOn        string // the view node holding the pod, "" for none
	}{
		{name: "n1 stays: the pod is placed, n2 keeps no room for it", wantOn: "n1"},
		{name: "n1 disrupted: the pod needs capacity", disrupt: true, started: true, wantPending: true},
		// The disruption controller's replacements are still to be
		// launched: the provisioner must not launch for the pod too
		// (Karpenter marks for deletion after launching replacements).
		{name: "n1's termination decided, its replacement not launched yet: the pod waits", disrupt: true},
		{name: "a replacement in flight holds it", disrupt: true, replaced: true, wantNominated: "in3", wantOn: "general-3"},
		{name: "the registered replacement keeps its room", disrupt: true, replaced: true, registered: true,
			wantNominated: "in3", wantOn: "n3"},
		{name: "but none for the pod once evicted: its new pod needs the room", disrupt: true, replaced: true, registered: true,
			evicted: true},
		{name: "nor in flight", disrupt: true, replaced: true, evicted: true},
		{name: "tainted only: the scale-out nomination is still used up", taintOnly: true, wantPending: true},
		{name: "tainted only: a replacement planned since the pod was bound holds it", taintOnly: true, replaced: true,
			wantNominated: "in3", wantOn: "general-3"},
		{name: "a replacement planned between the user's deletion and the termination holds it", userDeleted: true,
			disrupt: true, replaced: true, wantNominated: "in3", wantOn: "general-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1, pods := nodeRunning("swapped")
			if tc.evicted {
				pods[0].DeletionTimestamp = &metav1.Time{Time: now}
			}
			pods[0].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(scaleOut.Add(time.Minute))}}
			var claims []*karpv1.NodeClaim
			if tc.userDeleted {
				claims = append(claims, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-1",
					DeletionTimestamp: &metav1.Time{Time: disrupted.Add(-10 * time.Second)}},
					Status: karpv1.NodeClaimStatus{ProviderID: n1.Spec.ProviderID, NodeName: "n1"}})
			}
			n2 := n1.DeepCopy()
			n2.Name, n2.Spec.ProviderID = "n2", "aws:///us-east-1a/i-2"
			nodes := []*corev1.Node{n1, n2}
			if tc.taintOnly || tc.started {
				n1.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}}
			}
			cmds := [][]byte{fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: scaleOut, Intents: []fsm.NewIntent{
				{ID: "in1", Spec: spec("general-1")}, {ID: "in2", Spec: spec("general-2"), Pods: []string{"default/swapped"}}}})}
			cmds = append(cmds, launch("in1", "i-1", "n1", scaleOut)...)
			cmds = append(cmds, launch("in2", "i-2", "n2", scaleOut)...)
			if tc.disrupt {
				cmds = append(cmds, fsm.MustEncode(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "t1", InstanceID: "i-1",
					Reason: "SingleNodeConsolidation", At: disrupted}))
			}
			if tc.replaced {
				planned := disrupted.Add(time.Second)
				if tc.userDeleted {
					planned = disrupted.Add(-5 * time.Second) // after the deletion, before the termination
				}
				cmds = append(cmds, fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: planned, Intents: []fsm.NewIntent{
					{ID: "in3", Spec: spec("general-3"), Pods: []string{"default/swapped"}}}}))
			}
			if tc.registered {
				cmds = append(cmds, launch("in3", "i-3", "n3", disrupted.Add(2*time.Second))...)
				n3 := n1.DeepCopy()
				n3.Name, n3.Spec.ProviderID = "n3", "aws:///us-east-1a/i-3"
				nodes = append(nodes, n3)
			}
			state := fsm.New()
			for i, cmd := range cmds {
				if res := state.ApplyCommand(cmd, uint64(i+1)); res != nil {
					t.Fatal(res)
				}
			}
			b := &Builder{Cache: &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, PodList: pods, NodeList: nodes, ClaimList: claims},
				State: state, Classes: classes()}
			v := b.Build(now)
			if pending := slices.Contains(names(v.Pending), "swapped"); pending != tc.wantPending {
				t.Errorf("swapped pending %v, want %v", pending, tc.wantPending)
			}
			if got := v.Nominated["default/swapped"]; got != tc.wantNominated {
				t.Errorf("swapped nominated to %q, want %q", got, tc.wantNominated)
			}
			var on []string
			for _, n := range v.Nodes {
				if slices.ContainsFunc(n.Pods, func(p *corev1.Pod) bool { return p.Name == "swapped" }) {
					on = append(on, n.Name)
				}
			}
			if want := []string{tc.wantOn}; tc.wantOn == "" && len(on) > 0 || tc.wantOn != "" && !slices.Equal(on, want) {
				t.Errorf("swapped stands on %v in the view, want %q", on, tc.wantOn)
			}
		})
	}
}
