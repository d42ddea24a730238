package lifecycle

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

const startupKey = "example.com/cni-not-ready"

func claim(mods ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", UID: "uid-1", CreationTimestamp: metav1.NewTime(t0),
			Labels:      map[string]string{karpv1.LabelNodePool: "default", "team": "a"},
			Annotations: map[string]string{karpv1.AnnotationLaunchID: "intent1"}},
		Spec: karpv1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: startupKey, Effect: corev1.TaintEffectNoSchedule}},
			NodeClassRef:  &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
	for _, m := range mods {
		m(nc)
	}
	return nc
}

func withCond(t string, s metav1.ConditionStatus, at time.Time) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "x", LastTransitionTime: metav1.NewTime(at)})
	}
}

func launchedClaim(at time.Time) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) {
		nc.Status.ProviderID = "aws:///us-east-1a/i-1"
		withCond(karpv1.ConditionLaunched, metav1.ConditionTrue, at)(nc)
	}
}

func node(mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Labels: map[string]string{"kubernetes.io/hostname": "ip-10-0-0-1"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1",
			Taints: []corev1.Taint{{Key: startupKey, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func noTaints(n *corev1.Node) { n.Spec.Taints = nil }

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func intent(state fsm.IntentState) fsm.LaunchIntent {
	in := fsm.LaunchIntent{ID: "intent1", State: state, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-abcde", Candidates: []cloud.Candidate{
		{InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: "spot", ImageID: "ami-b"},
		{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", ImageID: "ami-a"},
	}}}}
	if state == fsm.IntentLaunched {
		in.InstanceID = "i-1"
	}
	if state == fsm.IntentFailed {
		in.LastError = "invalid launch request: bad image"
	}
	return in
}

func instance(state fsm.InstanceState) fsm.Instance {
	return fsm.Instance{ID: "i-1", IntentID: "intent1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot",
		State: state, LaunchedAt: t0.Add(time.Minute)}
}

func TestDecide(t *testing.T) {
	timeouts := Timeouts{Launch: 5 * time.Minute, Registration: 15 * time.Minute}
	gpuClaim := func(nc *karpv1.NodeClaim) {
		nc.Spec.StartupTaints = nil
		nc.Spec.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("2")}
	}
	registered := withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0.Add(2*time.Minute))
	runDecideCases(t, timeouts, []decideCase{
		{name: "unknown intent is an orphan", claim: claim(), now: t0, want: DeleteOrphan, wantMatch: "does not exist"},
		{name: "cancelled intent is an orphan", claim: claim(), intent: ptr(intent(fsm.IntentCancelled)), now: t0, want: DeleteOrphan},
		{name: "pending intent waits", claim: claim(), intent: ptr(intent(fsm.IntentPending)), now: t0.Add(4 * time.Minute), want: None},
		{name: "launching intent waits", claim: claim(), intent: ptr(intent(fsm.IntentLaunching)), now: t0.Add(5 * time.Minute), want: None},
		{name: "pending past the launch timeout", claim: claim(), intent: ptr(intent(fsm.IntentPending)), now: t0.Add(5*time.Minute + time.Second),
			want: DeleteLaunchTimeout, wantMatch: "not launched 5m1s"},
		{name: "launching past the launch timeout", claim: claim(), intent: ptr(intent(fsm.IntentLaunching)), now: t0.Add(time.Hour), want: DeleteLaunchTimeout},
		{name: "failed intent", claim: claim(), intent: ptr(intent(fsm.IntentFailed)), now: t0, want: LaunchFailed, wantMatch: "bad image"},
		{name: "launched intent", claim: claim(), intent: ptr(intent(fsm.IntentLaunched)), inst: ptr(instance(fsm.InstanceLaunched)), now: t0.Add(time.Hour), want: Launch},
		{name: "launched intent, instance lost before launch written", claim: claim(), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceLost)), now: t0, want: DeleteInstanceGone},
		{name: "launched, no node yet", claim: claim(launchedClaim(t0.Add(time.Minute))), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceLaunched)), now: t0.Add(16 * time.Minute), want: None},
		{name: "launched, registration timeout", claim: claim(launchedClaim(t0.Add(time.Minute))), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceLaunched)), now: t0.Add(16*time.Minute + time.Second), want: DeleteRegistrationTimeout},
		{name: "registration timeout from the Registered condition (Karpenter's)", claim: claim(launchedClaim(t0.Add(4*time.Minute)),
			withCond(karpv1.ConditionRegistered, metav1.ConditionUnknown, t0)), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceLaunched)), now: t0.Add(15*time.Minute + time.Second), want: DeleteRegistrationTimeout, wantMatch: "after creation"},
		{name: "launched, node joined", claim: claim(launchedClaim(t0.Add(time.Minute))), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceLaunched)), node: node(notReady), now: t0.Add(time.Hour), want: Register},
		{name: "launched, instance terminated", claim: claim(launchedClaim(t0)), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceTerminated)), node: node(), now: t0, want: DeleteInstanceGone},
		{name: "registered, node not ready", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(notReady), remove: true, now: t0, want: None, wantMatch: "Node status is NotReady"},
		{name: "registered, startup taint left (Karpenter waits)", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(), now: t0, want: None, wantMatch: `StartupTaint "` + startupKey + `:NoSchedule" still exists`},
		{name: "registered, startup taint left (sim removes)", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(), remove: true, now: t0, want: RemoveStartupTaints},
		{name: "registered, ephemeral taint left", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
			}), remove: true, now: t0, want: None, wantMatch: "not-ready"},
		{name: "registered, a Node Readiness Controller taint left", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "readiness.k8s.io/network-ready", Effect: corev1.TaintEffectNoSchedule}}
			}), remove: true, now: t0, want: None, wantMatch: `KnownEphemeralTaint "readiness.k8s.io/network-ready:NoSchedule" still exists`},
		{name: "registered, not-ready taint of another effect than Karpenter's is not ephemeral", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
			}), remove: true, now: t0, want: Initialize},
		// The kubelet's cpu is registered (Karpenter checks every requested
		// resource), the device plugin's gpu not yet.
		{name: "registered, gpu not registered", claim: claim(launchedClaim(t0), registered, gpuClaim), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(noTaints, func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			}), now: t0, want: None, wantMatch: "nvidia.com/gpu"},
		{name: "registered, gpu registered", claim: claim(launchedClaim(t0), registered, gpuClaim), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(noTaints, func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("2")}
			}), now: t0, want: Initialize},
		{name: "registered, an earlier Joiner's CSI attach count requested (never registered)", claim: claim(launchedClaim(t0), registered, func(nc *karpv1.NodeClaim) {
			nc.Spec.StartupTaints = nil
			nc.Spec.Resources.Requests = corev1.ResourceList{"attachable-volumes-csi-ebs.csi.aws.com": resource.MustParse("2")}
		}), intent: ptr(intent(fsm.IntentLaunched)), inst: ptr(instance(fsm.InstanceRegistered)), node: node(noTaints), now: t0, want: Initialize},
		{name: "registered, usable", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), node: node(noTaints), now: t0, want: Initialize},
		{name: "initialized is done", claim: claim(launchedClaim(t0), registered, withCond(karpv1.ConditionInitialized, metav1.ConditionTrue, t0)),
			intent: ptr(intent(fsm.IntentLaunched)), inst: ptr(instance(fsm.InstanceReady)), node: node(noTaints), now: t0.Add(time.Hour), want: None},
		{name: "registered, node gone", claim: claim(launchedClaim(t0), registered), intent: ptr(intent(fsm.IntentLaunched)),
			inst: ptr(instance(fsm.InstanceRegistered)), now: t0.Add(time.Hour), want: None},
	})
}

