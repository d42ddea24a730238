package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Action is what the lifecycle does with a NodeClaim in one pass. The
// decision is a pure function of the NodeClaim, its launch intent and
// instance, its Node and the time.
type Action int

// Actions, in lifecycle order.
const (
	// None: nothing to do now (waiting for the launcher, the kubelet or
	// the startup taints' owners), or the claim is done.
	None Action = iota
	// Launch: the intent launched; write providerID, capacity, labels and
	// Launched=True.
	Launch
	// LaunchFailed: the intent failed; Launched stays Unknown with the
	// error (LaunchFailed), then delete.
	LaunchFailed
	// Register: a Node with the providerID joined; sync it, Registered=True.
	Register
	// RemoveStartupTaints: the Node is Ready and only the startup taints
	// keep it from initializing; nobody else removes them (the sim).
	RemoveStartupTaints
	// Initialize: the Node is usable; label it, Initialized=True.
	Initialize
	// DeleteOrphan: a Joiner NodeClaim with no live launch intent.
	DeleteOrphan
	// DeleteLaunchTimeout: not launched within the launch timeout.
	DeleteLaunchTimeout
	// DeleteRegistrationTimeout: launched, but no Node within the
	// registration timeout.
	DeleteRegistrationTimeout
	// DeleteInstanceGone: the claim's instance is terminated or lost.
	DeleteInstanceGone
	// DeleteExpired: past its expireAfter with no Node (the disruption
	// controller expires the NodeClaims that have one).
	DeleteExpired
)

var actionNames = map[Action]string{
	None: "none", Launch: "launch", LaunchFailed: "launch-failed", Register: "register",
	RemoveStartupTaints: "remove-startup-taints", Initialize: "initialize", DeleteOrphan: "delete-orphan",
	DeleteLaunchTimeout: "delete-launch-timeout", DeleteRegistrationTimeout: "delete-registration-timeout",
	DeleteInstanceGone: "delete-instance-gone", DeleteExpired: "delete-expired",
}

func (a Action) String() string { return actionNames[a] }

// Timeouts are Karpenter's liveness limits.
type Timeouts struct {
	// Launch: a NodeClaim not Launched this long after creation is deleted
	// (Karpenter: 5 min).
	Launch time.Duration
	// Registration: a Launched NodeClaim without a Node this long after
	// launch is deleted (Karpenter: 15 min).
	Registration time.Duration
}

// Inputs is everything Decide looks at for one NodeClaim.
type Inputs struct {
	Claim *karpv1.NodeClaim
	// Intent is the claim's launch intent (HasIntent false: unknown ID).
	Intent    fsm.LaunchIntent
	HasIntent bool
	// Instance is the intent's instance, if it launched.
	Instance    fsm.Instance
	HasInstance bool
	// Node is the Node whose providerID is the claim's, or nil.
	Node *corev1.Node
	// RemoveStartupTaints: the coordinator removes startup taints itself.
	RemoveStartupTaints bool
	Now                 time.Time
	Timeouts            Timeouts
}

