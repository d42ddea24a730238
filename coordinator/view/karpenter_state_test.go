package view

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/internal/podresources"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// The cases in this file port Karpenter v1.14.1's cluster state suite
// (pkg/controllers/state/suite_test.go). Karpenter keeps its cluster state
// up to date event by event; Joiner's view is built from the informer
// cache and the raft state on every pass, so a Karpenter case that feeds
// events in some order becomes the cache (and raft) as they stand after
// them, and where a case reads the state twice, a row per reading. Each
// row names Karpenter's case ("Describe: It"); where the expectation is
// Joiner's own, a comment says why. Not ported, having nothing to check
// in a view rebuilt from the synced cache each pass: "Cluster State Sync",
// "Consolidated State", "Data Races", "Buffer Pod Counts" (CapacityBuffer
// is not implemented), and "Pod Healthy NodePool" and "Pod Ack" (the
// provisioner's scheduling bookkeeping for metrics and registration
// health). "NodePoolState Tracking" is ported in coordinator/static.

// kZone is the zone of every node here.
const kZone = "us-east-1a"

// kRes is a resource list from name/quantity pairs.
func kRes(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// kNode is a Node of the pool general in kZone, its capacity and
// allocatable res; instance names its provider ID ("" for none).
func kNode(name, instance string, res ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "general",
		karpv1.LabelZone: kZone, karpv1.LabelHostname: name}},
		Status: corev1.NodeStatus{Capacity: kRes(res...), Allocatable: kRes(res...)}}
	if instance != "" {
		n.Spec.ProviderID = "aws:///" + kZone + "/" + instance
	}
	return n
}

// kManaged marks a node registered and initialized (a NodeClaim's, as
// lifecycle leaves it).
func kManaged(n *corev1.Node) *corev1.Node {
	n.Labels[karpv1.LabelRegistered], n.Labels[karpv1.LabelInitialized] = "true", "true"
	return n
}

// kClaim is a launched NodeClaim of pool on instance, its capacity and
// allocatable res.
func kClaim(name, pool, instance string, res ...string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool,
		karpv1.LabelZone: kZone, karpv1.LabelInstanceType: "m5.xlarge"}},
		Status: karpv1.NodeClaimStatus{Capacity: kRes(res...), Allocatable: kRes(res...)}}
	if instance != "" {
		nc.Status.ProviderID = "aws:///" + kZone + "/" + instance
	}
	return nc
}

// kPod is an unschedulable pod of a ReplicaSet requesting cpu.
func kPod(name, cpu string) *corev1.Pod {
	p := pendingPod(name)
	p.Spec.Containers[0].Resources.Requests = kRes("cpu", cpu)
	return p
}

// kOn binds p to node, running.
func kOn(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeName, p.Status = node, corev1.PodStatus{Phase: corev1.PodRunning}
	return p
}

func kDeleting(o metav1.Object) {
	at := metav1.NewTime(now.Add(-time.Minute))
	o.SetDeletionTimestamp(&at)
	o.SetFinalizers([]string{karpv1.TerminationFinalizer})
}

// kBuild builds the view at now over c, raft having applied cmds.
func kBuild(t *testing.T, c *fake.Cache, cmds ...[]byte) *View {
	t.Helper()
	return kBuilder(t, c, cmds...).Build(now)
}

func kBuilder(t *testing.T, c *fake.Cache, cmds ...[]byte) *Builder {
	t.Helper()
	if c.PoolList == nil {
		c.PoolList = []*karpv1.NodePool{pool("general")}
	}
	state := fsm.New()
	for i, cmd := range cmds {
		if res := state.ApplyCommand(cmd, uint64(i+1)); res != nil {
			t.Fatalf("raft command %d: %v", i, res)
		}
	}
	return &Builder{Cache: c, State: state, Classes: classes()}
}

// kSpec is the launch of NodeClaim claim of the pool general.
func kSpec(claim string) fsm.LaunchSpec {
	return fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "general", NodeClass: "default", NodeClaim: claim,
		Candidates: []cloud.Candidate{{InstanceType: "m5.xlarge", Zone: kZone, CapacityType: "on-demand"}}},
		Labels: map[string]string{karpv1.LabelNodePool: "general"}}
}

// kLaunch commits intent id for NodeClaim claim holding pods at at; with
// instance, launched on it and, with node, registered and ready there.
func kLaunch(id, claim, instance, node string, at time.Time, pods ...string) [][]byte {
	cmds := [][]byte{fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: at, Intents: []fsm.NewIntent{{ID: id, Spec: kSpec(claim), Pods: pods}}})}
	if instance == "" {
		return cmds
	}
	cmds = append(cmds, fsmtest.LaunchCommands(id, fsm.Launched{InstanceID: instance, InstanceType: "m5.xlarge", Zone: kZone,
		CapacityType: "on-demand", LaunchedAt: at}, at)...)
	if node != "" {
		cmds = append(cmds, fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: instance, State: fsm.InstanceReady,
			NodeName: node, At: at}))
	}
	return cmds
}

func kTerminate(instance string, at time.Time) []byte {
	return fsm.MustEncode(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-" + instance, InstanceID: instance,
		Reason: "Underutilized", At: at})
}