// decideCase is one row of a Decide table: a claim and what the
// lifecycle knows of it (intent, instance, node) at now, and the action
// Decide must choose, with a reason mentioning wantMatch when that is set.
type decideCase struct {
	name      string
	claim     *karpv1.NodeClaim
	intent    *fsm.LaunchIntent
	inst      *fsm.Instance
	node      *corev1.Node
	remove    bool      // RemoveStartupTaints
	to        *Timeouts // instead of the table's, when set
	now       time.Time
	want      Action
	wantMatch string
}

// runDecideCases runs Decide on each case with timeouts to (unless the
// case has its own).
func runDecideCases(t *testing.T, to Timeouts, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Claim: tc.claim, Node: tc.node, RemoveStartupTaints: tc.remove, Now: tc.now, Timeouts: to}
			if tc.to != nil {
				in.Timeouts = *tc.to
			}
			if tc.intent != nil {
				in.Intent, in.HasIntent = *tc.intent, true
			}
			if tc.inst != nil {
				in.Instance, in.HasInstance = *tc.inst, true
			}
			got, why := Decide(in)
			if got != tc.want {
				t.Fatalf("Decide = %s (%s), want %s", got, why, tc.want)
			}
			if tc.wantMatch != "" && !strings.Contains(why, tc.wantMatch) {
				t.Fatalf("reason %q does not mention %q", why, tc.wantMatch)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestApplyLaunch(t *testing.T) {
	it := &catalog.InstanceType{Name: "m5.large",
		Labels:   map[string]string{karpv1.LabelInstanceType: "m5.large", karpv1.LabelArch: "amd64", "karpenter.k8s.aws/instance-cpu": "2"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7Gi")},
		Overhead: catalog.Overhead{KubeReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("70m")}}}
	nc := claim()
	meta, status := ApplyLaunch(nc, intent(fsm.IntentLaunched), instance(fsm.InstanceLaunched), it, t0)
	if !meta || !status {
		t.Fatalf("first ApplyLaunch changed meta=%v status=%v, want both", meta, status)
	}
	for k, v := range map[string]string{karpv1.LabelInstanceType: "m5.large", karpv1.LabelZone: "us-east-1a", karpv1.LabelCapacityType: "spot",
		karpv1.LabelArch: "amd64", "karpenter.k8s.aws/instance-cpu": "2", "team": "a", karpv1.LabelNodePool: "default"} {
		if nc.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, nc.Labels[k], v)
		}
	}
	if nc.Status.ProviderID != "aws:///us-east-1a/i-1" || nc.Status.ImageID != "ami-a" {
		t.Errorf("providerID %q imageID %q", nc.Status.ProviderID, nc.Status.ImageID)
	}
	if q := nc.Status.Allocatable[corev1.ResourceCPU]; q.MilliValue() != 1930 {
		t.Errorf("allocatable cpu %s, want 1930m", q.String())
	}
	if q := nc.Status.Capacity[corev1.ResourceMemory]; q.Cmp(resource.MustParse("7Gi")) != 0 {
		t.Errorf("capacity memory %s", q.String())
	}
	if c := condition(nc.Status.Conditions, karpv1.ConditionLaunched); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Launched = %+v", c)
	}
	if c := condition(nc.Status.Conditions, karpv1.ConditionReady); c == nil || c.Status != metav1.ConditionUnknown {
		t.Fatalf("Ready = %+v, want Unknown", c)
	}
	// Idempotent: the same launch again changes nothing, even later.
	before := nc.DeepCopy()
	meta, status = ApplyLaunch(nc, intent(fsm.IntentLaunched), instance(fsm.InstanceLaunched), it, t0.Add(time.Hour))
	if meta || status {
		t.Fatalf("second ApplyLaunch changed meta=%v status=%v", meta, status)
	}
	if c := condition(nc.Status.Conditions, karpv1.ConditionLaunched); !c.LastTransitionTime.Equal(&before.Status.Conditions[0].LastTransitionTime) {
		t.Fatalf("transition time moved")
	}
	// Unknown type: labels from the instance, no capacity.
	nc2 := claim()
	ApplyLaunch(nc2, intent(fsm.IntentLaunched), instance(fsm.InstanceLaunched), nil, t0)
	if nc2.Labels[karpv1.LabelInstanceType] != "m5.large" || nc2.Status.Capacity != nil {
		t.Fatalf("without a type: labels %v capacity %v", nc2.Labels, nc2.Status.Capacity)
	}
}

