package lifecycle

// Karpenter v1.14.1's NodeClaim lifecycle suites (registration,
// initialization, liveness), its garbage collection and consistency
// suites, ported as tables over Joiner's pure functions and, where the
// behaviour is a write, over the lifecycle harness.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/observe"
)

var (
	unregisteredTaint = corev1.Taint{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute}
	notReadyTaint     = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
)

func taintStrings(ts []corev1.Taint) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = formatTaint(t)
	}
	slices.Sort(out)
	return out
}

// TestRegistrationAsKarpenter: what registration writes onto the Node
// (Karpenter's registration suite).
func TestRegistrationAsKarpenter(t *testing.T) {
	claimTaint := corev1.Taint{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: startupKey, Effect: corev1.TaintEffectNoSchedule}
	joining := func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{notReadyTaint, unregisteredTaint} }
	doNotSync := func(v string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Labels[karpv1.LabelDoNotSync] = v }
	}
	for _, tc := range []struct {
		name        string
		claim       func(*karpv1.NodeClaim)
		node        []func(*corev1.Node)
		labels      map[string]string // on the Node after, at least
		annotations map[string]string
		taints      []corev1.Taint // the Node's, exactly
	}{
		{name: "registered label set, unregistered taint removed, claim taints and startup taints added", node: []func(*corev1.Node){joining},
			labels: map[string]string{karpv1.LabelRegistered: "true"}, taints: []corev1.Taint{notReadyTaint, claimTaint, startup}},
		{name: "claim labels synced, the Node's own kept, the claim's value wins",
			claim: func(nc *karpv1.NodeClaim) {
				nc.Labels["custom-label"], nc.Labels["other-custom-label"] = "custom-value", "other-custom-value"
			},
			node: []func(*corev1.Node){joining, func(n *corev1.Node) { n.Labels["team"], n.Labels["node-own"] = "b", "x" }},
			labels: map[string]string{"custom-label": "custom-value", "other-custom-label": "other-custom-value", "team": "a",
				karpv1.LabelNodePool: "default", "node-own": "x", corev1.LabelHostname: "ip-10-0-0-1"},
			taints: []corev1.Taint{notReadyTaint, claimTaint, startup}},
		{name: "annotations synced",
			claim: func(nc *karpv1.NodeClaim) {
				nc.Annotations[karpv1.AnnotationDoNotDisrupt], nc.Annotations["my-custom-annotation"] = "true", "my-custom-value"
			},
			node:        []func(*corev1.Node){joining},
			annotations: map[string]string{karpv1.AnnotationDoNotDisrupt: "true", "my-custom-annotation": "my-custom-value", karpv1.AnnotationLaunchID: "intent1"},
			taints:      []corev1.Taint{notReadyTaint, claimTaint, startup}},
		{name: "do-not-sync-taints present but not true: taints and startup taints synced", node: []func(*corev1.Node){joining, doNotSync("false")},
			taints: []corev1.Taint{notReadyTaint, claimTaint, startup}},
		{name: "do-not-sync-taints true: neither taints nor startup taints, the unregistered taint still removed",
			node: []func(*corev1.Node){joining, doNotSync("true")}, labels: map[string]string{karpv1.LabelRegistered: "true"},
			taints: []corev1.Taint{notReadyTaint}},
		{name: "a taint the Node already has (same key and effect) is not added twice",
			node: []func(*corev1.Node){joining, func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule})
			}},
			taints: []corev1.Taint{notReadyTaint, {Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}, startup}},
		// Karpenter removes karpenter.sh/unregistered with NoExecute only.
		{name: "the unregistered key with another effect is not Karpenter's taint: kept",
			node: []func(*corev1.Node){func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoSchedule}}
			}},
			taints: []corev1.Taint{{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoSchedule}, claimTaint, startup}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim()
			if tc.claim != nil {
				tc.claim(nc)
			}
			n := node(tc.node...)
			if !SyncNode(nc, n) {
				t.Fatal("SyncNode changed nothing")
			}
			for k, v := range tc.labels {
				if n.Labels[k] != v {
					t.Errorf("node label %s = %q, want %q", k, n.Labels[k], v)
				}
			}
			for k, v := range nc.Labels {
				if k != "team" && n.Labels[k] != v {
					t.Errorf("claim label %s=%s not on the node: %v", k, v, n.Labels)
				}
			}
			for k, v := range tc.annotations {
				if n.Annotations[k] != v {
					t.Errorf("node annotation %s = %q, want %q", k, n.Annotations[k], v)
				}
			}
			if got, want := taintStrings(n.Spec.Taints), taintStrings(tc.taints); !slices.Equal(got, want) {
				t.Errorf("node taints %v, want %v", got, want)
			}
			if !slices.Equal(n.Finalizers, []string{karpv1.TerminationFinalizer}) {
				t.Errorf("finalizers %v", n.Finalizers)
			}
			if SyncNode(nc, n) {
				t.Error("a second SyncNode changed the node")
			}
		})
	}
}