// kViewNode is the view's node (existing or in flight) of that name.
func kViewNode(v *View, name string) *scheduler.Node {
	for _, n := range v.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func kNodeNames(v *View) []string {
	var out []string
	for _, n := range v.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// kRequested sums the requests of a view node's pods that keep selects
// (all when nil), as Karpenter's StateNode.PodRequests and
// DaemonSetRequests.
func kRequested(n *scheduler.Node, keep func(*corev1.Pod) bool) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range n.Pods {
		if keep == nil || keep(p) {
			podresources.Add(out, podresources.Requests(p))
		}
	}
	return out
}

// kSame reports whether got has want's quantity of every resource want
// names (absent counts as zero).
func kSame(got, want corev1.ResourceList) bool {
	for name, q := range want {
		g := got[name]
		if g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func kSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Karpenter's "Node Resource Level", "Node Deletion" and the provider ID
// case: which pods count on which node, which nodes the view has, and
// which it holds as being taken away.
func TestKarpenterStateNodeResources(t *testing.T) {
	type want struct {
		requested map[string]string // view node -> cpu its pods request
		free      map[string]string // view node -> cpu left
		pending   []string
		// disrupting: in AllNodes, giving no capacity.
		disrupting []string
	}
	two := func() (*corev1.Pod, *corev1.Pod) { return kPod("pod-1", "1.5"), kPod("pod-2", "2") }
	for _, tc := range []struct {
		name  string
		cache func() *fake.Cache
		cmds  [][]byte
		want  want
		check func(t *testing.T, v *View)
	}{
		{name: "Node Resource Level: should not count pods not bound to nodes", cache: func() *fake.Cache {
			p1, p2 := two()
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{p1, p2}}
		}, want: want{requested: map[string]string{"n1": "0"}, pending: []string{"pod-1", "pod-2"}}},
		{name: "Node Resource Level: should count new pods bound to nodes (the first bound)", cache: func() *fake.Cache {
			p1, p2 := two()
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{kOn(p1, "n1"), p2}}
		}, want: want{requested: map[string]string{"n1": "1.5"}, pending: []string{"pod-2"}}},
		{name: "Node Resource Level: should count new pods bound to nodes (both bound)", cache: func() *fake.Cache {
			p1, p2 := two()
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{kOn(p1, "n1"), kOn(p2, "n1")}}
		}, want: want{requested: map[string]string{"n1": "3.5"}, free: map[string]string{"n1": "0.5"}}},
		// The view has no "just noticed" node: bound before or after, the
		// pods on it count.
		{name: "Node Resource Level: should count existing pods bound to nodes", cache: func() *fake.Cache {
			p1, p2 := two()
			return &fake.Cache{PodList: []*corev1.Pod{kOn(p1, "n1"), kOn(p2, "n1")}, NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}}
		}, want: want{requested: map[string]string{"n1": "3.5"}}},
		{name: "Node Resource Level: should subtract requests if the pod is deleted (one deleted)", cache: func() *fake.Cache {
			p1, _ := two()
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{kOn(p1, "n1")}}
		}, want: want{requested: map[string]string{"n1": "1.5"}}},
		{name: "Node Resource Level: should subtract requests if the pod is deleted (both deleted)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}}
		}, want: want{requested: map[string]string{"n1": "0"}, free: map[string]string{"n1": "4"}}},
		{name: "Node Resource Level: should not add requests if the pod is terminal", cache: func() *fake.Cache {
			p1, p2 := two()
			kOn(p1, "n1").Status.Phase = corev1.PodFailed
			kOn(p2, "n1").Status.Phase = corev1.PodSucceeded
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{p1, p2}}
		}, want: want{requested: map[string]string{"n1": "0"}}},
		{name: "Node Resource Level: should stop tracking nodes that are deleted (before)", cache: func() *fake.Cache {
			p1, _ := two()
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10")}, PodList: []*corev1.Pod{kOn(p1, "n1")}}
		}, want: want{requested: map[string]string{"n1": "1.5"}, free: map[string]string{"n1": "2.5"}}},
		// The pod bound to the Node that is gone is neither on a node of
		// the view nor pending.
		{name: "Node Resource Level: should stop tracking nodes that are deleted (after)", cache: func() *fake.Cache {
			p1, _ := two()
			return &fake.Cache{PodList: []*corev1.Pod{kOn(p1, "n1")}}
		}, want: want{requested: map[string]string{}}},
		// The pod was deleted and recreated under the same name on n2; the
		// cache has only the new one.
		{name: "Node Resource Level: should track pods correctly if we miss events or they are consolidated", cache: func() *fake.Cache {
			p := kPod("stateful-set-pod", "5")
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "pods", "10"), kNode("n2", "i-2", "cpu", "8", "pods", "10")},
				PodList: []*corev1.Pod{kOn(p, "n2")}}
		}, want: want{requested: map[string]string{"n1": "0", "n2": "5"}, free: map[string]string{"n1": "4", "n2": "3"}}},
		{name: "Node Resource Level: should track daemonset requested resources separately (not bound yet)", cache: func() *fake.Cache {
			p1, _ := two()
			ds := kDaemonSet("ds", "1", "2Gi")
			dsPod := kDaemonPod(ds, "ds-abc", "1", "2Gi", now)
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "memory", "8Gi", "pods", "10")},
				PodList: []*corev1.Pod{kOn(p1, "n1"), dsPod}, DaemonSetList: []*appsv1.DaemonSet{ds}}
		}, want: want{requested: map[string]string{"n1": "1.5"}}, check: func(t *testing.T, v *View) {
			if got := kRequested(kViewNode(v, "n1"), podutil.OwnedByDaemonSet); !kSame(got, kRes("cpu", "0", "memory", "0")) {
				t.Errorf("DaemonSet requests on n1 %v, want none", got)
			}
		}},
		{name: "Node Resource Level: should track daemonset requested resources separately (bound)", cache: func() *fake.Cache {
			p1, _ := two()
			ds := kDaemonSet("ds", "1", "2Gi")
			dsPod := kOn(kDaemonPod(ds, "ds-abc", "1", "2Gi", now), "n1")
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "4", "memory", "8Gi", "pods", "10")},
				PodList: []*corev1.Pod{kOn(p1, "n1"), dsPod}, DaemonSetList: []*appsv1.DaemonSet{ds}}
		}, want: want{requested: map[string]string{"n1": "2.5"}}, check: func(t *testing.T, v *View) {
			n1 := kViewNode(v, "n1")
			if got := kRequested(n1, podutil.OwnedByDaemonSet); !kSame(got, kRes("cpu", "1", "memory", "2Gi")) {
				t.Errorf("DaemonSet requests on n1 %v, want cpu 1, memory 2Gi", got)
			}
			if got := kRequested(n1, nil); !kSame(got, kRes("cpu", "2.5", "memory", "2Gi")) {
				t.Errorf("requests on n1 %v, want cpu 2.5, memory 2Gi", got)
			}
		}},
		{name: "Node Resource Level: should mark node for deletion when node is deleted", cache: func() *fake.Cache {
			n := kNode("n1", "i-1", "cpu", "4", "pods", "10")
			kDeleting(n)
			return &fake.Cache{NodeList: []*corev1.Node{n}}
		}, want: want{requested: map[string]string{}, disrupting: []string{"n1"}}},
		{name: "Node Resource Level: should mark node for deletion when nodeclaim is deleted", cache: func() *fake.Cache {
			nc := kClaim("general-1", "general", "i-1", "cpu", "1", "memory", "30Gi")
			kDeleting(nc)
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "1", "memory", "30Gi"))}, ClaimList: []*karpv1.NodeClaim{nc}}
		}, want: want{requested: map[string]string{}, disrupting: []string{"n1"}}, check: func(t *testing.T, v *View) {
			if v.NodeClaims["n1"] == nil {
				t.Error("the deleting NodeClaim is not paired with its node")
			}
		}},
		{name: "Node Resource Level: should handle a node changing from no providerID to registering a providerID (none yet)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "", "cpu", "4", "pods", "10")},
				ClaimList: []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")}}
		}, want: want{requested: map[string]string{"n1": "0", "general-1": "0"}}, check: func(t *testing.T, v *View) {
			if v.NodeClaims["n1"] != nil || !kViewNode(v, "general-1").InFlight {
				t.Errorf("a node without a provider ID paired with %v; the launched NodeClaim should stay in flight", v.NodeClaims["n1"])
			}
		}},
		{name: "Node Resource Level: should handle a node changing from no providerID to registering a providerID (registered)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))},
				ClaimList: []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")}}
		}, want: want{requested: map[string]string{"n1": "0"}}, check: func(t *testing.T, v *View) {
			if nc := v.NodeClaims["n1"]; nc == nil || nc.Name != "general-1" {
				t.Errorf("n1 paired with %v, want general-1", nc)
			}
		}},
		{name: "Node Deletion: should not leak a state node when the NodeClaim and Node names match (both)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("general-1", "i-1", "cpu", "4", "pods", "10"))},
				ClaimList: []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")}}
		}, want: want{requested: map[string]string{"general-1": "0"}}, check: func(t *testing.T, v *View) {
			if kViewNode(v, "general-1").InFlight {
				t.Error("the registered NodeClaim is also in flight")
			}
		}},
		{name: "Node Deletion: should not leak a state node when the NodeClaim and Node names match (NodeClaim deleted)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("general-1", "i-1", "cpu", "4", "pods", "10"))}}
		}, want: want{requested: map[string]string{"general-1": "0"}}},
		{name: "Node Deletion: should not leak a state node when the NodeClaim and Node names match (Node deleted too)", cache: func() *fake.Cache {
			return &fake.Cache{}
		}, want: want{requested: map[string]string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cache()
			v := kBuild(t, c, tc.cmds...)
			if got, want := kSorted(kNodeNames(v)), kSorted(keysOf(tc.want.requested)); !slices.Equal(got, want) {
				t.Fatalf("view nodes %v, want %v", got, want)
			}
			for name, cpu := range tc.want.requested {
				n := kViewNode(v, name)
				if got := kRequested(n, nil); !kSame(got, kRes("cpu", cpu)) {
					t.Errorf("%s: requests %v, want cpu %s", name, got, cpu)
				}
			}
			for name, cpu := range tc.want.free {
				n := kViewNode(v, name)
				alloc, used := n.Allocatable[corev1.ResourceCPU], kRequested(n, nil)[corev1.ResourceCPU]
				alloc.Sub(used)
				if alloc.Cmp(resource.MustParse(cpu)) != 0 {
					t.Errorf("%s: %s cpu free, want %s", name, alloc.String(), cpu)
				}
			}
			if got := names(v.Pending); !slices.Equal(got, tc.want.pending) {
				t.Errorf("pending %v, want %v", got, tc.want.pending)
			}
			var disrupting []string
			for name := range v.Disrupting {
				disrupting = append(disrupting, name)
			}
			if !slices.Equal(kSorted(disrupting), tc.want.disrupting) {
				t.Errorf("disrupting %v, want %v", disrupting, tc.want.disrupting)
			}
			for _, name := range tc.want.disrupting {
				if !slices.ContainsFunc(v.AllNodes, func(n *corev1.Node) bool { return n.Name == name }) {
					t.Errorf("%s left out of AllNodes", name)
				}
			}
			if tc.check != nil {
				tc.check(t, v)
			}
		})
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Karpenter's "Node Resource Level: should maintain a correct count of
// resource usage as pods are deleted/added", with its random requests
// made deterministic: 100 pods of 0 to 1.9 cpu bound one by one, then
// deleted one by one; each view counts exactly the pods there.
func TestKarpenterStateResourceCountAsPodsComeAndGo(t *testing.T) {
	node := kNode("n1", "i-1", "cpu", "200", "pods", "500")
	var pods []*corev1.Pod
	for i := range 100 {
		pods = append(pods, kOn(kPod(fmt.Sprintf("pod-%03d", i), fmt.Sprintf("%dm", (i*7%20)*100)), "n1"))
	}
	c := &fake.Cache{NodeList: []*corev1.Node{node}}
	b := kBuilder(t, c)
	check := func(bound []*corev1.Pod) {
		t.Helper()
		var cpu int64
		for _, p := range bound {
			cpu += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
		c.PodList = bound
		n1 := kViewNode(b.Build(now), "n1")
		if got := kRequested(n1, nil); got.Cpu().MilliValue() != cpu || len(n1.Pods) != len(bound) {
			t.Fatalf("%d pods bound: %d pods requesting %v, want %d requesting %dm cpu", len(bound), len(n1.Pods), got, len(bound), cpu)
		}
	}
	for i := range pods {
		check(pods[:i+1])
	}
	for i := range pods {
		check(pods[i+1:])
	}
}

// kDaemonSet is a DaemonSet whose template requests cpu and memory.
func kDaemonSet(name, cpu, mem string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: kRes("cpu", cpu, "memory", mem)}}}}}}}
}