func TestConditionsLifecycle(t *testing.T) {
	nc := claim()
	if !ApplyLaunchFailed(nc, "boom", t0) {
		t.Fatal("ApplyLaunchFailed changed nothing")
	}
	// Karpenter retries a failed launch: Launched stays Unknown.
	if c := condition(nc.Status.Conditions, karpv1.ConditionLaunched); c.Status != metav1.ConditionUnknown || c.Reason != ReasonLaunchFailed || c.Message != "boom" {
		t.Fatalf("Launched after failure = %+v, want Unknown, LaunchFailed, boom", c)
	}
	if c := condition(nc.Status.Conditions, karpv1.ConditionReady); c.Status != metav1.ConditionUnknown || c.Reason != ReasonReconcilingDependents {
		t.Fatalf("Ready after failure = %+v, want Unknown, ReconcilingDependents", c)
	}
	if ApplyLaunchFailed(nc, "boom", t0.Add(time.Minute)) {
		t.Fatal("second ApplyLaunchFailed changed the status")
	}

	nc = claim()
	ApplyLaunch(nc, intent(fsm.IntentLaunched), instance(fsm.InstanceLaunched), nil, t0)
	if !ApplyRegistered(nc, "ip-10-0-0-1", t0.Add(time.Minute)) || nc.Status.NodeName != "ip-10-0-0-1" {
		t.Fatalf("ApplyRegistered: nodeName %q", nc.Status.NodeName)
	}
	if ApplyRegistered(nc, "ip-10-0-0-1", t0.Add(2*time.Minute)) {
		t.Fatal("second ApplyRegistered changed the status")
	}
	if !ApplyInitialized(nc, t0.Add(3*time.Minute)) {
		t.Fatal("ApplyInitialized changed nothing")
	}
	c := condition(nc.Status.Conditions, karpv1.ConditionReady)
	if c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("Ready = %+v, want True since initialization", c)
	}
	if ApplyInitialized(nc, t0.Add(time.Hour)) {
		t.Fatal("second ApplyInitialized changed the status")
	}
}