// TestRegistrationOwnerReference: the Node gets one owner reference to its
// NodeClaim, blocking its deletion, and never a second.
func TestRegistrationOwnerReference(t *testing.T) {
	nc := claim()
	yes := true
	own := metav1.OwnerReference{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: &yes}
	for _, tc := range []struct {
		name   string
		before []metav1.OwnerReference
	}{
		{"added when the Node comes online", nil},
		{"not added again when the Node has it", []metav1.OwnerReference{own}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(func(n *corev1.Node) { n.OwnerReferences = slices.Clone(tc.before) })
			SyncNode(nc, n)
			if len(n.OwnerReferences) != 1 {
				t.Fatalf("owner references %+v, want one", n.OwnerReferences)
			}
			got := n.OwnerReferences[0]
			if got.APIVersion != own.APIVersion || got.Kind != own.Kind || got.Name != own.Name || got.UID != own.UID ||
				got.BlockOwnerDeletion == nil || !*got.BlockOwnerDeletion {
				t.Fatalf("owner reference %+v, want %+v", got, own)
			}
		})
	}
}

// registeredHarness is a harness whose claim has launched (no startup
// taint removal) and whose Node, made by mods, has joined.
func registeredHarness(t *testing.T, claimMods []func(*karpv1.NodeClaim), mods ...func(*corev1.Node)) *harness {
	t.Helper()
	h := newHarness(t, Config{}, claim(claimMods...))
	h.commitIntent(fsm.IntentLaunched)
	h.reconcile() // launched
	if _, err := h.kube.nodes.CoreV1().Nodes().Create(context.Background(), node(mods...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(3 * time.Minute)
	h.reconcile() // registered
	return h
}

// TestRegistrationWithoutUnregisteredTaint: a Node that joins without the
// karpenter.sh/unregistered taint still registers, with an
// UnregisteredTaintMissing Event (Karpenter's).
func TestRegistrationWithoutUnregisteredTaint(t *testing.T) {
	h := registeredHarness(t, nil, noTaints)
	if h.condStatus(karpv1.ConditionRegistered) != metav1.ConditionTrue || h.claim().Status.NodeName != "ip-10-0-0-1" {
		t.Fatalf("not registered: %+v", h.claim().Status)
	}
	if h.node().Labels[karpv1.LabelRegistered] != "true" {
		t.Fatalf("node labels %v", h.node().Labels)
	}
	missing := 0
	for _, e := range observe.Events(h.rec) {
		if strings.Contains(e, events.UnregisteredTaintMissing) {
			missing++
		}
	}
	if missing != 1 {
		t.Fatalf("%d %s events, want 1", missing, events.UnregisteredTaintMissing)
	}
	if got, _ := observe.Sample(t, h.reg, "karpenter_nodes_created_total", map[string]string{"nodepool": "default", "zone": "us-east-1a"}); got != 1 {
		t.Fatalf("karpenter_nodes_created_total = %v, want 1", got)
	}
}

// TestStartupTaintsNotResynced: once registered, startup taints their
// owners removed are not put back.
func TestStartupTaintsNotResynced(t *testing.T) {
	h := registeredHarness(t, []func(*karpv1.NodeClaim){func(nc *karpv1.NodeClaim) { nc.Spec.Taints = nil }},
		func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{unregisteredTaint} })
	n := h.node()
	if got := taintStrings(n.Spec.Taints); !slices.Equal(got, []string{startupKey + ":NoSchedule"}) {
		t.Fatalf("taints after registration %v, want the startup taint", got)
	}
	n.Spec.Taints = nil
	if _, err := h.kube.nodes.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Minute)
	h.reconcile()
	h.reconcile()
	if taints := h.node().Spec.Taints; len(taints) != 0 {
		t.Fatalf("taints %v after their owner removed them", taints)
	}
	if h.condStatus(karpv1.ConditionInitialized) != metav1.ConditionTrue {
		t.Fatalf("not initialized once the startup taint went: %+v", h.claim().Status.Conditions)
	}
}

