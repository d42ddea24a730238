package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/test/fixture"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const pricePerCPU = 0.05

// cluster is a hand-written fake of everything the controller talks to:
// the provisioner (Snapshot, LaunchClaims), the informer cache, the API
// writes (NodeClaims, Nodes) and raft (a real in-memory fsm.FSM behind a
// Proposer). Every side effect is appended to ops, in order.
type cluster struct {
	t      *testing.T
	now    time.Time
	fsm    *fsm.FSM
	index  uint64
	pools  []*karpv1.NodePool
	types  []*catalog.InstanceType
	nodes  map[string]*corev1.Node
	claims map[string]*karpv1.NodeClaim // by NodeClaim name
	pods   []*corev1.Pod
	// pending are the view's pending pods.
	pending []*corev1.Pod
	pdbs    []*policyv1.PodDisruptionBudget
	hashes  map[string]string
	ops     []string
	seq     int
	// failures to inject
	launchErr   error
	proposeErr  map[fsm.MessageType]error
	changes     chan struct{}
	launchCalls int
	// launchedType: replacement NodeClaim -> the planned instance type.
	launchedType map[string]string
	// snapshots counts Build calls (read by tests while Run runs).
	snapshots atomic.Int32
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, now: t0, fsm: fsm.New(), nodes: map[string]*corev1.Node{}, claims: map[string]*karpv1.NodeClaim{},
		hashes: map[string]string{}, launchedType: map[string]string{}, proposeErr: map[fsm.MessageType]error{}, changes: make(chan struct{}, 1)}
	c.types = testTypes(16)
	return c
}

func (c *cluster) Now() time.Time { return c.now }

func testTypes(n int) []*catalog.InstanceType {
	return fixture.InstanceTypes(n, func(cpu int64) []catalog.Offering {
		return []catalog.Offering{{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: pricePerCPU * float64(cpu), Available: true}}
	})
}

func testPool(name string) *karpv1.NodePool {
	return fixture.NodePool(name, karpv1.CapacityTypeOnDemand)
}

// testPod is fixture.Pod owned by a ReplicaSet.
func testPod(name, cpu string) *corev1.Pod {
	ctrl := true
	p := fixture.Pod(name, cpu)
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: &ctrl}}
	return p
}

// propose applies a command to the FSM (the Proposer).
func (c *cluster) Propose(_ context.Context, buf []byte) (any, error) {
	t := fsm.MessageType(buf[0])
	if err := c.proposeErr[t]; err != nil {
		return nil, err
	}
	c.index++
	res := c.fsm.ApplyCommand(buf, c.index)
	switch t {
	case fsm.TerminationIntentType:
		c.ops = append(c.ops, "commit "+between(string(buf), `"id":"`, `"`))
	case fsm.TerminationCancelType:
		c.ops = append(c.ops, "cancel "+between(string(buf), `"id":"`, `"`))
	}
	return res, nil
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	return s[:strings.Index(s, b)]
}

func (c *cluster) mustPropose(t fsm.MessageType, cmd any) {
	c.index++
	if err, _ := c.fsm.ApplyCommand(fsm.MustEncode(t, cmd), c.index).(error); err != nil {
		c.t.Fatalf("fsm %d: %v", t, err)
	}
}

// addNode adds a Ready, initialized node of pool with a cpu-vCPU type,
// launched through the FSM (intent, attempt, result, ready).
func (c *cluster) addNode(name, pool string, cpu int64, pods ...*corev1.Pod) *corev1.Node {
	c.seq++
	inst := "i-" + name
	typ := "t-" + strconv.FormatInt(cpu, 10)
	intentID := "intent-" + name
	keys := []string{"boot/" + name}
	for _, p := range pods {
		p.Spec.NodeName = name
		keys = append(keys, p.Namespace+"/"+p.Name)
		c.pods = append(c.pods, p)
	}
	c.mustPropose(fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: intentID, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: pool, NodeClaim: name, NodeClass: "default"}}, Pods: keys}}, At: c.now})
	c.mustPropose(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: intentID, Attempt: 1, At: c.now})
	c.mustPropose(fsm.LaunchResultType, fsm.LaunchResult{IntentID: intentID, Attempt: 1, At: c.now, Launched: &fsm.Launched{InstanceID: inst, InstanceType: typ,
		Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: pricePerCPU * float64(cpu), LaunchedAt: c.now}})
	c.mustPropose(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: inst, State: fsm.InstanceReady, NodeName: name, At: c.now})
	return c.putNode(name, pool, cpu, inst, intentID)
}