// kDaemonPod is a pod ds's controller made at created (pending: the
// DaemonSet controller binds it itself), requesting cpu and memory.
func kDaemonPod(ds *appsv1.DaemonSet, name, cpu, mem string, created time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace, CreationTimestamp: metav1.NewTime(created),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: yes()}}},
		Spec:   *ds.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	p.Spec.Containers[0].Resources.Requests = kRes("cpu", cpu, "memory", mem)
	return p
}

// kNodeNameAffinity is the required node affinity the DaemonSet controller
// gives each of its pods: its node, by name.
func kNodeNameAffinity(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
}

// Karpenter's "DaemonSet Controller" (the cluster state's newest pod per
// DaemonSet) and its provisioner's getDaemonSetPods, which plans a new
// node's DaemonSet overhead with that pod, else with the template, and
// puts the template's required node affinity back on it.
func TestKarpenterStateDaemonSets(t *testing.T) {
	zoneTerm := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: zoneIn(kZone)}}}
	for _, tc := range []struct {
		name string
		// objects: the DaemonSets and pods in the cache.
		objects  func() ([]*appsv1.DaemonSet, []*corev1.Pod)
		cpu      string // the overhead pod's cpu request; "" for no pod
		affinity *corev1.NodeSelector
	}{
		{name: "should not update daemonsetCache when daemonset pod is not present (the template plans)", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			return []*appsv1.DaemonSet{kDaemonSet("ds", "1", "1Gi")}, nil
		}, cpu: "1"},
		// Its pod's requests differ from the template's, as a LimitRange
		// would make them.
		{name: "should update daemonsetCache when daemonset pod is created", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			ds := kDaemonSet("ds", "1", "1Gi")
			return []*appsv1.DaemonSet{ds}, []*corev1.Pod{kOn(kDaemonPod(ds, "ds-a", "2", "1Gi", now.Add(-time.Hour)), "n1")}
		}, cpu: "2"},
		{name: "should update daemonsetCache with the newest created pod", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			ds := kDaemonSet("ds", "1", "1Gi")
			return []*appsv1.DaemonSet{ds}, []*corev1.Pod{kDaemonPod(ds, "ds-new", "3", "1Gi", now.Add(-time.Minute)),
				kDaemonPod(ds, "ds-old", "2", "1Gi", now.Add(-time.Hour))}
		}, cpu: "3"},
		{name: "should delete daemonset in cache when daemonset is deleted", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			ds := kDaemonSet("ds", "1", "1Gi")
			return nil, []*corev1.Pod{kDaemonPod(ds, "ds-a", "2", "1Gi", now)}
		}},
		{name: "should only return daemonset pods from the daemonset cache", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			var others []*corev1.Pod
			for i := range 50 {
				others = append(others, kOn(kPod(fmt.Sprintf("other-%d", i), "4"), "n1"))
			}
			return []*appsv1.DaemonSet{kDaemonSet("ds", "1", "1Gi")}, others
		}, cpu: "1"},
		// Beyond the Its: getDaemonSetPods' affinity, and the owner's UID
		// (metav1.IsControlledBy): a pod of a DaemonSet deleted and
		// created again under the same name is not the new one's.
		{name: "getDaemonSetPods: the template's required node affinity replaces the pod's node name", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			ds := kDaemonSet("ds", "1", "1Gi")
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: zoneTerm}}
			p := kOn(kDaemonPod(ds, "ds-a", "2", "1Gi", now), "n1")
			p.Spec.Affinity = kNodeNameAffinity("n1")
			return []*appsv1.DaemonSet{ds}, []*corev1.Pod{p}
		}, cpu: "2", affinity: zoneTerm},
		{name: "getDaemonSetPods: without one in the template, the pod's node name goes", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			ds := kDaemonSet("ds", "1", "1Gi")
			p := kOn(kDaemonPod(ds, "ds-a", "2", "1Gi", now), "n1")
			p.Spec.Affinity = kNodeNameAffinity("n1")
			return []*appsv1.DaemonSet{ds}, []*corev1.Pod{p}
		}, cpu: "2"},
		{name: "IsControlledBy: a pod of an earlier DaemonSet of the same name does not count", objects: func() ([]*appsv1.DaemonSet, []*corev1.Pod) {
			old, ds := kDaemonSet("ds", "1", "1Gi"), kDaemonSet("ds", "1", "1Gi")
			old.UID = "uid-earlier"
			return []*appsv1.DaemonSet{ds}, []*corev1.Pod{kDaemonPod(old, "ds-a", "2", "1Gi", now)}
		}, cpu: "1"},
	} {
		t.Run("DaemonSet Controller: "+tc.name, func(t *testing.T) {
			sets, pods := tc.objects()
			c := &fake.Cache{NodeList: []*corev1.Node{kNode("n1", "i-1", "cpu", "64", "memory", "64Gi", "pods", "110")}, DaemonSetList: sets, PodList: pods}
			before := make([]*corev1.Pod, len(pods))
			for i, p := range pods {
				before[i] = p.DeepCopy()
			}
			v := kBuild(t, c)
			if tc.cpu == "" {
				if len(v.DaemonSetPods) != 0 {
					t.Fatalf("overhead pods %v, want none", names(v.DaemonSetPods))
				}
				return
			}
			if len(v.DaemonSetPods) != 1 {
				t.Fatalf("overhead pods %v, want one", names(v.DaemonSetPods))
			}
			p := v.DaemonSetPods[0]
			if got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.cpu)) != 0 {
				t.Errorf("overhead cpu %s, want %s", got.String(), tc.cpu)
			}
			if p.Name != "ds" || p.Namespace != "default" || p.Spec.NodeName != "" {
				t.Errorf("overhead pod %s/%s on %q, want default/ds, unbound", p.Namespace, p.Name, p.Spec.NodeName)
			}
			var required *corev1.NodeSelector
			if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			}
			if !reflect.DeepEqual(required, tc.affinity) {
				t.Errorf("required node affinity %v, want %v", required, tc.affinity)
			}
			for i, p := range pods {
				if !reflect.DeepEqual(p, before[i]) {
					t.Errorf("the cached pod %s was modified", p.Name)
				}
			}
			// None of the DaemonSet's pods is pending capacity.
			for _, p := range v.Pending {
				if podutil.OwnedByDaemonSet(p) {
					t.Errorf("DaemonSet pod %s pending", p.Name)
				}
			}
		})
	}
}