// TestConditionsAsKarpenter follows one NodeClaim through its lifecycle and
// checks its whole condition list at each step against what Karpenter
// v1.14.1 stores (its lifecycle controller's reasons and messages, written
// through operatorpkg's ConditionSet: absent conditions start Unknown at
// creation, Ready derived from Launched, Registered and Initialized, the
// list sorted by transition time with Ready last).
func TestConditionsAsKarpenter(t *testing.T) {
	created := t0.Add(-time.Minute)
	nc := claim(func(nc *karpv1.NodeClaim) { nc.CreationTimestamp = metav1.NewTime(created); nc.Generation = 1 })
	type cond struct {
		typ, status, reason, message string
		at                           time.Time
	}
	unknown := string(metav1.ConditionUnknown)
	awaiting := func(typ string) cond {
		return cond{typ, unknown, ReasonAwaitingReconciliation, "object is awaiting reconciliation", created}
	}
	notFound := cond{karpv1.ConditionRegistered, unknown, ReasonNodeNotFound, "Node not registered with cluster", created}
	ready := func(status, reason, message string, at time.Time) cond {
		return cond{karpv1.ConditionReady, status, reason, message, at}
	}
	for _, step := range []struct {
		name  string
		apply func() bool
		want  []cond
	}{
		{"created, waiting for its launch", func() bool { return ApplyWaiting(nc, nil, t0) }, []cond{
			awaiting(karpv1.ConditionLaunched), notFound, awaiting(karpv1.ConditionInitialized),
			ready(unknown, ReasonReconcilingDependents, "Launched=Unknown, Registered=Unknown, Initialized=Unknown", created)}},
		{"launch failed once", func() bool { return ApplyLaunchFailed(nc, "capacity", t0) }, []cond{
			{karpv1.ConditionLaunched, unknown, ReasonLaunchFailed, "capacity", created}, notFound, awaiting(karpv1.ConditionInitialized),
			ready(unknown, ReasonReconcilingDependents, "Launched=Unknown, Registered=Unknown, Initialized=Unknown", created)}},
		{"launched", func() bool {
			_, status := ApplyLaunch(nc, intent(fsm.IntentLaunched), instance(fsm.InstanceLaunched), nil, t0.Add(time.Minute))
			return ApplyWaiting(nc, nil, t0.Add(time.Minute)) || status
		}, []cond{
			notFound, awaiting(karpv1.ConditionInitialized), {karpv1.ConditionLaunched, "True", ReasonLaunched, "", t0.Add(time.Minute)},
			ready(unknown, ReasonReconcilingDependents, "Registered=Unknown, Initialized=Unknown", created)}},
		{"registered, node not ready", func() bool {
			changed := ApplyRegistered(nc, "ip-10-0-0-1", t0.Add(2*time.Minute))
			return ApplyWaiting(nc, node(notReady), t0.Add(2*time.Minute)) || changed
		}, []cond{
			{karpv1.ConditionInitialized, unknown, ReasonNodeNotReady, "Node status is NotReady", created},
			{karpv1.ConditionLaunched, "True", ReasonLaunched, "", t0.Add(time.Minute)},
			{karpv1.ConditionRegistered, "True", ReasonRegistered, "", t0.Add(2 * time.Minute)},
			ready(unknown, ReasonReconcilingDependents, "Initialized=Unknown", created)}},
		{"startup taint left", func() bool { return ApplyWaiting(nc, node(), t0.Add(3*time.Minute)) }, []cond{
			{karpv1.ConditionInitialized, unknown, ReasonStartupTaintsExist, `StartupTaint "` + startupKey + `:NoSchedule" still exists`, created},
			{karpv1.ConditionLaunched, "True", ReasonLaunched, "", t0.Add(time.Minute)},
			{karpv1.ConditionRegistered, "True", ReasonRegistered, "", t0.Add(2 * time.Minute)},
			ready(unknown, ReasonReconcilingDependents, "Initialized=Unknown", created)}},
		{"initialized", func() bool { return ApplyInitialized(nc, t0.Add(4*time.Minute)) }, []cond{
			{karpv1.ConditionLaunched, "True", ReasonLaunched, "", t0.Add(time.Minute)},
			{karpv1.ConditionRegistered, "True", ReasonRegistered, "", t0.Add(2 * time.Minute)},
			{karpv1.ConditionInitialized, "True", ReasonInitialized, "", t0.Add(4 * time.Minute)},
			ready("True", ReasonReady, "", t0.Add(4*time.Minute))}},
		{"nothing left to wait for", func() bool { return ApplyWaiting(nc, nil, t0.Add(time.Hour)) }, nil},
	} {
		before := slices.Clone(nc.Status.Conditions)
		changed := step.apply()
		if step.want == nil {
			if changed || !slices.Equal(before, nc.Status.Conditions) {
				t.Fatalf("%s: changed %v: %+v", step.name, changed, nc.Status.Conditions)
			}
			continue
		}
		if !changed {
			t.Errorf("%s: reported no change", step.name)
		}
		var got []cond
		for _, c := range nc.Status.Conditions {
			if c.ObservedGeneration != 1 {
				t.Errorf("%s: %s observedGeneration %d, want 1", step.name, c.Type, c.ObservedGeneration)
			}
			got = append(got, cond{c.Type, string(c.Status), c.Reason, c.Message, c.LastTransitionTime.Time})
		}
		if !slices.Equal(got, step.want) {
			t.Fatalf("%s:\n got  %+v\n want %+v", step.name, got, step.want)
		}
		if step.apply() {
			t.Errorf("%s: applying again changed the conditions", step.name)
		}
	}
}