// addAdoptedNode adds a Ready, initialized node of pool that Karpenter
// launched: no launch intent, no instance in the FSM, no launch-id
// annotation.
func (c *cluster) addAdoptedNode(name, pool string, cpu int64, pods ...*corev1.Pod) *corev1.Node {
	c.seq++
	for _, p := range pods {
		p.Spec.NodeName = name
		c.pods = append(c.pods, p)
	}
	return c.putNode(name, pool, cpu, "i-"+name, "")
}

// putNode stores the Node and NodeClaim of an instance (launchID "": an
// adopted NodeClaim).
func (c *cluster) putNode(name, pool string, cpu int64, inst, launchID string) *corev1.Node {
	typ := "t-" + strconv.FormatInt(cpu, 10)
	lbl := map[string]string{karpv1.LabelNodePool: pool, karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand, karpv1.LabelInstanceType: typ,
		karpv1.LabelZone: "zone-a", karpv1.LabelHostname: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"}
	alloc := c.types[cpu-1].Capacity
	providerID := "aws:///zone-a/" + inst
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, Annotations: map[string]string{}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	c.nodes[name] = node
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, CreationTimestamp: metav1.NewTime(c.now),
		Annotations: map[string]string{karpv1.AnnotationNodePoolHash: c.hashes[pool], karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}}}
	if launchID != "" {
		nc.Annotations[AnnotationLaunchID] = launchID
	}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = name
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(c.now)}}
	c.claims[name] = nc
	return node
}

// AnnotationLaunchID mirrors karpv1.AnnotationLaunchID.
const AnnotationLaunchID = karpv1.AnnotationLaunchID

// Build builds the cluster view of the fake cluster.
func (c *cluster) Build(time.Time) *view.View {
	defer c.snapshots.Add(1)
	s := &view.View{Now: c.now, NodePools: c.pools,
		NodeClasses:   map[string]*awsv1.EC2NodeClass{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": c.types}, PodsByNode: map[string][]*corev1.Pod{},
		NodeClaims: map[string]*karpv1.NodeClaim{}, Instances: map[string]fsm.Instance{}, Disrupting: map[string]bool{},
		PDBs: c.pdbs, NodePoolHashes: c.hashes, NodeClassHashes: map[string]string{}, Nominated: map[string]string{}, Pending: c.pending}
	terminating := map[string]bool{}
	for _, t := range c.fsm.Terminations() {
		if t.State == fsm.TerminationPending {
			terminating[t.InstanceID] = true
		}
	}
	insts := map[string]fsm.Instance{}
	for _, i := range c.fsm.Instances() {
		insts[i.ID] = i
	}
	for _, p := range c.pods {
		if p.Spec.NodeName != "" {
			s.PodsByNode[p.Spec.NodeName] = append(s.PodsByNode[p.Spec.NodeName], p)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
		node := c.nodes[name]
		s.AllNodes = append(s.AllNodes, node)
		var nc *karpv1.NodeClaim
		for _, cl := range c.claims {
			if cl.Status.ProviderID == node.Spec.ProviderID {
				nc = cl
			}
		}
		if nc != nil {
			s.NodeClaims[name] = nc
		}
		id := cloud.InstanceID(node.Spec.ProviderID)
		if inst, ok := insts[id]; ok {
			s.Instances[name] = inst
		}
		tainted := false
		for _, t := range node.Spec.Taints {
			tainted = tainted || t.Key == karpv1.TaintDisruptedKey
		}
		if tainted || terminating[id] || (nc != nil && nc.DeletionTimestamp != nil) {
			s.Disrupting[name] = true
			continue
		}
		s.Nodes = append(s.Nodes, &scheduler.Node{Name: name, Labels: node.Labels, Taints: node.Spec.Taints, Capacity: node.Status.Capacity,
			Allocatable: node.Status.Allocatable, Pods: s.PodsByNode[name]})
	}
	// Nominations hold for unbound pods and pods on disrupted nodes (the
	// view's holdingNominations, without its times: these tests make no
	// nomination before the disruption it serves).
	s.Nominations = map[string]string{}
	on := map[string]string{}
	for _, p := range c.pods {
		on[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	for k, id := range c.fsm.NominatedPods() {
		if node, known := on[k]; known && (node == "" || s.Disrupting[node]) {
			s.Nominations[k] = id
		}
	}
	return s
}

// LaunchClaims commits the replacements as launch intents and creates
// NodeClaims that are not initialized yet.
func (c *cluster) LaunchClaims(_ context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error) {
	c.launchCalls++
	if c.launchErr != nil {
		return nil, c.launchErr
	}
	cmd := fsm.PlanCommit{At: c.now}
	var names []string
	for _, cl := range claims {
		c.seq++
		name := fmt.Sprintf("%s-r%d", cl.NodePool, c.seq)
		cmd.Intents = append(cmd.Intents, fsm.NewIntent{ID: "intent-" + name, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: cl.NodePool, NodeClaim: name, NodeClass: cl.NodeClass}}, Pods: cl.Pods})
		names = append(names, name)
		c.launchedType[name] = cl.InstanceType
	}
	c.index++
	if err, _ := c.fsm.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, cmd), c.index).(error); err != nil {
		return nil, err
	}
	for i, name := range names {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(c.now),
			Labels: map[string]string{karpv1.LabelNodePool: claims[i].NodePool}}}
		c.claims[name] = nc
		c.ops = append(c.ops, "launch "+name)
	}
	return names, nil
}