// kPlan solves the view's pending pods on its nodes.
func kPlan(v *View) *scheduler.Plan { return scheduler.Solve(v.SchedulerInput(v.Pending, v.Nodes)) }

// kPlacedOn is where the plan puts pod (namespace default): an existing or
// in-flight node's name, "new:<zone>" for a new NodeClaim, "" for nowhere.
func kPlacedOn(plan *scheduler.Plan, pod string) string {
	key := "default/" + pod
	for _, n := range plan.Nominations {
		if n.Pod == key {
			return n.Node
		}
	}
	for _, c := range plan.NodeClaims {
		if slices.Contains(c.Pods, key) {
			return "new:" + c.Zone
		}
	}
	return ""
}

// Karpenter's "Volume Usage/Limits": the volumes of the pods bound to a
// node use up its CSI driver's attach limit; a pod that would attach one
// more does not go there, one that shares a volume already attached does.
func TestKarpenterStateVolumeUsage(t *testing.T) {
	const driver = "fake.csi.provider"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	limit := int32(10)
	for _, tc := range []struct {
		name    string
		claim   bool   // n1 has its NodeClaim
		volume  string // the new pod's claim
		wantOn1 bool
	}{
		{name: "should hydrate the volume usage on a Node update", volume: "new-claim"},
		{name: "should maintain the volume usage state when receiving NodeClaim updates", claim: true, volume: "new-claim"},
		{name: "should ignore the volume usage limits breach if the pod update is for an already tracked pod", claim: true, volume: "claim-5",
			wantOn1: true},
	} {
		t.Run("Volume Usage/Limits: "+tc.name, func(t *testing.T) {
			c := &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "20", "pods", "110"))}}
			if tc.claim {
				c.ClaimList = []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "20", "pods", "110")}
			}
			c.Storage = fake.Storage{StorageClasses: []*storagev1.StorageClass{storageClass("my-storage-class", driver, wffc, []string{kZone})},
				CSINodes: []*storagev1.CSINode{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
					{Name: driver, NodeID: "fake-node-id", Allocatable: &storagev1.VolumeNodeResources{Count: &limit}}}}}}}
			for i := range 10 {
				name := fmt.Sprintf("claim-%d", i)
				c.PVCs = append(c.PVCs, claim(name, "", "my-storage-class", false))
				p := kOn(kPod(fmt.Sprintf("bound-%d", i), "100m"), "n1")
				p.Spec.Volumes = []corev1.Volume{pvcVol("data", name)}
				c.PodList = append(c.PodList, p)
			}
			c.PVCs = append(c.PVCs, claim("new-claim", "", "my-storage-class", false))
			p := kPod("new", "100m")
			p.Spec.Volumes = []corev1.Volume{pvcVol("data", tc.volume)}
			c.PodList = append(c.PodList, p)
			plan := kPlan(kBuild(t, c))
			if on := kPlacedOn(plan, "new"); (on == "n1") != tc.wantOn1 || on == "" {
				t.Fatalf("the new pod goes to %q; want n1 %v (unschedulable: %v)", on, tc.wantOn1, plan.Unschedulable)
			}
		})
	}
}