// TestInitializationAsKarpenter: when a registered NodeClaim's Node counts
// as initialized, and what Initialized says until then (Karpenter's
// initialization suite).
func TestInitializationAsKarpenter(t *testing.T) {
	standard := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("50Mi"),
		corev1.ResourcePods: resource.MustParse("5")}
	kubelet := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("80Mi"),
		corev1.ResourcePods: resource.MustParse("110")}
	requests := func(extra corev1.ResourceList) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) {
			nc.Spec.Resources.Requests = standard.DeepCopy()
			for k, v := range extra {
				nc.Spec.Resources.Requests[k] = v
			}
		}
	}
	allocatable := func(extra corev1.ResourceList) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Status.Allocatable = kubelet.DeepCopy()
			for k, v := range extra {
				n.Status.Allocatable[k] = v
			}
		}
	}
	taints := func(ts ...corev1.Taint) func(*corev1.Node) { return func(n *corev1.Node) { n.Spec.Taints = ts } }
	s1 := corev1.Taint{Key: "custom-startup-taint", Value: "custom-startup-value", Effect: corev1.TaintEffectNoSchedule}
	s2 := corev1.Taint{Key: "other-custom-startup-taint", Value: "other-custom-startup-value", Effect: corev1.TaintEffectNoExecute}
	twoStartup := func(nc *karpv1.NodeClaim) { nc.Spec.StartupTaints = []corev1.Taint{s1, s2} }
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	for _, tc := range []struct {
		name   string
		claim  []func(*karpv1.NodeClaim)
		node   []func(*corev1.Node)
		reason string // "" initialized
		msg    string
	}{
		{name: "all conditions met", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){noTaints, allocatable(nil)}},
		{name: "the kubelet has not posted allocatable yet", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){noTaints},
			reason: ReasonResourceNotRegistered, msg: `Resource "cpu" was requested but not registered`},
		{name: "node NotReady", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){noTaints, allocatable(nil), notReady},
			reason: ReasonNodeNotReady, msg: "Node status is NotReady"},
		{name: "an extended resource not registered yet", claim: []func(*karpv1.NodeClaim){requests(gpu)}, node: []func(*corev1.Node){noTaints, allocatable(nil)},
			reason: ReasonResourceNotRegistered, msg: `Resource "nvidia.com/gpu" was requested but not registered`},
		{name: "an extended resource registered with zero", claim: []func(*karpv1.NodeClaim){requests(gpu)},
			node:   []func(*corev1.Node){noTaints, allocatable(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")})},
			reason: ReasonResourceNotRegistered, msg: `Resource "nvidia.com/gpu" was requested but not registered`},
		{name: "every resource registered", claim: []func(*karpv1.NodeClaim){requests(gpu)}, node: []func(*corev1.Node){noTaints, allocatable(gpu)}},
		{name: "a zero request is not awaited", claim: []func(*karpv1.NodeClaim){requests(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")})},
			node: []func(*corev1.Node){noTaints, allocatable(nil)}},
		// Joiner's own: CSI attach counts are never registered.
		{name: "a CSI attach count is not awaited", claim: []func(*karpv1.NodeClaim){requests(corev1.ResourceList{"attachable-volumes-aws-ebs": resource.MustParse("2")})},
			node: []func(*corev1.Node){noTaints, allocatable(nil)}},
		{name: "both startup taints left", claim: []func(*karpv1.NodeClaim){requests(nil), twoStartup}, node: []func(*corev1.Node){allocatable(nil), taints(s1, s2)},
			reason: ReasonStartupTaintsExist, msg: `StartupTaint "custom-startup-taint=custom-startup-value:NoSchedule" still exists`},
		{name: "one startup taint left", claim: []func(*karpv1.NodeClaim){requests(nil), twoStartup}, node: []func(*corev1.Node){allocatable(nil), taints(s2)},
			reason: ReasonStartupTaintsExist, msg: `StartupTaint "other-custom-startup-taint=other-custom-startup-value:NoExecute" still exists`},
		{name: "startup taints removed", claim: []func(*karpv1.NodeClaim){requests(nil), twoStartup}, node: []func(*corev1.Node){allocatable(nil), noTaints}},
		{name: "ephemeral taints left", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){allocatable(nil), taints(notReadyTaint,
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: karpv1.TaintCloudProviderUninitializedKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}, unregisteredTaint)},
			reason: ReasonKnownEphemeralTaintsExist, msg: `KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists`},
		{name: "the cloud provider's taint alone", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){allocatable(nil),
			taints(corev1.Taint{Key: karpv1.TaintCloudProviderUninitializedKey, Value: "true", Effect: corev1.TaintEffectNoSchedule})},
			reason: ReasonKnownEphemeralTaintsExist, msg: `KnownEphemeralTaint "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule" still exists`},
		{name: "the unregistered taint alone", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){allocatable(nil), taints(unregisteredTaint)},
			reason: ReasonKnownEphemeralTaintsExist, msg: `KnownEphemeralTaint "karpenter.sh/unregistered:NoExecute" still exists`},
		{name: "ephemeral taints removed", claim: []func(*karpv1.NodeClaim){requests(nil)}, node: []func(*corev1.Node){allocatable(nil), noTaints}},
		{name: "startup taints are named before ephemeral ones", claim: []func(*karpv1.NodeClaim){requests(nil)},
			node:   []func(*corev1.Node){allocatable(nil), taints(notReadyTaint, corev1.Taint{Key: startupKey, Effect: corev1.TaintEffectNoSchedule})},
			reason: ReasonStartupTaintsExist, msg: `StartupTaint "` + startupKey + `:NoSchedule" still exists`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := append([]func(*karpv1.NodeClaim){launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0)}, tc.claim...)
			nc := claim(mods...)
			n := node(tc.node...)
			in := Inputs{Claim: nc, Intent: intent(fsm.IntentLaunched), HasIntent: true, Instance: instance(fsm.InstanceRegistered), HasInstance: true,
				Node: n, Now: t0.Add(time.Minute), Timeouts: Timeouts{Launch: 5 * time.Minute, Registration: 15 * time.Minute}}
			got, why := Decide(in)
			if tc.reason == "" {
				if got != Initialize {
					t.Fatalf("Decide = %s (%s), want initialize", got, why)
				}
				return
			}
			if got != None || why != tc.msg {
				t.Fatalf("Decide = %s (%q), want none (%q)", got, why, tc.msg)
			}
			ApplyWaiting(nc, n, in.Now)
			if c := condition(nc.Status.Conditions, karpv1.ConditionInitialized); c.Status != metav1.ConditionUnknown || c.Reason != tc.reason || c.Message != tc.msg {
				t.Fatalf("Initialized = %s %s %q, want Unknown %s %q", c.Status, c.Reason, c.Message, tc.reason, tc.msg)
			}
		})
	}
}