// Decide picks the next step of one NodeClaim that is not being deleted,
// with a short reason for logs and tests. A NodeClaim without a launch-id
// annotation was launched by Karpenter before the switch (adopted): Joiner
// cannot launch it, so until it is Launched only the launch timeout
// applies; once Launched it follows the same steps as Joiner's own.
func Decide(in Inputs) (Action, string) {
	nc := in.Claim
	conds := nc.Status.Conditions
	if at, ok := ExpiresAt(nc); ok && in.Node == nil && !in.Now.Before(at) {
		return DeleteExpired, fmt.Sprintf("expireAfter %s passed at %s, with no node", nc.Spec.ExpireAfter.String(), at.UTC().Format(time.RFC3339))
	}
	if !isTrue(conds, karpv1.ConditionLaunched) && nc.Annotations[karpv1.AnnotationLaunchID] == "" {
		if age := in.Now.Sub(launchedAt(nc)); age > in.Timeouts.Launch {
			return DeleteLaunchTimeout, fmt.Sprintf("adopted, and not launched %s after creation", age.Round(time.Second))
		}
		return None, "adopted, waiting for its launch"
	}
	if !isTrue(conds, karpv1.ConditionLaunched) {
		if !in.HasIntent {
			return DeleteOrphan, "launch intent " + nc.Annotations[karpv1.AnnotationLaunchID] + " does not exist"
		}
		switch in.Intent.State {
		case fsm.IntentLaunched:
			if !in.HasInstance {
				return None, "instance " + in.Intent.InstanceID + " not recorded yet"
			}
			if in.Instance.State.Terminal() {
				return DeleteInstanceGone, "instance " + in.Instance.ID + " is " + string(in.Instance.State)
			}
			return Launch, "instance " + in.Instance.ID + " launched"
		case fsm.IntentFailed:
			return LaunchFailed, in.Intent.LastError
		case fsm.IntentCancelled:
			return DeleteOrphan, "launch intent " + in.Intent.ID + " was cancelled"
		}
		if age := in.Now.Sub(launchedAt(nc)); age > in.Timeouts.Launch {
			return DeleteLaunchTimeout, fmt.Sprintf("not launched %s after creation (intent %s)", age.Round(time.Second), in.Intent.State)
		}
		return None, "launch intent " + string(in.Intent.State)
	}
	if in.HasInstance && in.Instance.State.Terminal() {
		return DeleteInstanceGone, "instance " + in.Instance.ID + " is " + string(in.Instance.State)
	}
	if !isTrue(conds, karpv1.ConditionRegistered) {
		// As Karpenter's registration, only an Unknown (or absent)
		// Registered is decided: False (Karpenter's MultipleNodesFound on
		// an adopted claim) stays until the registration timeout.
		if in.Node == nil || isFalse(conds, karpv1.ConditionRegistered) {
			since, what := registrationSince(nc)
			if age := in.Now.Sub(since); age > in.Timeouts.Registration {
				return DeleteRegistrationTimeout, fmt.Sprintf("no node registered %s after %s", age.Round(time.Second), what)
			}
			return None, "waiting for node " + nc.Status.ProviderID
		}
		return Register, "node " + in.Node.Name + " registered"
	}
	if !unknown(conds, karpv1.ConditionInitialized) || in.Node == nil {
		return None, "initialized (or decided otherwise) or node gone"
	}
	if ok, why := Initialized(nc, in.Node); !ok {
		if in.RemoveStartupTaints && nodeReady(in.Node) && len(startupTaintsOn(nc, in.Node)) > 0 {
			return RemoveStartupTaints, why
		}
		return None, why
	}
	return Initialize, "node " + in.Node.Name + " initialized"
}

// ExpiresAt is when the NodeClaim's expireAfter runs out, counted from its
// creation as Karpenter's expiration controller counts it; false when it
// never expires (Never, or unset).
func ExpiresAt(nc *karpv1.NodeClaim) (time.Time, bool) {
	d := nc.Spec.ExpireAfter.Duration
	if d == nil {
		return time.Time{}, false
	}
	return nc.CreationTimestamp.Add(*d), true
}

// launchedAt is the last transition of the Launched condition (its
// creation if unknown): when the claim became Launched, or, while it is not,
// when the launch timeout started, as Karpenter's liveness counts it (Unknown
// from the claim's creation; a failed attempt leaves it Unknown, so the
// time does not move).
// registrationSince is when the registration timeout started: the last
// transition of the Registered condition, which is Unknown from the claim's
// creation until the node registers (Karpenter's liveness); the launch for
// a claim without one (written before Joiner set every condition at
// creation).
func registrationSince(nc *karpv1.NodeClaim) (time.Time, string) {
	if c := condition(nc.Status.Conditions, karpv1.ConditionRegistered); c != nil && c.Status != metav1.ConditionTrue && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time, "creation"
	}
	return launchedAt(nc), "launch"
}

func launchedAt(nc *karpv1.NodeClaim) time.Time {
	if c := condition(nc.Status.Conditions, karpv1.ConditionLaunched); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return nc.CreationTimestamp.Time
}