// Karpenter's "HostPort Usage": the host ports of the pods bound to a node
// are taken there; the pod that holds a port is on the node once, never
// also planned against itself.
func TestKarpenterStateHostPorts(t *testing.T) {
	port := func(p *corev1.Pod, n int32) *corev1.Pod {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: n, HostPort: n, Protocol: corev1.ProtocolTCP}}
		return p
	}
	for _, tc := range []struct {
		name  string
		claim bool
	}{
		{name: "should hydrate the HostPort usage on a Node update"},
		{name: "should maintain the host port usage state when receiving NodeClaim updates", claim: true},
		{name: "should ignore the host port usage conflict if the pod update is for an already tracked pod", claim: true},
	} {
		t.Run("HostPort Usage: "+tc.name, func(t *testing.T) {
			c := &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "20", "pods", "110"))}}
			if tc.claim {
				c.ClaimList = []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "20", "pods", "110")}
			}
			for i := range int32(10) {
				c.PodList = append(c.PodList, port(kOn(kPod(fmt.Sprintf("bound-%d", i), "100m"), "n1"), 8000+i))
			}
			c.PodList = append(c.PodList, port(kPod("conflicting", "100m"), 8005), kPod("free", "100m"))
			v := kBuild(t, c)
			if n := len(kViewNode(v, "n1").Pods); n != 10 {
				t.Fatalf("n1 holds %d pods, want the 10 bound there", n)
			}
			if got := names(v.Pending); !slices.Equal(got, []string{"conflicting", "free"}) {
				t.Fatalf("pending %v: a bound pod is never pending", got)
			}
			plan := kPlan(v)
			if on := kPlacedOn(plan, "conflicting"); on == "n1" || on == "" {
				t.Errorf("the pod asking for port 8005 goes to %q, want a new node", on)
			}
			if on := kPlacedOn(plan, "free"); on != "n1" {
				t.Errorf("a pod without host ports goes to %q, want n1", on)
			}
		})
	}
}

// Karpenter's "Pod Anti-Affinity": a bound pod's required anti-affinity
// keeps the pods it selects out of its zone (kube-scheduler honours it
// both ways); a preferred one does not; a deleted pod, or one whose node
// is gone, keeps nothing out.
func TestKarpenterStateAntiAffinity(t *testing.T) {
	term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}}, TopologyKey: karpv1.LabelZone}
	for _, tc := range []struct {
		name     string
		edit     func(p *corev1.Pod, c *fake.Cache) // the bound pod's
		repelled bool
	}{
		{name: "should track pods with required anti-affinity", edit: func(p *corev1.Pod, _ *fake.Cache) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}, repelled: true},
		{name: "should not track pods with preferred anti-affinity", edit: func(p *corev1.Pod, _ *fake.Cache) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 15, PodAffinityTerm: term}}}}
		}},
		{name: "should stop tracking pods with required anti-affinity if the pod is deleted", edit: func(p *corev1.Pod, c *fake.Cache) {
			c.PodList = slices.DeleteFunc(c.PodList, func(q *corev1.Pod) bool { return q == p })
		}},
		{name: "should handle events out of order", edit: func(p *corev1.Pod, c *fake.Cache) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
			c.NodeList = nil // the node's deletion came before the pod's
		}},
	} {
		t.Run("Pod Anti-Affinity: "+tc.name, func(t *testing.T) {
			holder := kOn(kPod("holder", "1.5"), "n1")
			incoming := kPod("incoming", "1")
			incoming.Labels = map[string]string{"foo": "bar"}
			c := &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))}, PodList: []*corev1.Pod{holder, incoming}}
			tc.edit(holder, c)
			plan := kPlan(kBuild(t, c))
			on := kPlacedOn(plan, "incoming")
			if repelled := on == "n1" || on == "new:"+kZone; repelled == tc.repelled || on == "" {
				t.Fatalf("the pod it selects goes to %q (unschedulable %v); want it kept out of %s: %v", on, plan.Unschedulable, kZone, tc.repelled)
			}
		})
	}
}

// Karpenter's "Taints": the taints a managed node is planned with before
// and after it is initialized, and an unmanaged node's. Karpenter's test
// nodes are not registered, so its NodeClaim's taints (none) stand in for
// the node's; here they are registered, so the node's own are judged, and
// a row holds the unregistered case (StateNode.Taints).
func TestKarpenterStateTaints(t *testing.T) {
	ephemeral := []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: karpv1.TaintCloudProviderUninitializedKey, Effect: corev1.TaintEffectNoSchedule, Value: "true"},
	}
	readiness := []corev1.Taint{{Key: "readiness.k8s.io/some-rule", Effect: corev1.TaintEffectNoSchedule},
		{Key: "readiness.k8s.io/another-rule", Effect: corev1.TaintEffectNoExecute}}
	startup := []corev1.Taint{{Key: "taint-key", Value: "taint-value", Effect: corev1.TaintEffectNoSchedule},
		{Key: "taint-key2", Value: "taint-value2", Effect: corev1.TaintEffectNoExecute}}
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name                     string
		managed                  bool
		registered, initialized  bool
		nodeTaints, claimStartup []corev1.Taint
		claimTaints              []corev1.Taint
		want                     []corev1.Taint
	}{
		{name: "Managed: should not consider ephemeral taints on a managed node that isn't initialized", managed: true, registered: true,
			nodeTaints: ephemeral},
		{name: "Managed: should not consider NodeReadinessController taints on a managed node that isn't initialized", managed: true, registered: true,
			nodeTaints: readiness},
		{name: "Managed: should consider ephemeral taints on a managed node after the node is initialized", managed: true, registered: true,
			initialized: true, nodeTaints: ephemeral, want: ephemeral},
		{name: "Managed: should consider startup taints on a managed node that isn't initialized", managed: true, registered: true,
			nodeTaints: startup, claimStartup: startup},
		{name: "Managed: should consider startup taints on a managed node after the node is initialized", managed: true, registered: true,
			initialized: true, nodeTaints: startup, claimStartup: startup, want: startup},
		{name: "Unmanaged: should consider ephemeral taints on an unmanaged node that isn't initialized", nodeTaints: ephemeral, want: ephemeral},
		{name: "Unmanaged: should consider ephemeral taints on an unmanaged node after the node is initialized", initialized: true,
			nodeTaints: ephemeral, want: ephemeral},
		// StateNode.Taints: before registration the NodeClaim's taints,
		// which registration puts on the node, stand for the node's.
		{name: "Managed, not registered yet: its NodeClaim's taints", managed: true, nodeTaints: append(slices.Clone(ephemeral), startup...),
			claimStartup: startup, claimTaints: []corev1.Taint{dedicated}, want: []corev1.Taint{dedicated}},
		{name: "Managed, registered: the node's own, the NodeClaim's aside", managed: true, registered: true, nodeTaints: append(slices.Clone(ephemeral), startup...),
			claimStartup: startup, claimTaints: []corev1.Taint{dedicated}},
	} {
		t.Run("Taints: "+tc.name, func(t *testing.T) {
			n := kNode("n1", "i-1", "cpu", "4", "pods", "10")
			n.Spec.Taints = slices.Clone(tc.nodeTaints)
			if tc.registered {
				n.Labels[karpv1.LabelRegistered] = "true"
			}
			if tc.initialized {
				n.Labels[karpv1.LabelInitialized] = "true"
			}
			c := &fake.Cache{NodeList: []*corev1.Node{n}}
			if tc.managed {
				nc := kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")
				nc.Spec.StartupTaints, nc.Spec.Taints = tc.claimStartup, tc.claimTaints
				c.ClaimList = []*karpv1.NodeClaim{nc}
			}
			got := kViewNode(kBuild(t, c), "n1").Taints
			if fmt.Sprint(got) != fmt.Sprint(tc.want) && len(got)+len(tc.want) > 0 {
				t.Fatalf("taints %v, want %v", got, tc.want)
			}
			if len(n.Spec.Taints) != len(tc.nodeTaints) {
				t.Fatal("the cached node was modified")
			}
		})
	}
}