// TestDecidedConditionsStay: as Karpenter's registration and
// initialization, only an Unknown condition is decided: an initialized
// claim whose Node turns NotReady stays initialized, and an adopted claim
// Karpenter marked Registered=False (MultipleNodesFound) is neither
// registered nor initialized, but deleted at the registration timeout.
func TestDecidedConditionsStay(t *testing.T) {
	adopted := func(nc *karpv1.NodeClaim) { nc.Annotations = nil }
	to := Timeouts{Launch: 5 * time.Minute, Registration: 15 * time.Minute}
	for _, tc := range []struct {
		name string
		in   Inputs
		want Action
	}{
		{"initialized, node NotReady since", Inputs{Claim: claim(adopted, launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0),
			withCond(karpv1.ConditionInitialized, metav1.ConditionTrue, t0)), Node: node(notReady), Now: t0.Add(time.Hour), Timeouts: to}, None},
		{"Registered False, a Ready node", Inputs{Claim: claim(adopted, launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionFalse, t0.Add(time.Minute))),
			Node: node(noTaints), Now: t0.Add(2 * time.Minute), Timeouts: to}, None},
		{"Registered False past the registration timeout", Inputs{Claim: claim(adopted, launchedClaim(t0),
			withCond(karpv1.ConditionRegistered, metav1.ConditionFalse, t0.Add(time.Minute))), Node: node(noTaints), Now: t0.Add(16*time.Minute + time.Second), Timeouts: to},
			DeleteRegistrationTimeout},
		{"Initialized False, a usable node", Inputs{Claim: claim(adopted, launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0),
			withCond(karpv1.ConditionInitialized, metav1.ConditionFalse, t0)), Node: node(noTaints), Now: t0.Add(time.Hour), Timeouts: to}, None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := Decide(tc.in); got != tc.want {
				t.Fatalf("Decide = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// TestLivenessAsKarpenter: the launch and registration timeouts
// (Karpenter's liveness suite): both count from their condition's last
// transition, not the claim's creation.
func TestLivenessAsKarpenter(t *testing.T) {
	to := Timeouts{Launch: 5 * time.Minute, Registration: 15 * time.Minute}
	pending := ptr(intent(fsm.IntentPending))
	launchedInst := ptr(instance(fsm.InstanceLaunched))
	// Every condition moved 10 minutes after the claim's creation.
	allMoved := func(nc *karpv1.NodeClaim) {
		ApplyWaiting(nc, nil, t0)
		for i := range nc.Status.Conditions {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t0.Add(10 * time.Minute))
		}
	}
	adopted := func(nc *karpv1.NodeClaim) { nc.Annotations = nil }
	runDecideCases(t, to, []decideCase{
		{name: "no node past the registration timeout", claim: claim(launchedClaim(t0)), intent: ptr(intent(fsm.IntentLaunched)), inst: launchedInst,
			now: t0.Add(20 * time.Minute), want: DeleteRegistrationTimeout},
		{name: "registered, past the registration timeout", claim: claim(launchedClaim(t0), withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0)),
			intent: ptr(intent(fsm.IntentLaunched)), inst: ptr(instance(fsm.InstanceRegistered)), node: node(noTaints, notReady), now: t0.Add(20 * time.Minute), want: None},
		{name: "not launched past the launch timeout", claim: claim(), intent: pending, now: t0.Add(6 * time.Minute), want: DeleteLaunchTimeout},
		{name: "not launched, before the launch timeout", claim: claim(), intent: pending, now: t0.Add(time.Minute), want: None},
		{name: "a custom launch timeout, not reached", claim: claim(), intent: pending, to: &Timeouts{Launch: 45 * time.Second, Registration: 15 * time.Minute},
			now: t0.Add(30 * time.Second), want: None},
		{name: "a custom launch timeout, passed", claim: claim(), intent: pending, to: &Timeouts{Launch: 45 * time.Second, Registration: 15 * time.Minute},
			now: t0.Add(time.Minute), want: DeleteLaunchTimeout},
		{name: "launch timeout from the Launched condition, not the creation", claim: claim(allMoved), intent: pending, now: t0.Add(12 * time.Minute), want: None},
		{name: "launch timeout from the Launched condition, passed", claim: claim(allMoved), intent: pending, now: t0.Add(15*time.Minute + time.Second), want: DeleteLaunchTimeout},
		{name: "adopted: launch timeout from the Launched condition", claim: claim(adopted, allMoved), now: t0.Add(12 * time.Minute), want: None},
		{name: "registration timeout from the Registered condition, not the creation", claim: claim(allMoved, func(nc *karpv1.NodeClaim) {
			nc.Status.ProviderID = "aws:///us-east-1a/i-1"
			condition(nc.Status.Conditions, karpv1.ConditionLaunched).Status = metav1.ConditionTrue
		}),
			intent: ptr(intent(fsm.IntentLaunched)), inst: launchedInst, now: t0.Add(16 * time.Minute), want: None},
	})
}