// ApplyLaunch writes a launched instance onto a copy of the claim: the
// instance type, zone and capacity-type labels (and a reserved instance's
// capacity reservation labels) plus the instance type's
// well-known labels (metadata), and providerID, imageID, capacity,
// allocatable and Launched=True (status). it may be nil (unknown type:
// labels from the instance only, no capacity). It reports whether the
// metadata and the status changed.
func ApplyLaunch(nc *karpv1.NodeClaim, in fsm.LaunchIntent, inst fsm.Instance, it *catalog.InstanceType, now time.Time) (meta, status bool) {
	labels := map[string]string{}
	if it != nil {
		maps.Copy(labels, it.Labels)
	}
	labels[karpv1.LabelInstanceType] = inst.InstanceType
	labels[karpv1.LabelZone] = inst.Zone
	if inst.CapacityType != "" {
		labels[karpv1.LabelCapacityType] = inst.CapacityType
	}
	maps.Copy(labels, reservationLabels(in, inst))
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range labels {
		if nc.Labels[k] != v {
			nc.Labels[k] = v
			meta = true
		}
	}
	s := &nc.Status
	set := func(dst *string, v string) {
		if v != "" && *dst != v {
			*dst, status = v, true
		}
	}
	set(&s.ProviderID, ProviderID(inst))
	set(&s.ImageID, imageOf(in, inst))
	if it != nil {
		if !equalResources(s.Capacity, it.Capacity) {
			s.Capacity, status = it.Capacity.DeepCopy(), true
		}
		if alloc := it.Allocatable(); !equalResources(s.Allocatable, alloc) {
			s.Allocatable, status = alloc, true
		}
	}
	t := metav1.NewTime(now)
	if initConditions(nc, t) {
		status = true
	}
	if setCondition(nc, karpv1.ConditionLaunched, metav1.ConditionTrue, ReasonLaunched, "", t) {
		status = true
	}
	return meta, status
}

// ProviderID is the providerID of an instance: aws:///<zone>/<id>.
func ProviderID(inst fsm.Instance) string { return "aws:///" + inst.Zone + "/" + inst.ID }

// imageOf is the image the launch booted: the frozen candidate of the
// instance's offering (or of its type).
func imageOf(in fsm.LaunchIntent, inst fsm.Instance) string {
	img := ""
	for _, c := range in.Spec.Candidates {
		if c.InstanceType != inst.InstanceType {
			continue
		}
		if c.Zone == inst.Zone && c.CapacityType == inst.CapacityType && c.ImageID != "" {
			return c.ImageID
		}
		if img == "" {
			img = c.ImageID
		}
	}
	return img
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// ApplyLaunchFailed records a failed launch on a copy of the claim as
// Karpenter does: Launched stays Unknown, reason LaunchFailed, the error as
// message. It reports whether the status changed.
func ApplyLaunchFailed(nc *karpv1.NodeClaim, reason string, now time.Time) bool {
	t := metav1.NewTime(now)
	changed := initConditions(nc, t)
	return setCondition(nc, karpv1.ConditionLaunched, metav1.ConditionUnknown, ReasonLaunchFailed, truncate(reason, 1024), t) || changed
}

// ApplyWaiting writes, on a copy of the claim, what Karpenter's lifecycle
// shows while the claim waits: every condition present, Registered Unknown
// (NodeNotFound) while no Node has its providerID, and once registered,
// Initialized Unknown with what the Node still lacks. node is the claim's
// Node or nil. It reports whether the status changed.
func ApplyWaiting(nc *karpv1.NodeClaim, node *corev1.Node, now time.Time) bool {
	t := metav1.NewTime(now)
	changed := initConditions(nc, t)
	// As Karpenter's, each step touches its condition only while Unknown.
	unknown := func(typ string) bool {
		return condition(nc.Status.Conditions, typ).Status == metav1.ConditionUnknown
	}
	if unknown(karpv1.ConditionRegistered) && node == nil &&
		setCondition(nc, karpv1.ConditionRegistered, metav1.ConditionUnknown, ReasonNodeNotFound, messageNodeNotFound, t) {
		changed = true
	}
	if isTrue(nc.Status.Conditions, karpv1.ConditionRegistered) && unknown(karpv1.ConditionInitialized) {
		if reason, msg := initializationGap(nc, node); reason != "" &&
			setCondition(nc, karpv1.ConditionInitialized, metav1.ConditionUnknown, reason, msg, t) {
			changed = true
		}
	}
	return changed
}

// ConsistencyIssues is Karpenter's node shape check (its NodeClaim
// consistency controller): for an initialized NodeClaim not being deleted,
// each resource it requests of which its Node has under 90 % of the
// capacity the claim expected (a kubelet max-pods below the type's, a
// smaller instance than planned, memory the AMI does not give).
func ConsistencyIssues(nc *karpv1.NodeClaim, node *corev1.Node) []string {
	if node == nil || nc.DeletionTimestamp != nil || !isTrue(nc.Status.Conditions, karpv1.ConditionInitialized) {
		return nil
	}
	var issues []string
	for _, name := range slices.Sorted(maps.Keys(nc.Spec.Resources.Requests)) {
		requested, expected := nc.Spec.Resources.Requests[name], nc.Status.Capacity[name]
		if requested.IsZero() || expected.IsZero() {
			continue
		}
		found := node.Status.Capacity[name]
		if pct := found.AsApproximateFloat64() / expected.AsApproximateFloat64(); pct < 0.90 {
			issues = append(issues, fmt.Sprintf("expected %s of resource %s, but found %s (%0.1f%% of expected)",
				expected.String(), name, found.String(), pct*100))
		}
	}
	return issues
}

// ApplyConsistency writes ConsistentStateFound as Karpenter's consistency
// controller does once the claim has an instance and a Node: True while
// the check finds no issue, False (ConsistencyCheckFailed) while it does.
func ApplyConsistency(nc *karpv1.NodeClaim, node *corev1.Node, issues []string, now time.Time) bool {
	if node == nil || nc.Status.ProviderID == "" {
		return false
	}
	t := metav1.NewTime(now)
	if len(issues) > 0 {
		return setCondition(nc, karpv1.ConditionConsistentStateFound, metav1.ConditionFalse, ReasonConsistencyCheckFailed,
			"Consistency Check Failed", t)
	}
	if isTrue(nc.Status.Conditions, karpv1.ConditionConsistentStateFound) {
		return false
	}
	return setCondition(nc, karpv1.ConditionConsistentStateFound, metav1.ConditionTrue, karpv1.ConditionConsistentStateFound, "", t)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// MissingUnregisteredTaint reports whether a Node that has not been
// registered yet (no karpenter.sh/registered label) lacks the
// karpenter.sh/unregistered:NoExecute taint nodes join with (Karpenter's
// registration check).
func MissingUnregisteredTaint(node *corev1.Node) bool {
	if _, ok := node.Labels[karpv1.LabelRegistered]; ok {
		return false
	}
	return !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == karpv1.TaintUnregisteredKey && t.Effect == corev1.TaintEffectNoExecute
	})
}