// initialize brings a replacement NodeClaim up: instance, Node, condition.
func (c *cluster) initialize(name string) {
	cpu, err := strconv.ParseInt(strings.TrimPrefix(c.launchedType[name], "t-"), 10, 64)
	if err != nil {
		c.t.Fatalf("replacement %s: type %q", name, c.launchedType[name])
	}
	nc := c.claims[name]
	in, _ := c.fsm.Intent("intent-" + name)
	pool := nc.Labels[karpv1.LabelNodePool]
	delete(c.claims, name)
	// Launch through the FSM under the same intent.
	inst := "i-" + name
	c.mustPropose(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: in.ID, Attempt: 1, At: c.now})
	c.mustPropose(fsm.LaunchResultType, fsm.LaunchResult{IntentID: in.ID, Attempt: 1, At: c.now, Launched: &fsm.Launched{InstanceID: inst,
		InstanceType: "t-" + strconv.FormatInt(cpu, 10), Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: pricePerCPU * float64(cpu), LaunchedAt: c.now}})
	c.mustPropose(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: inst, State: fsm.InstanceReady, NodeName: name, At: c.now})
	typ := "t-" + strconv.FormatInt(cpu, 10)
	lbl := map[string]string{karpv1.LabelNodePool: pool, karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand, karpv1.LabelInstanceType: typ,
		karpv1.LabelZone: "zone-a", karpv1.LabelHostname: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"}
	alloc := c.types[cpu-1].Capacity
	providerID := "aws:///zone-a/" + inst
	c.nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, Annotations: map[string]string{}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nc = nc.DeepCopy()
	nc.Labels = lbl
	nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: c.hashes[pool], karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = name
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(c.now)}}
	c.claims[name] = nc
}

// terminate is the termination controller: drain (pods move to dest, or
// vanish), terminate, delete the Node and the NodeClaim.
func (c *cluster) terminate(claim, dest string) {
	nc := c.claims[claim]
	if nc == nil || nc.DeletionTimestamp == nil {
		c.t.Fatalf("terminate %s: not being deleted", claim)
	}
	node := nc.Status.NodeName
	for _, p := range c.pods {
		if p.Spec.NodeName == node {
			p.Spec.NodeName = dest
		}
	}
	c.mustPropose(fsm.TerminationResultType, fsm.TerminationResult{ID: "term-" + cloud.InstanceID(nc.Status.ProviderID), At: c.now})
	delete(c.claims, claim)
	delete(c.nodes, node)
}

// Cache.

func (c *cluster) NodeClaim(name string) *karpv1.NodeClaim { return c.claims[name] }
func (c *cluster) Node(name string) *corev1.Node           { return c.nodes[name] }
func (c *cluster) Pods() []*corev1.Pod                     { return c.pods }
func (c *cluster) Changes() (<-chan struct{}, func())      { return c.changes, func() {} }