// kUsage is each pool's capacity the scheduler counts against its limits:
// every node of the view's Nodes labelled with it, its capacity (else its
// allocatable), and one node each (Karpenter's resources.Node).
func kUsage(v *View) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, n := range v.Nodes {
		pool := n.Labels[karpv1.LabelNodePool]
		if pool == "" {
			continue
		}
		if out[pool] == nil {
			out[pool] = corev1.ResourceList{}
		}
		c := n.Capacity
		if c == nil {
			c = n.Allocatable
		}
		podresources.Add(out[pool], c)
		podresources.Add(out[pool], kRes("nodes", "1"))
	}
	return out
}

// Karpenter's "NodePool Resources" (the cluster state's per-pool resource
// counts, what limits are judged against) and "StateNode Capacity" (each
// node counts as one node): here what the scheduler counts, the view's
// nodes. A NodeClaim Karpenter launched counts with its status until its
// Node registers, then with the Node's capacity (and the NodeClaim's for
// what a Node that is not initialized yet does not report); one being
// deleted, or whose termination is decided, does not count.
func TestKarpenterStateNodePoolResources(t *testing.T) {
	// pools: three pools of three NodeClaims and Nodes of 2, 4 and 6 cpu
	// and Gi (test.NodeClaimsAndNodes copies a NodeClaim's capacity onto
	// its Node, registered, not initialized); the first nodes and claims
	// of each pool are still there.
	pools := func(nodes, claims int) *fake.Cache {
		c := &fake.Cache{}
		for i, size := range []string{"2", "4", "6"} {
			pool := fmt.Sprintf("pool-%d", i+1)
			for j := range 3 {
				name, inst := fmt.Sprintf("%s-%d", pool, j), fmt.Sprintf("i-%d%d", i, j)
				res := []string{"cpu", size, "memory", size + "Gi", "ephemeral-storage", size + "Gi"}
				if j < claims {
					c.ClaimList = append(c.ClaimList, kClaim(name, pool, inst, res...))
				}
				if j < nodes {
					n := kNode(name, inst, res...)
					n.Labels[karpv1.LabelNodePool], n.Labels[karpv1.LabelRegistered] = pool, "true"
					c.NodeList = append(c.NodeList, n)
				}
			}
		}
		return c
	}
	// one: NodeClaim general-1 of claimPool on i-1 of claimCPU cpu and Gi;
	// with nodeCPU, its Node n1 (of nodePool, on nodeInstance), registered.
	type one struct {
		claimPool, claimCPU, nodePool, nodeCPU, nodeInstance string
		claimDeleting, nodeDeleting, initialized, noClaim    bool
	}
	build := func(o one) *fake.Cache {
		c := &fake.Cache{}
		if !o.noClaim {
			nc := kClaim("general-1", o.claimPool, "i-1", "cpu", o.claimCPU, "memory", o.claimCPU+"Gi")
			if o.claimDeleting {
				kDeleting(nc)
			}
			c.ClaimList = []*karpv1.NodeClaim{nc}
		}
		if o.nodeCPU != "" {
			n := kNode("n1", cmp.Or(o.nodeInstance, "i-1"), "cpu", o.nodeCPU, "memory", o.nodeCPU+"Gi")
			n.Labels[karpv1.LabelNodePool], n.Labels[karpv1.LabelRegistered] = cmp.Or(o.nodePool, o.claimPool), "true"
			if o.initialized {
				n.Labels[karpv1.LabelInitialized] = "true"
			}
			if o.nodeDeleting {
				kDeleting(n)
			}
			c.NodeList = []*corev1.Node{n}
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		cache func() *fake.Cache
		cmds  [][]byte
		want  map[string]corev1.ResourceList // per pool; pools absent count nothing
		// limited: with limits.nodes 1 on the pool general, a pod no node
		// has room for gets no new node.
		limited bool
	}{
		{name: "NodePool Resources: should calculate nodepool resources for multiple nodepools", cache: func() *fake.Cache { return pools(3, 3) },
			want: map[string]corev1.ResourceList{"pool-1": kRes("cpu", "6", "memory", "6Gi", "nodes", "3"),
				"pool-2": kRes("cpu", "12", "memory", "12Gi", "nodes", "3"), "pool-3": kRes("cpu", "18", "ephemeral-storage", "18Gi", "nodes", "3")}},
		{name: "NodePool Resources: should calculate nodepool resources for multiple nodepools (a Node of each deleted)",
			cache: func() *fake.Cache { return pools(2, 3) },
			want: map[string]corev1.ResourceList{"pool-1": kRes("cpu", "6", "nodes", "3"), "pool-2": kRes("cpu", "12", "nodes", "3"),
				"pool-3": kRes("cpu", "18", "nodes", "3")}},
		{name: "NodePool Resources: should calculate nodepool resources for multiple nodepools (its NodeClaim deleted too)",
			cache: func() *fake.Cache { return pools(2, 2) },
			want: map[string]corev1.ResourceList{"pool-1": kRes("cpu", "4", "nodes", "2"), "pool-2": kRes("cpu", "8", "nodes", "2"),
				"pool-3": kRes("cpu", "12", "nodes", "2")}},
		{name: "NodePool Resources: should calculate nodepool resources for multiple nodepools (all deleted)",
			cache: func() *fake.Cache { return pools(0, 0) }},
		{name: "NodePool Resources: should update nodepool resources when a node switches from one nodepool to another (NodeClaim relabelled)",
			cache: func() *fake.Cache { return build(one{claimPool: "new", claimCPU: "2", nodePool: "old", nodeCPU: "2"}) },
			want:  map[string]corev1.ResourceList{"old": kRes("cpu", "2", "nodes", "1")}},
		{name: "NodePool Resources: should update nodepool resources when a node switches from one nodepool to another (Node relabelled)",
			cache: func() *fake.Cache { return build(one{claimPool: "new", claimCPU: "2", nodeCPU: "2"}) },
			want:  map[string]corev1.ResourceList{"new": kRes("cpu", "2", "nodes", "1")}},
		// The Node without its NodeClaim and the NodeClaim without its
		// Node both count until they pair up again.
		{name: "NodePool Resources: should update nodepool resources when the node changes providerID (the NodeClaim's changed)",
			cache: func() *fake.Cache {
				return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2", nodeInstance: "i-0"})
			},
			want: map[string]corev1.ResourceList{"p": kRes("cpu", "4", "nodes", "2")}},
		{name: "NodePool Resources: should update nodepool resources when the node changes providerID (the Node's matches again)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2"}) },
			want:  map[string]corev1.ResourceList{"p": kRes("cpu", "2", "nodes", "1")}},
		{name: "NodePool Resources: should handle nodepool resources when node inside of the state node is removed (before)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "1"}) },
			want:  map[string]corev1.ResourceList{"p": kRes("cpu", "1", "memory", "1Gi", "nodes", "1")}},
		{name: "NodePool Resources: should handle nodepool resources when node inside of the state node is removed (Node deleted)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2"}) },
			want:  map[string]corev1.ResourceList{"p": kRes("cpu", "2", "memory", "2Gi", "nodes", "1")}},
		{name: "NodePool Resources: should handle nodepool resources when node inside of the state node is removed (NodeClaim deleted)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "1", noClaim: true}) },
			want:  map[string]corev1.ResourceList{"p": kRes("cpu", "1", "memory", "1Gi", "nodes", "1")}},
		// StateNode.Capacity: what the Node does not report yet comes
		// from its NodeClaim until it is initialized.
		{name: "NodePool Resources: a Node not initialized yet counts its NodeClaim's capacity for what it does not report",
			cache: func() *fake.Cache {
				c := build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2"})
				delete(c.NodeList[0].Status.Capacity, corev1.ResourceMemory)
				c.ClaimList[0].Status.Capacity[kGPU] = resource.MustParse("1")
				return c
			},
			want: map[string]corev1.ResourceList{"p": kRes("cpu", "2", "memory", "2Gi", string(kGPU), "1", "nodes", "1")}},
		{name: "NodePool Resources: should update nodepool resources when node is terminating (deletionTimestamp set)",
			cache: func() *fake.Cache {
				return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2", claimDeleting: true})
			}},
		// Karpenter's MarkForDeletion is a termination intent pending in
		// raft (for a node Karpenter launched, too); UnmarkForDeletion its
		// cancellation.
		{name: "NodePool Resources: should update nodepool resources when node is marked/unmarked for deletion (marked)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2"}) }, cmds: [][]byte{kTerminate("i-1", now)}},
		{name: "NodePool Resources: should update nodepool resources when node is marked/unmarked for deletion (unmarked)",
			cache: func() *fake.Cache { return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2"}) },
			cmds:  [][]byte{kTerminate("i-1", now), fsm.MustEncode(fsm.TerminationCancelType, fsm.TerminationCancel{ID: "term-i-1", At: now})},
			want:  map[string]corev1.ResourceList{"p": kRes("cpu", "2", "nodes", "1")}},
		{name: "NodePool Resources: should not double subtract resources when marking for deletion and then deleting", cache: func() *fake.Cache {
			return build(one{claimPool: "p", claimCPU: "2", nodeCPU: "2", claimDeleting: true, nodeDeleting: true})
		}, cmds: [][]byte{kTerminate("i-1", now)}},
		{name: "StateNode Capacity: should include resources.Node in capacity for an initialized node", cache: func() *fake.Cache {
			return build(one{claimPool: "general", claimCPU: "4", nodeCPU: "4", initialized: true})
		}, want: map[string]corev1.ResourceList{"general": kRes("cpu", "4", "nodes", "1")}, limited: true},
		{name: "StateNode Capacity: should include resources.Node in capacity for a NodeClaim without a Node", cache: func() *fake.Cache {
			return build(one{claimPool: "general", claimCPU: "4"})
		}, want: map[string]corev1.ResourceList{"general": kRes("cpu", "4", "nodes", "1")}, limited: true},
		// The same for a launch of Joiner's: raft's intent, not launched yet.
		{name: "StateNode Capacity: should include resources.Node in capacity for a NodeClaim without a Node (Joiner's launch)",
			cache: func() *fake.Cache { return &fake.Cache{} }, cmds: kLaunch("in1", "general-1", "", "", now),
			want: map[string]corev1.ResourceList{"general": kRes("cpu", "4", "nodes", "1")}, limited: true},
		{name: "StateNode Capacity: should include resources.Node in capacity for uninitialized node with NodeClaim", cache: func() *fake.Cache {
			return build(one{claimPool: "general", claimCPU: "4", nodeCPU: "4"})
		}, want: map[string]corev1.ResourceList{"general": kRes("cpu", "4", "nodes", "1")}, limited: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cache()
			v := kBuild(t, c, tc.cmds...)
			got := kUsage(v)
			if g, w := kSorted(keysOf(got)), kSorted(keysOf(tc.want)); !slices.Equal(g, w) {
				t.Fatalf("pools counting %v (%v), want %v", g, got, w)
			}
			for pool, want := range tc.want {
				if !kSame(got[pool], want) {
					t.Errorf("%s counts %v, want %v", pool, got[pool], want)
				}
			}
			if !tc.limited {
				return
			}
			general := pool("general")
			general.Spec.Limits = karpv1.Limits{karpv1.ResourceNodes: resource.MustParse("1")}
			c.PoolList = []*karpv1.NodePool{general}
			c.PodList = append(c.PodList, kPod("big", "8"))
			plan := kPlan(kBuild(t, c, tc.cmds...))
			if len(plan.NodeClaims) != 0 || kPlacedOn(plan, "big") != "" {
				t.Fatalf("plan %+v: limits.nodes 1 is used up by the one there", plan.NodeClaims)
			}
		})
	}
}