// TestReadyFalseOnAFalseDependent: Ready is False (UnhealthyDependents) when
// a dependent of the current generation is False (an adopted claim
// Karpenter marked Registered=False, MultipleNodesFound).
func TestReadyFalseOnAFalseDependent(t *testing.T) {
	nc := claim(launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionFalse, t0.Add(time.Minute)))
	ApplyWaiting(nc, nil, t0.Add(2*time.Minute))
	c := condition(nc.Status.Conditions, karpv1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonUnhealthyDependents || c.Message != "Registered=False, Initialized=Unknown" {
		t.Fatalf("Ready = %+v, want False, UnhealthyDependents, Registered=False, Initialized=Unknown", c)
	}
}

func TestSyncNode(t *testing.T) {
	nc := claim(func(nc *karpv1.NodeClaim) { nc.Annotations["example.com/a"] = "b" })
	n := node(func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute})
	})
	if !SyncNode(nc, n) {
		t.Fatal("SyncNode changed nothing")
	}
	for k, v := range map[string]string{karpv1.LabelNodePool: "default", "team": "a", karpv1.LabelRegistered: "true", "kubernetes.io/hostname": "ip-10-0-0-1"} {
		if n.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations["example.com/a"] != "b" || n.Annotations[karpv1.AnnotationLaunchID] != "intent1" {
		t.Errorf("node annotations %v", n.Annotations)
	}
	var keys []string
	for _, tt := range n.Spec.Taints {
		keys = append(keys, tt.Key)
	}
	if got := strings.Join(keys, ","); got != startupKey+",dedicated" {
		t.Errorf("node taints %s, want the startup taint once, the claim taint, no unregistered", got)
	}
	if len(n.Finalizers) != 1 || n.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Errorf("finalizers %v", n.Finalizers)
	}
	if len(n.OwnerReferences) != 1 || n.OwnerReferences[0].Kind != "NodeClaim" || n.OwnerReferences[0].Name != nc.Name || n.OwnerReferences[0].UID != nc.UID {
		t.Errorf("owner references %+v", n.OwnerReferences)
	}
	if SyncNode(nc, n) {
		t.Fatal("second SyncNode changed the node")
	}

	// do-not-sync-taints: labels and finalizer yes, taints no.
	n2 := node(noTaints, func(n *corev1.Node) { n.Labels[karpv1.LabelDoNotSync] = "true" })
	SyncNode(nc, n2)
	if len(n2.Spec.Taints) != 0 {
		t.Errorf("taints synced despite %s: %v", karpv1.LabelDoNotSync, n2.Spec.Taints)
	}
}