// TestLivenessMetrics: a timed-out NodeClaim counts in Karpenter's
// karpenter_nodeclaims_disrupted_total with its timeout as the reason.
func TestLivenessMetrics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		intent fsm.IntentState
		after  time.Duration
		reason string
		labels map[string]string
	}{
		{"launch timeout", fsm.IntentPending, 6 * time.Minute, ReasonLaunchTimeout,
			map[string]string{"reason": "launch_timeout", "nodepool": "default", "capacity_type": ""}},
		{"registration timeout", fsm.IntentLaunched, 20 * time.Minute, ReasonRegistrationTimeout,
			map[string]string{"reason": "registration_timeout", "nodepool": "default", "capacity_type": "spot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{}, claim())
			h.commitIntent(tc.intent)
			h.reconcile()
			h.now = t0.Add(tc.after)
			h.reconcile()
			h.wantDeleted(tc.reason)
			if got, _ := observe.Sample(t, h.reg, "karpenter_nodeclaims_disrupted_total", tc.labels); got != 1 {
				t.Fatalf("karpenter_nodeclaims_disrupted_total%v = %v, want 1", tc.labels, got)
			}
		})
	}
}

// TestGarbageCollectionAsKarpenter: NodeClaims Karpenter launched (adopted,
// no launch intent) whose instance the cloud no longer has, as its garbage
// collection suite: deleted once registered and their Node is not Ready,
// left alone while their Node says Ready or before they register (the
// registration timeout handles those). Joiner's own NodeClaims follow raft
// instead, and are collected as soon as their instance is lost, registered
// or not (TestGarbageCollection).
func TestGarbageCollectionAsKarpenter(t *testing.T) {
	type adoptedClaim struct {
		registered bool
		node       *corev1.ConditionStatus // nil: no Node
		instance   bool                    // the cloud still has it
	}
	ready, notReadyS := corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name    string
		claims  []adoptedClaim
		deleted int
	}{
		{"node NotReady, instance gone: deleted", []adoptedClaim{{registered: true, node: &notReadyS}}, 1},
		{"node Ready, instance gone: kept", []adoptedClaim{{registered: true, node: &ready}}, 0},
		{"many nodes NotReady, instances gone: all deleted", slices.Repeat([]adoptedClaim{{registered: true, node: &notReadyS}}, 10), 10},
		{"node gone, instance gone: deleted", []adoptedClaim{{registered: true}}, 1},
		{"not registered, no node, instance gone: kept", []adoptedClaim{{}}, 0},
		{"node gone, instance there: kept", []adoptedClaim{{registered: true, instance: true}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims []*karpv1.NodeClaim
			for i := range tc.claims {
				claims = append(claims, claim(func(nc *karpv1.NodeClaim) {
					nc.Name, nc.UID, nc.Annotations = fmt.Sprintf("adopted-%02d", i), types.UID(fmt.Sprint("uid-adopted-", i)), nil
					nc.Labels[karpv1.LabelCapacityType] = "spot"
				}, launchedClaim(t0), func(nc *karpv1.NodeClaim) { nc.Status.ProviderID = fmt.Sprintf("aws:///us-east-1a/i-%02d", i) }))
				if tc.claims[i].registered {
					withCond(karpv1.ConditionRegistered, metav1.ConditionTrue, t0)(claims[i])
				}
			}
			h := newHarness(t, Config{GCGrace: time.Minute}, claims...)
			for i, c := range tc.claims {
				id := fmt.Sprintf("i-%02d", i)
				if c.instance {
					h.cloud.insts[id] = cloud.Instance{ID: id, State: "running"}
				}
				if c.node != nil {
					n := node(noTaints, func(n *corev1.Node) {
						n.Name, n.Spec.ProviderID = "ip-"+id, claims[i].Status.ProviderID
						n.Status.Conditions[0].Status = *c.node
					})
					if _, err := h.kube.nodes.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			h.now = t0.Add(time.Hour)
			gone, err := h.l.CollectGarbage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(gone) != tc.deleted || len(h.kube.deleted) != tc.deleted {
				t.Fatalf("collected %v, deleted %v; want %d", gone, h.kube.deleted, tc.deleted)
			}
			if tc.deleted > 0 {
				labels := map[string]string{"reason": "garbage_collected", "nodepool": "default", "capacity_type": "spot"}
				if got, _ := observe.Sample(t, h.reg, "karpenter_nodeclaims_disrupted_total", labels); got != float64(tc.deleted) {
					t.Fatalf("karpenter_nodeclaims_disrupted_total%v = %v, want %d", labels, got, tc.deleted)
				}
			}
		})
	}
}

// TestConsistencyAsKarpenter: the node shape check on a pass (Karpenter's
// consistency suite): ConsistentStateFound True when the Node has what the
// claim expected, False with a FailedConsistencyCheck Event naming the
// shortfall when it has much less.
func TestConsistencyAsKarpenter(t *testing.T) {
	list := func(cpu, mem, pods string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourcePods: resource.MustParse(pods)}
	}
	for _, tc := range []struct {
		name   string
		node   corev1.ResourceList
		status metav1.ConditionStatus
		event  string
	}{
		{"no consistency issue", list("16", "128Gi", "10"), metav1.ConditionTrue, ""},
		{"much less memory than expected", list("16", "64Gi", "10"), metav1.ConditionFalse,
			"FailedConsistencyCheck expected 128Gi of resource memory, but found 64Gi (50.0% of expected)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(func(nc *karpv1.NodeClaim) {
				nc.Annotations = nil // adopted: no intent to look up
				nc.Spec.Resources.Requests = list("8", "64Gi", "5")
				nc.Status.Capacity = list("16", "128Gi", "10")
			}, launchedClaim(t0))
			nc.Status.Conditions = nil
			ApplyWaiting(nc, nil, t0)
			for _, c := range readyDependents {
				setCondition(nc, c, metav1.ConditionTrue, c, "", metav1.NewTime(t0))
			}
			h := newHarness(t, Config{}, nc)
			n := node(noTaints, func(n *corev1.Node) { n.Status.Capacity = tc.node })
			if _, err := h.kube.nodes.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.now = t0.Add(time.Hour)
			h.reconcile()
			if got := h.condStatus(karpv1.ConditionConsistentStateFound); got != tc.status {
				t.Fatalf("ConsistentStateFound %q, want %s", got, tc.status)
			}
			var want []string
			if tc.event != "" {
				want = append(want, tc.event)
			}
			wantEvents(t, h.rec, want...)
		})
	}
}