// kGPU is an extended resource a device plugin reports once it runs.
const kGPU = corev1.ResourceName("nvidia.com/gpu")

// Karpenter's "Node Resource Level: should nominate the node until the
// nomination time passes" (its 20 s window is Joiner's NominationGrace,
// set to the same here), and what its cluster state does with a node
// marked for deletion ("should mark node for deletion when nodeclaim is
// deleted", MarkForDeletion): a NodeClaim being deleted, or whose node is
// being disrupted, holds no pods; they are planned again at once. And
// StateNode.Allocatable: a pod waiting on a node that has not reported a
// resource yet keeps its room there.
func TestKarpenterStateNominations(t *testing.T) {
	gpuPod := func() *corev1.Pod {
		p := kPod("waiting", "1")
		p.Spec.Containers[0].Resources.Requests[kGPU] = resource.MustParse("1")
		return p
	}
	for _, tc := range []struct {
		name  string
		cache func() *fake.Cache
		cmds  [][]byte
		// wantOn: the view node the pod stands on ("" none); wantPending:
		// it needs capacity, released for a reason containing wantWhy.
		wantOn, wantNominated string
		wantPending           bool
		wantWhy               string
		wantNodes             []string
	}{
		{name: "should nominate the node until the nomination time passes (10s after it became ready)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))}, PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "n1", now.Add(-10*time.Second), "default/waiting"),
			wantOn: "n1", wantNominated: "in1", wantNodes: []string{"n1"}},
		{name: "should nominate the node until the nomination time passes (21s after)", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))}, PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "n1", now.Add(-21*time.Second), "default/waiting"),
			wantPending: true, wantWhy: "expired", wantNodes: []string{"n1"}},
		{name: "a NodeClaim in flight being deleted holds nothing", cache: func() *fake.Cache {
			nc := kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")
			kDeleting(nc)
			return &fake.Cache{ClaimList: []*karpv1.NodeClaim{nc}, PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "", now, "default/waiting"), wantPending: true, wantWhy: "nodeclaim general-1 is being deleted"},
		{name: "a launch not started whose NodeClaim is deleted holds nothing", cache: func() *fake.Cache {
			nc := kClaim("general-1", "general", "", "cpu", "4", "pods", "10")
			kDeleting(nc)
			return &fake.Cache{ClaimList: []*karpv1.NodeClaim{nc}, PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: kLaunch("in1", "general-1", "", "", now, "default/waiting"), wantPending: true, wantWhy: "nodeclaim general-1 is being deleted"},
		{name: "a registered node whose NodeClaim is deleted holds nothing", cache: func() *fake.Cache {
			nc := kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10")
			kDeleting(nc)
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))}, ClaimList: []*karpv1.NodeClaim{nc},
				PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "n1", now, "default/waiting"), wantPending: true, wantWhy: "node n1 is being disrupted"},
		{name: "a launch whose termination is decided holds nothing", cache: func() *fake.Cache {
			return &fake.Cache{PodList: []*corev1.Pod{kPod("waiting", "1")}}
		}, cmds: append(kLaunch("in1", "general-1", "i-1", "", now, "default/waiting"), kTerminate("i-1", now)), wantPending: true},
		// A replacement (nominated since n1 began to go away) whose NodeClaim
		// is then deleted does not hold n1's pod either (n1 tainted: its
		// disruption went past launching the replacement).
		{name: "a replacement being deleted does not hold a disrupted node's pod", cache: func() *fake.Cache {
			nc := kClaim("general-2", "general", "", "cpu", "4", "pods", "10")
			kDeleting(nc)
			n1 := kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))
			n1.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}}
			return &fake.Cache{NodeList: []*corev1.Node{n1}, ClaimList: []*karpv1.NodeClaim{nc},
				PodList: []*corev1.Pod{kOn(kPod("waiting", "1"), "n1")}}
		}, cmds: slices.Concat(kLaunch("in1", "general-1", "i-1", "n1", now.Add(-time.Hour)), [][]byte{kTerminate("i-1", now.Add(-time.Minute))},
			kLaunch("in2", "general-2", "", "", now, "default/waiting")), wantPending: true, wantWhy: "nodeclaim general-2 is being deleted"},
		{name: "the replacement not being deleted holds it", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))},
				PodList: []*corev1.Pod{kOn(kPod("waiting", "1"), "n1")}}
		}, cmds: slices.Concat(kLaunch("in1", "general-1", "i-1", "n1", now.Add(-time.Hour)), [][]byte{kTerminate("i-1", now.Add(-time.Minute))},
			kLaunch("in2", "general-2", "", "", now, "default/waiting")), wantOn: "general-2", wantNominated: "in2", wantNodes: []string{"general-2"}},
		// StateNode.Allocatable: the node registered before its device
		// plugin reported the GPU; the pod planned for it waits there.
		{name: "a node not initialized yet keeps room for what its NodeClaim has and it does not report yet", cache: func() *fake.Cache {
			n := kNode("n1", "i-1", "cpu", "4", "pods", "10")
			n.Labels[karpv1.LabelRegistered] = "true"
			return &fake.Cache{NodeList: []*corev1.Node{n}, ClaimList: []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10", string(kGPU), "1")},
				PodList: []*corev1.Pod{gpuPod()}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "n1", now, "default/waiting"), wantOn: "n1", wantNominated: "in1", wantNodes: []string{"n1"}},
		{name: "an initialized node is taken at its word", cache: func() *fake.Cache {
			return &fake.Cache{NodeList: []*corev1.Node{kManaged(kNode("n1", "i-1", "cpu", "4", "pods", "10"))},
				ClaimList: []*karpv1.NodeClaim{kClaim("general-1", "general", "i-1", "cpu", "4", "pods", "10", string(kGPU), "1")}, PodList: []*corev1.Pod{gpuPod()}}
		}, cmds: kLaunch("in1", "general-1", "i-1", "n1", now, "default/waiting"), wantPending: true, wantWhy: "no room", wantNodes: []string{"n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := kBuilder(t, tc.cache(), tc.cmds...)
			b.NominationGrace = 20 * time.Second
			v := b.Build(now)
			if got := kNodeNames(v); !slices.Equal(got, tc.wantNodes) {
				t.Errorf("view nodes %v, want %v", got, tc.wantNodes)
			}
			var on []string
			for _, n := range v.Nodes {
				if slices.ContainsFunc(n.Pods, func(p *corev1.Pod) bool { return p.Name == "waiting" }) {
					on = append(on, n.Name)
				}
			}
			if want := []string{tc.wantOn}; tc.wantOn == "" && len(on) > 0 || tc.wantOn != "" && !slices.Equal(on, want) {
				t.Errorf("the pod stands on %v, want %q", on, tc.wantOn)
			}
			if got := v.Nominated["default/waiting"]; got != tc.wantNominated {
				t.Errorf("nominated to %q, want %q", got, tc.wantNominated)
			}
			if pending := v.PendingByKey["default/waiting"] != nil; pending != tc.wantPending {
				t.Errorf("pending %v, want %v", pending, tc.wantPending)
			}
			if why := v.Released["default/waiting"]; tc.wantWhy != "" && !strings.Contains(why, tc.wantWhy) {
				t.Errorf("released because %q, want %q", why, tc.wantWhy)
			}
			// A withdrawn intent no longer says where the pod goes (the
			// disruption controller gives it a replacement of its own).
			if id, ok := v.Nominations["default/waiting"]; strings.Contains(tc.wantWhy, "being") && ok {
				t.Errorf("the pod still counts as nominated to %s", id)
			}
		})
	}
}