func TestStripStartupTaints(t *testing.T) {
	nc := claim()
	n := node(func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule})
	})
	if !StripStartupTaints(nc, n) {
		t.Fatal("nothing stripped")
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Fatalf("taints %v, want only the claim taint", n.Spec.Taints)
	}
	if StripStartupTaints(nc, n) {
		t.Fatal("second strip changed the node")
	}
	if ok, why := Initialized(nc, n); !ok {
		t.Fatalf("not initialized after strip: %s", why)
	}
}

func TestDecideGC(t *testing.T) {
	grace := time.Minute
	launched := t0 // instance(...) launched at t0+1m
	for _, tc := range []struct {
		name        string
		state       fsm.InstanceState
		cloud       CloudState
		terminating bool
		now         time.Time
		want        GCVerdict
	}{
		{"running", fsm.InstanceReady, CloudRunning, false, launched.Add(time.Hour), Keep},
		{"terminated in the cloud", fsm.InstanceReady, CloudTerminated, false, launched.Add(time.Hour), Lost},
		{"terminated after a termination intent", fsm.InstanceTerminating, CloudTerminated, true, launched.Add(time.Hour), Terminated},
		{"not found, young", fsm.InstanceLaunched, CloudNotFound, false, launched.Add(time.Minute + 30*time.Second), Keep},
		{"not found, past grace", fsm.InstanceLaunched, CloudNotFound, false, launched.Add(2*time.Minute + time.Second), Lost},
		{"already lost", fsm.InstanceLost, CloudNotFound, false, launched.Add(time.Hour), Keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideGC(instance(tc.state), tc.cloud, tc.terminating, tc.now, grace); got != tc.want {
				t.Fatalf("DecideGC = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestDecideAdopted: NodeClaims Karpenter launched before the switch (no
// launch-id annotation) are taken over: registered, initialized and timed
// out like Joiner's own, never deleted as orphans.
func TestDecideAdopted(t *testing.T) {
	adopted := func(nc *karpv1.NodeClaim) { nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: "1"} }
	to := Timeouts{Launch: 5 * time.Minute, Registration: 15 * time.Minute}
	for _, tc := range []struct {
		name string
		in   Inputs
		want Action
	}{
		{"not launched yet", Inputs{Claim: claim(adopted), Now: t0.Add(time.Minute), Timeouts: to}, None},
		{"never launched", Inputs{Claim: claim(adopted), Now: t0.Add(6 * time.Minute), Timeouts: to}, DeleteLaunchTimeout},
		{"launched, node joins", Inputs{Claim: claim(adopted, launchedClaim(t0)), Node: node(), Now: t0.Add(time.Minute), Timeouts: to}, Register},
		{"launched, no node for too long", Inputs{Claim: claim(adopted, launchedClaim(t0)), Now: t0.Add(16 * time.Minute), Timeouts: to}, DeleteRegistrationTimeout},
		{"initialized", Inputs{Claim: claim(adopted, launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0),
			withCond(karpv1.ConditionInitialized, metav1.ConditionTrue, t0)), Node: node(), Now: t0.Add(time.Hour), Timeouts: to}, None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := Decide(tc.in); got != tc.want {
				t.Fatalf("Decide = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// Karpenter's registration check: a node that joins without the
// unregistered taint (and is not registered yet) is reported.
func TestMissingUnregisteredTaint(t *testing.T) {
	unreg := corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
		want   bool
	}{
		{"joined with the taint", nil, []corev1.Taint{unreg}, false},
		{"joined without it", nil, nil, true},
		{"the taint with another effect", nil, []corev1.Taint{{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoSchedule}}, true},
		{"registered already (the taint was removed then)", map[string]string{karpv1.LabelRegistered: "true"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}, Spec: corev1.NodeSpec{Taints: tc.taints}}
			if got := MissingUnregisteredTaint(n); got != tc.want {
				t.Errorf("MissingUnregisteredTaint = %t, want %t", got, tc.want)
			}
		})
	}
}

// The registrations and timeouts of a pool's NodeClaims feed its
// NodeRegistrationHealthy (Karpenter's registration and liveness): only
// claims the pool owns count; a claim that never launched names its
// Launched condition's reason.
func TestRecordHealth(t *testing.T) {
	owned := func(reason string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{karpv1.LabelNodePool: "default"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", Name: "default", UID: "uid-default"}}}}
		if reason != "" {
			nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionLaunched, Status: metav1.ConditionUnknown, Reason: reason, Message: "m"}}
		}
		return nc
	}
	h := poolhealth.New()
	l := &Lifecycle{d: Deps{Health: h}}
	l.recordHealth(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.LabelNodePool: "default"}}}, false)
	if st, _ := h.Status("uid-default"); st != poolhealth.Unknown {
		t.Fatalf("a claim the pool does not own counted: %v", st)
	}
	l.recordHealth(owned("InsufficientCapacity"), false)
	l.recordHealth(owned("InsufficientCapacity"), false)
	if st, why := h.Status("uid-default"); st != poolhealth.Unhealthy || why.Reason != "InsufficientCapacity" {
		t.Fatalf("after two launch timeouts: %v %+v, want unhealthy InsufficientCapacity", st, why)
	}
	launched := owned("")
	launched.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched"}}
	l.recordHealth(launched, false)
	if _, why := h.Status("uid-default"); why.Reason != "RegistrationFailed" {
		t.Fatalf("a registration timeout's reason %q, want RegistrationFailed", why.Reason)
	}
	for range 4 {
		l.recordHealth(owned(""), true)
	}
	if st, _ := h.Status("uid-default"); st != poolhealth.Healthy {
		t.Fatalf("after four registrations: %v", st)
	}
}

// Karpenter's consistency suite (nodeshape): an initialized NodeClaim
// whose Node has under 90 % of an expected, requested resource has an
// issue; ConsistentStateFound follows.
func TestConsistency(t *testing.T) {
	qty := func(cpu, pods string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse(pods)}
	}
	initialized := func(nc *karpv1.NodeClaim) {
		nc.Status.ProviderID = "aws:///us-east-1a/i-1"
		nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("5")}
		nc.Status.Capacity = qty("2", "58")
		ApplyWaiting(nc, nil, t0)
		setCondition(nc, karpv1.ConditionInitialized, metav1.ConditionTrue, ReasonInitialized, "", metav1.NewTime(t0))
	}
	for _, tc := range []struct {
		name   string
		claim  *karpv1.NodeClaim
		node   corev1.ResourceList // nil: no Node
		issues []string
		status metav1.ConditionStatus // "": not written
	}{
		{"as expected", claim(initialized), qty("2", "58"), nil, metav1.ConditionTrue},
		{"within 10 %", claim(initialized), qty("1900m", "53"), nil, metav1.ConditionTrue},
		{"max pods below the type's", claim(initialized), qty("2", "29"), []string{
			"expected 58 of resource pods, but found 29 (50.0% of expected)"}, metav1.ConditionFalse},
		{"a resource not requested", claim(initialized, func(nc *karpv1.NodeClaim) { delete(nc.Spec.Resources.Requests, corev1.ResourcePods) }),
			qty("2", "29"), nil, metav1.ConditionTrue},
		{"not initialized: not checked yet", claim(func(nc *karpv1.NodeClaim) {
			initialized(nc)
			setCondition(nc, karpv1.ConditionInitialized, metav1.ConditionUnknown, ReasonNodeNotReady, "", metav1.NewTime(t0))
		}), qty("1", "29"), nil, metav1.ConditionTrue},
		{"deleting", claim(initialized, func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = &metav1.Time{Time: t0} }),
			qty("1", "29"), nil, metav1.ConditionTrue},
		{"no Node", claim(initialized), nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var node *corev1.Node
			if tc.node != nil {
				node = &corev1.Node{Status: corev1.NodeStatus{Capacity: tc.node}}
			}
			issues := ConsistencyIssues(tc.claim, node)
			if !slices.Equal(issues, tc.issues) {
				t.Errorf("issues %q, want %q", issues, tc.issues)
			}
			ApplyConsistency(tc.claim, node, issues, t0)
			c := condition(tc.claim.Status.Conditions, karpv1.ConditionConsistentStateFound)
			if got := metav1.ConditionStatus(""); c != nil {
				got = c.Status
				if got != tc.status {
					t.Errorf("ConsistentStateFound %s, want %q", got, tc.status)
				}
			} else if tc.status != "" {
				t.Errorf("ConsistentStateFound not written, want %s", tc.status)
			}
			if ApplyConsistency(tc.claim, node, issues, t0) {
				t.Error("a second write changed the claim")
			}
		})
	}
}