// Writer.

var nodeClaimGR = schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}

func (c *cluster) GetNodeClaim(_ context.Context, name string) (*karpv1.NodeClaim, error) {
	nc := c.claims[name]
	if nc == nil {
		return nil, apierrors.NewNotFound(nodeClaimGR, name)
	}
	return nc.DeepCopy(), nil
}

func (c *cluster) UpdateNodeClaim(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return c.updateClaim(nc.Name, func(cur *karpv1.NodeClaim) {
		cur.Annotations, cur.Labels, cur.Finalizers = nc.Annotations, nc.Labels, nc.Finalizers
		c.ops = append(c.ops, "annotate "+nc.Name+" "+nc.Annotations[karpv1.AnnotationDisruptionReason])
	})
}

func (c *cluster) UpdateNodeClaimStatus(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return c.updateClaim(nc.Name, func(cur *karpv1.NodeClaim) { cur.Status = *nc.Status.DeepCopy() })
}

// updateClaim stores a copy of the NodeClaim name changed by set.
func (c *cluster) updateClaim(name string, set func(cur *karpv1.NodeClaim)) (*karpv1.NodeClaim, error) {
	cur := c.claims[name]
	if cur == nil {
		return nil, apierrors.NewNotFound(nodeClaimGR, name)
	}
	cur = cur.DeepCopy()
	set(cur)
	c.claims[name] = cur
	return cur.DeepCopy(), nil
}

func (c *cluster) DeleteNodeClaim(_ context.Context, name string) error {
	nc := c.claims[name]
	if nc == nil {
		return nil
	}
	if nc.DeletionTimestamp == nil {
		nc = nc.DeepCopy()
		now := metav1.NewTime(c.now)
		nc.DeletionTimestamp = &now
		c.claims[name] = nc
		c.ops = append(c.ops, "delete "+name)
	}
	return nil
}

// Nodes.

func (c *cluster) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	n := c.nodes[name]
	if n == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return n.DeepCopy(), nil
}

func (c *cluster) UpdateNode(_ context.Context, n *corev1.Node) (*corev1.Node, error) {
	old := c.nodes[n.Name]
	if old == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, n.Name)
	}
	had, has := hasTaint(old), hasTaint(n)
	switch {
	case has && !had:
		c.ops = append(c.ops, "taint "+n.Name)
	case had && !has:
		c.ops = append(c.ops, "untaint "+n.Name)
	}
	c.nodes[n.Name] = n.DeepCopy()
	return n, nil
}

func hasTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.TaintDisruptedKey {
			return true
		}
	}
	return false
}

// controller builds a Controller on the fake with a recorder, acting on
// decisions at once (no validation delay).
func (c *cluster) controller(rec record.EventRecorder) *Controller {
	return c.controllerWith(Config{ValidationDelay: -1}, rec)
}

func (c *cluster) controllerWith(cfg Config, rec record.EventRecorder) *Controller {
	c.t.Helper()
	cfg.Now = c.Now
	ctl, err := New(cfg, c.deps(nil, rec))
	if err != nil {
		c.t.Fatal(err)
	}
	return ctl
}

func (c *cluster) reconcile(ctl *Controller) {
	c.t.Helper()
	if err := ctl.Reconcile(context.Background()); err != nil {
		c.t.Fatalf("reconcile: %v", err)
	}
}

// pendingTerminations lists the pending termination intent IDs.
func (c *cluster) pendingTerminations() []string {
	var out []string
	for _, t := range c.fsm.Terminations() {
		if t.State == fsm.TerminationPending {
			out = append(out, t.ID)
		}
	}
	sort.Strings(out)
	return out
}

func (c *cluster) takeOps() []string {
	out := c.ops
	c.ops = nil
	return out
}

func condition(nc *karpv1.NodeClaim, typ string) *metav1.Condition {
	return meta.FindStatusCondition(nc.Status.Conditions, typ)
}

var errBoom = errors.New("boom")

// deps wires the fake cluster as every collaborator of the controller.
func (c *cluster) deps(reg prometheus.Registerer, rec record.EventRecorder) Deps {
	return Deps{Views: c, Launcher: c, Cache: c, State: c.fsm, Raft: c, Kube: c, Nodes: c, Registerer: reg, Recorder: rec, Log: zap.NewNop()}
}