// SyncNode is what Karpenter does to a Node at registration, on a copy:
// the claim's labels and annotations, karpenter.sh/registered=true, the
// claim's taints and startup taints (unless the Node is labelled
// karpenter.sh/do-not-sync-taints=true), without the
// karpenter.sh/unregistered:NoExecute taint (Karpenter removes that effect
// only), the termination finalizer and an owner reference to the claim. It
// reports whether the Node changed.
func SyncNode(nc *karpv1.NodeClaim, node *corev1.Node) bool {
	changed := false
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	labels := maps.Clone(nc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[karpv1.LabelRegistered] = "true"
	for k, v := range labels {
		if node.Labels[k] != v {
			node.Labels[k], changed = v, true
		}
	}
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		if node.Annotations[k] != v {
			node.Annotations[k], changed = v, true
		}
	}
	if node.Labels[karpv1.LabelDoNotSync] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
				node.Spec.Taints, changed = append(node.Spec.Taints, t), true
			}
		}
	}
	if n := len(node.Spec.Taints); n > 0 {
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == karpv1.TaintUnregisteredKey && t.Effect == corev1.TaintEffectNoExecute
		})
		changed = changed || len(node.Spec.Taints) != n
	}
	if !slices.Contains(node.Finalizers, karpv1.TerminationFinalizer) {
		node.Finalizers, changed = append(node.Finalizers, karpv1.TerminationFinalizer), true
	}
	if !slices.ContainsFunc(node.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "NodeClaim" && o.Name == nc.Name && o.UID == nc.UID
	}) {
		yes := true
		node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{APIVersion: karpv1.SchemeGroupVersion.String(),
			Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: &yes})
		changed = true
	}
	return changed
}

// Initialized reports whether a registered claim's Node is usable
// (Karpenter's initialization): Ready, no startup taint of the claim and no
// known ephemeral taint left, and every resource the claim requests
// registered (non-zero allocatable: cpu, memory and pods as much as a
// device plugin's). CSI attach counts (attachable-volumes-*) are left
// out: no node registers them, and NodeClaims Joiner wrote before it
// stopped requesting them must not wait for them. Otherwise it says what is
// missing, in Karpenter's words (the Initialized condition's message).
func Initialized(nc *karpv1.NodeClaim, node *corev1.Node) (bool, string) {
	reason, msg := initializationGap(nc, node)
	return reason == "", msg
}

// initializationGap is the reason and message of Initialized=Unknown while
// node is not usable yet ("" when it is), in Karpenter's order.
func initializationGap(nc *karpv1.NodeClaim, node *corev1.Node) (reason, message string) {
	if node == nil {
		return ReasonNodeNotFound, messageNodeNotFound
	}
	if !nodeReady(node) {
		return ReasonNodeNotReady, "Node status is NotReady"
	}
	if ts := startupTaintsOn(nc, node); len(ts) > 0 {
		return ReasonStartupTaintsExist, fmt.Sprintf("StartupTaint %q still exists", formatTaint(ts[0]))
	}
	for _, t := range node.Spec.Taints {
		if karpv1.IsKnownEphemeralTaint(t) {
			return ReasonKnownEphemeralTaintsExist, fmt.Sprintf("KnownEphemeralTaint %q still exists", formatTaint(t))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nc.Spec.Resources.Requests)) {
		if q := nc.Spec.Resources.Requests[name]; q.IsZero() || strings.HasPrefix(string(name), "attachable-volumes-") {
			continue
		}
		if q, ok := node.Status.Allocatable[name]; !ok || q.IsZero() {
			return ReasonResourceNotRegistered, fmt.Sprintf("Resource %q was requested but not registered", name)
		}
	}
	return "", ""
}

// formatTaint writes a taint as Karpenter's messages do: key[=value]:effect.
func formatTaint(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startupTaintsOn are the node's taints that match a claim startup taint.
func startupTaintsOn(nc *karpv1.NodeClaim, node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if slices.ContainsFunc(nc.Spec.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&t) }) {
			out = append(out, t)
		}
	}
	return out
}

func taintKeys(ts []corev1.Taint) string {
	keys := make([]string, len(ts))
	for i, t := range ts {
		keys[i] = t.Key + ":" + string(t.Effect)
	}
	return strings.Join(keys, ", ")
}

// StripStartupTaints removes the claim's startup taints from a copy of
// the Node; it reports whether any was there.
func StripStartupTaints(nc *karpv1.NodeClaim, node *corev1.Node) bool {
	n := len(node.Spec.Taints)
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return slices.ContainsFunc(nc.Spec.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&t) })
	})
	return len(node.Spec.Taints) != n
}

// ApplyRegistered sets status.nodeName and Registered=True on a copy of the
// claim; it reports whether the status changed.
func ApplyRegistered(nc *karpv1.NodeClaim, node string, now time.Time) bool {
	t := metav1.NewTime(now)
	changed := nc.Status.NodeName != node
	nc.Status.NodeName = node
	if initConditions(nc, t) {
		changed = true
	}
	return setCondition(nc, karpv1.ConditionRegistered, metav1.ConditionTrue, ReasonRegistered, "", t) || changed
}

// ApplyInitialized sets Initialized=True (and so Ready=True) on a copy of
// the claim; it reports whether the status changed.
func ApplyInitialized(nc *karpv1.NodeClaim, now time.Time) bool {
	t := metav1.NewTime(now)
	changed := initConditions(nc, t)
	return setCondition(nc, karpv1.ConditionInitialized, metav1.ConditionTrue, ReasonInitialized, "", t) || changed
}

// GCVerdict is what GC makes of a live fsm instance the cloud answered for.
type GCVerdict int

// GC verdicts.
const (
	// Keep: the instance exists (or may be too new to be listed).
	Keep GCVerdict = iota
	// Lost: gone without a termination intent.
	Lost
	// Terminated: gone after a termination intent.
	Terminated
)

// CloudState is how the cloud answered Get for an instance.
type CloudState int

// Cloud answers.
const (
	CloudRunning CloudState = iota // exists, not terminated
	CloudTerminated
	CloudNotFound
)

// DecideGC judges one live fsm instance: terminated in the cloud, or
// unknown to it for longer than grace after launch (DescribeInstances is
// eventually consistent: new instances can be missing for a while), means
// gone: terminated when a termination intent exists, lost otherwise.
func DecideGC(inst fsm.Instance, cloud CloudState, terminating bool, now time.Time, grace time.Duration) GCVerdict {
	if inst.State.Terminal() {
		return Keep
	}
	gone := cloud == CloudTerminated || (cloud == CloudNotFound && now.Sub(inst.LaunchedAt) > grace)
	switch {
	case !gone:
		return Keep
	case terminating:
		return Terminated
	}
	return Lost
}
