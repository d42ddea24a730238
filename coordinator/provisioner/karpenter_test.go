package provisioner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/observe"
)

// The cases in this file port Karpenter v1.14.1's provisioner suite
// (pkg/controllers/provisioning/suite_test.go) where the provisioner
// itself answers: the NodeClaim it creates (requirements, labels,
// annotations, owner, requests), NodePools it ignores, volume topology
// worked out from the cluster's claims, volumes and storage classes, and
// the minValues policy. The pure scheduling cases are ported in
// coordinator/scheduler (karpenter_suite_test.go and
// karpenter_provisioning_test.go). Each case names Karpenter's; the
// expectations are Karpenter's unless a comment says otherwise.

const (
	kGPUA = fixture.KGPUA
	kGPUB = fixture.KGPUB
)

// kType is one of Karpenter's fake cloud provider's instance types
// (fixture.KarpenterType).
var (
	kType         = fixture.KarpenterType
	kRes          = fixture.KRes
	kLabel        = fixture.KLabel
	kDefaultTypes = fixture.KarpenterDefaultTypes
)

// kPool is Karpenter's test NodePool: no requirements, the default class.
func kPool(name string, opts ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}}}}}
	for _, o := range opts {
		o(np)
	}
	return np
}

func withReqs(rs ...karpv1.NodeSelectorRequirementWithMinValues) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, rs...)
	}
}

func withWeight(w int32) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Weight = &w }
}

func minReq(key string, minValues int, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: karpv1.OpIn, Values: values, MinValues: &minValues}
}

// kprov is a provisioner over Karpenter's fake instance types in zones
// test-zone-1 to -3 (a subnet each), provisioning in rounds as Karpenter's
// ExpectProvisioned does.
type kprov struct {
	t     *testing.T
	c     *fake.Cache
	r     *rig
	cloud *fakeCloud
	seq   int
}

func newKProv(t *testing.T, pools ...*karpv1.NodePool) *kprov {
	t.Helper()
	if len(pools) == 0 {
		pools = []*karpv1.NodePool{kPool("default")}
	}
	return &kprov{t: t, c: &fake.Cache{PoolList: pools, ClassList: []*awsv1.EC2NodeClass{class()}},
		cloud: &fakeCloud{types: kDefaultTypes(), zones: []string{"test-zone-1", "test-zone-2", "test-zone-3"}}}
}

// rig starts the provisioner on the cluster as set up so far (the
// nodeclass loop publishes the types when it starts).
func (k *kprov) rig() *rig {
	if k.r == nil {
		k.r = newTestProvisionerOn(k.t, k.c, k.cloud)
	}
	return k.r
}

// pod is a pending pod with no requests unless opts give some.
func (k *kprov) pod(opts ...func(*corev1.Pod)) *corev1.Pod {
	k.seq++
	p := pendingPod(fmt.Sprintf("p-%03d", k.seq), "0")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
	for _, o := range opts {
		o(p)
	}
	return p
}

// provision adds the pods to the cluster and runs a provisioning pass.
func (k *kprov) provision(pods ...*corev1.Pod) {
	k.t.Helper()
	r := k.rig()
	k.c.PodList = append(k.c.PodList, pods...)
	if err := r.p.Reconcile(context.Background()); err != nil {
		k.t.Fatal(err)
	}
}

// claimOf is the NodeClaim created for p, nil when none.
func (k *kprov) claimOf(p *corev1.Pod) *karpv1.NodeClaim {
	key := p.Namespace + "/" + p.Name
	for _, in := range k.r.state.Intents() {
		if slices.Contains(in.Pods, key) {
			for _, nc := range k.r.w.created {
				if nc.Name == in.Spec.NodeClaim {
					return nc
				}
			}
		}
	}
	return nil
}

func (k *kprov) scheduled(ps ...*corev1.Pod) {
	k.t.Helper()
	for _, p := range ps {
		if k.claimOf(p) == nil {
			k.t.Fatalf("%s has no nodeclaim; %d created", p.Name, len(k.r.w.created))
		}
	}
}

func (k *kprov) notScheduled(ps ...*corev1.Pod) {
	k.t.Helper()
	for _, p := range ps {
		if nc := k.claimOf(p); nc != nil {
			k.t.Fatalf("%s on nodeclaim %s, want it pending", p.Name, nc.Name)
		}
	}
}

// only is the one NodeClaim created.
func (k *kprov) only() *karpv1.NodeClaim {
	k.t.Helper()
	if len(k.r.w.created) != 1 {
		k.t.Fatalf("%d nodeclaims created, want 1", len(k.r.w.created))
	}
	return k.r.w.created[0]
}

// requirement is the claim's requirement on key, nil when it has none.
func requirement(nc *karpv1.NodeClaim, key string) *karpv1.NodeSelectorRequirementWithMinValues {
	for i := range nc.Spec.Requirements {
		if nc.Spec.Requirements[i].Key == key {
			return &nc.Spec.Requirements[i]
		}
	}
	return nil
}

// wantIn: the claim requires key In exactly values (any order).
func (k *kprov) wantIn(nc *karpv1.NodeClaim, key string, values ...string) {
	k.t.Helper()
	r := requirement(nc, key)
	if r == nil || r.Operator != karpv1.OpIn || !slices.Equal(slices.Sorted(slices.Values(r.Values)), slices.Sorted(slices.Values(values))) {
		k.t.Fatalf("requirement on %s: %+v, want In %v\nall: %+v", key, r, values, nc.Spec.Requirements)
	}
}

func withRequests(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := 0; i < len(kv); i += 2 {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

func withSelector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

// withTerms requires one of the node selector terms.
func withTerms(terms ...[]corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
}

func nsr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// Karpenter's provisioner suite: the top-level cases and "NodeClaim
// Creation".
func TestKarpenterProvisionerNodeClaims(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name string
		run  func(k *kprov)
	}{
		{"should provision nodes", func(k *kprov) {
			p := k.pod()
			k.provision(p)
			k.scheduled(p)
			k.only()
		}},
		{"should expect nodeclaim terminationGracePeriod to be the nil when the nodepool terminationGracePeriod and global terminationGracePeriod is not set", func(k *kprov) {
			k.provision(k.pod())
			if tgp := k.only().Spec.TerminationGracePeriod; tgp != nil {
				k.t.Fatalf("terminationGracePeriod %v, want none", tgp)
			}
		}},
		{"should respect terminationGracePeriod value set on the nodePool over global terminationGracePeriod", func(k *kprov) {
			d := karpv1.NewDuration(223 * time.Hour)
			k.c.PoolList[0].Spec.Template.Spec.TerminationGracePeriod = &d
			k.provision(k.pod())
			if tgp := k.only().Spec.TerminationGracePeriod; tgp == nil || tgp.Duration == nil || *tgp.Duration != 223*time.Hour {
				k.t.Fatalf("terminationGracePeriod %v, want 223h", tgp)
			}
		}},
		{"should ignore NodePools that are deleting", func(k *kprov) {
			k.c.PoolList[0].DeletionTimestamp = &metav1.Time{Time: now}
			p := k.pod()
			k.provision(p)
			k.notScheduled(p)
			if len(k.r.w.created) != 0 {
				k.t.Fatalf("%d nodeclaims created from a deleting pool", len(k.r.w.created))
			}
		}},
		// Karpenter's also checks its cluster state's scheduling times and
		// decision metric; Joiner's decision metric is TestSchedulingDecisionMetrics'.
		{"should mark pod as unschedulable if there are no valid nodepools", func(k *kprov) {
			k.c.PoolList[0].DeletionTimestamp = &metav1.Time{Time: now}
			p := k.pod()
			k.provision(p)
			k.notScheduled(p)
			rec := k.r.deps.Recorder.(*record.FakeRecorder)
			found := false
			for len(rec.Events) > 0 {
				found = found || strings.Contains(<-rec.Events, "FailedScheduling")
			}
			if !found {
				k.t.Fatal("no FailedScheduling event for the pod")
			}
		}},
		{"should not use a different NodePool hash on the NodeClaim if the NodePool changes during scheduling", func(k *kprov) {
			r := k.rig()
			defaulted := k.c.PoolList[0].DeepCopy()
			defaulted.SetDefaults()
			hash := defaulted.Hash()
			p := k.pod()
			k.c.PodList = append(k.c.PodList, p)
			v := r.views.Build(now)
			plan := scheduler.Solve(v.SchedulerInput(v.Pending, v.Nodes))
			changed := k.c.PoolList[0].DeepCopy()
			changed.Spec.Template.ObjectMeta.Labels = map[string]string{"new-label": "new-value"}
			if changed.SetDefaults(); changed.Hash() == hash {
				k.t.Fatal("the label does not change the pool's hash")
			}
			k.c.PoolList[0] = changed
			if _, err := r.p.launch(context.Background(), v, plan.NodeClaims, "provisioned"); err != nil {
				k.t.Fatal(err)
			}
			nc := k.only()
			if got := nc.Annotations[karpv1.AnnotationNodePoolHash]; got != hash {
				k.t.Fatalf("nodepool hash %q, want %q (the pool as planned)", got, hash)
			}
			if _, ok := nc.Labels["new-label"]; ok {
				k.t.Fatal("the claim has the label of the pool changed after planning")
			}
			k.scheduled(p)
		}},
		{"should schedule all pods on one inflight node when node is in deleting state", func(k *kprov) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &metav1.Time{Time: now}, Finalizers: []string{karpv1.TerminationFinalizer},
				Labels: map[string]string{karpv1.LabelNodePool: "default", karpv1.LabelInstanceType: "default-instance-type", karpv1.LabelHostname: "old"}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi"),
					corev1.ResourcePods: resource.MustParse("5")}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			k.c.NodeList = append(k.c.NodeList, node)
			var bound []*corev1.Pod
			for range 3 {
				p := k.pod()
				p.Spec.NodeName, p.Status.Conditions = "old", nil
				p.Status.Phase = corev1.PodRunning
				bound = append(bound, p)
			}
			k.c.PodList = append(k.c.PodList, bound...)
			a, b := k.pod(), k.pod()
			k.provision(a, b)
			nc := k.only()
			for _, p := range append(bound, a, b) {
				if got := k.claimOf(p); got != nc {
					k.t.Fatalf("%s on %v, want every pod on the one new nodeclaim %s", p.Name, got, nc.Name)
				}
			}
			for pod, node := range k.r.state.NominatedPods() {
				if node == "old" {
					k.t.Fatalf("%s nominated to the deleting node", pod)
				}
			}
		}},
		// NodeClaim Creation
		{"should create a nodeclaim request with expected requirements", func(k *kprov) {
			k.provision(k.pod())
			nc := k.only()
			k.wantIn(nc, karpv1.LabelInstanceType, "default-instance-type", "small-instance-type", "gpu-vendor-instance-type",
				"gpu-vendor-b-instance-type", "arm-instance-type", "single-pod-instance-type")
			k.wantIn(nc, karpv1.LabelNodePool, "default")
		}},
		{"should create a nodeclaim request with additional expected requirements", func(k *kprov) {
			withReqs(req("custom-requirement-key", "In", "value"), req("custom-requirement-key2", "In", "value"))(k.c.PoolList[0])
			k.provision(k.pod())
			nc := k.only()
			k.wantIn(nc, karpv1.LabelNodePool, "default")
			k.wantIn(nc, "custom-requirement-key", "value")
			k.wantIn(nc, "custom-requirement-key2", "value")
			if len(requirement(nc, karpv1.LabelInstanceType).Values) != 6 {
				k.t.Fatalf("instance types %v, want all six", requirement(nc, karpv1.LabelInstanceType).Values)
			}
		}},
		{"should create a nodeclaim request restricting instance types on architecture", func(k *kprov) {
			withReqs(req(karpv1.LabelArch, "In", "arm64"))(k.c.PoolList[0])
			k.provision(k.pod())
			nc := k.only()
			k.wantIn(nc, karpv1.LabelArch, "arm64")
			k.wantIn(nc, karpv1.LabelInstanceType, "arm-instance-type")
		}},
		// Karpenter's fake arm type runs ios among other systems; Joiner's
		// types run one system each, so a windows type stands in.
		{"should create a nodeclaim request restricting instance types on operating system", func(k *kprov) {
			k.cloud.types = append(k.cloud.types, kType("windows-instance-type", "16", "128Gi", kLabel(karpv1.LabelOS, "windows")))
			withReqs(req(karpv1.LabelOS, "In", "windows"))(k.c.PoolList[0])
			k.provision(k.pod())
			nc := k.only()
			k.wantIn(nc, karpv1.LabelOS, "windows")
			k.wantIn(nc, karpv1.LabelInstanceType, "windows-instance-type")
		}},
		{"should create a nodeclaim request restricting instance types based on pod resource requests", func(k *kprov) {
			k.provision(k.pod(withRequests(string(kGPUA), "1")))
			k.wantIn(k.only(), karpv1.LabelInstanceType, "gpu-vendor-instance-type")
		}},
		{"should create a nodeclaim request with the correct owner reference", func(k *kprov) {
			k.provision(k.pod())
			want := metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", UID: "uid-default", BlockOwnerDeletion: &yes}
			if got := k.only().OwnerReferences; len(got) != 1 || got[0].String() != want.String() {
				k.t.Fatalf("owner references %v, want %v", got, want)
			}
		}},
		// Karpenter's uses a test node class kind; Joiner's pools name an
		// EC2NodeClass.
		{"should create a nodeclaim request propagating the nodeClass reference", func(k *kprov) {
			k.provision(k.pod())
			want := karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
			if got := k.only().Spec.NodeClassRef; got == nil || *got != want {
				k.t.Fatalf("nodeClassRef %v, want %v", got, want)
			}
		}},
		{"should create a nodeclaim with resource requests", func(k *kprov) {
			k.provision(k.pod(withRequests("cpu", "1", "memory", "1Mi", string(kGPUA), "1")))
			wantRequests(k, k.only(), "cpu", "1", "memory", "1Mi", string(kGPUA), "1", "pods", "1")
		}},
		{"should create a nodeclaim with resource requests with daemon overhead", func(k *kprov) {
			k.c.DaemonSetList = []*appsv1.DaemonSet{daemonSet("ds", withRequests("cpu", "1", "memory", "1Mi"))}
			k.provision(k.pod(withRequests("cpu", "1", "memory", "1Mi")))
			wantRequests(k, k.only(), "cpu", "2", "memory", "2Mi", "pods", "2")
		}},
		{"should not double-count daemon overhead when multiple pods are scheduled to the same nodeclaim", func(k *kprov) {
			k.c.DaemonSetList = []*appsv1.DaemonSet{daemonSet("ds", withRequests("cpu", "1", "memory", "1Mi"))}
			a, b := k.pod(withRequests("cpu", "1", "memory", "1Mi")), k.pod(withRequests("cpu", "1", "memory", "1Mi"))
			k.provision(a, b)
			wantRequests(k, k.only(), "cpu", "3", "memory", "3Mi", "pods", "3")
		}},
		// Annotations
		{"should annotate nodes", func(k *kprov) {
			k.c.PoolList[0].Spec.Template.ObjectMeta.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
			k.provision(k.pod())
			if got := k.only().Annotations[karpv1.AnnotationDoNotDisrupt]; got != "true" {
				k.t.Fatalf("do-not-disrupt annotation %q, want true", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(newKProv(t)) })
	}
}

// wantRequests: the claim requests exactly these resources.
func wantRequests(k *kprov, nc *karpv1.NodeClaim, kv ...string) {
	k.t.Helper()
	want := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		want[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	got := nc.Spec.Resources.Requests
	ok := len(got) == len(want)
	for name, q := range want {
		g, has := got[name]
		ok = ok && has && g.Cmp(q) == 0
	}
	if !ok {
		k.t.Fatalf("requests %v, want %v", got, want)
	}
}

// daemonSet is a DaemonSet whose pod template opts shape.
func daemonSet(name string, opts ...func(*corev1.Pod)) *appsv1.DaemonSet {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}}}
	for _, o := range opts {
		o(p)
	}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}}}
}

// Karpenter's provisioner suite: "Labels".
func TestKarpenterProvisionerLabels(t *testing.T) {
	t.Run("should label nodes", func(t *testing.T) {
		k := newKProv(t, kPool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"test-key-1": "test-value-1"}
		}, withReqs(req("test-key-2", "In", "test-value-2"), req("test-key-3", "NotIn", "test-value-3"), req("test-key-4", "Lt", "4"),
			req("test-key-5", "Gt", "5"), req("test-key-6", "Exists"), req("test-key-7", "DoesNotExist"))))
		k.provision(k.pod())
		l := k.only().Labels
		if l[karpv1.LabelNodePool] != "default" || l["test-key-1"] != "test-value-1" || l["test-key-2"] != "test-value-2" {
			t.Fatalf("labels %v", l)
		}
		for key, not := range map[string]string{"test-key-3": "test-value-3", "test-key-4": "test-value-4", "test-key-5": "test-value-5", "test-key-6": ""} {
			if v, ok := l[key]; !ok || v == not {
				t.Fatalf("label %s=%q (set %v), want set and not %q", key, v, ok, not)
			}
		}
		if n, err := strconv.Atoi(l["test-key-4"]); err != nil || n >= 4 {
			t.Fatalf("test-key-4=%q, want an integer below 4", l["test-key-4"])
		}
		if n, err := strconv.Atoi(l["test-key-5"]); err != nil || n <= 5 {
			t.Fatalf("test-key-5=%q, want an integer above 5", l["test-key-5"])
		}
		if _, ok := l["test-key-7"]; ok {
			t.Fatal("test-key-7 is set, want absent")
		}
	})
	for _, tc := range []struct{ name, key string }{
		{"should label nodes with labels in the kubernetes domains", "kubernetes.io/test"},
		{"should label nodes with labels in the kubernetes domains", "k8s.io/test"},
		{"should label nodes with labels in the subdomain from kubernetes domains", "subdomain.kubernetes.io/test"},
		{"should label nodes with labels in the subdomain from kubernetes domains", "subdomain.k8s.io/test"},
	} {
		t.Run(tc.name+" "+tc.key, func(t *testing.T) {
			k := newKProv(t, kPool("default", func(np *karpv1.NodePool) {
				np.Spec.Template.ObjectMeta.Labels = map[string]string{tc.key: "test-value"}
			}))
			p := k.pod(withTerms([]corev1.NodeSelectorRequirement{nsr(tc.key, corev1.NodeSelectorOpIn, "test-value")}))
			k.provision(p)
			k.scheduled(p)
			if got := k.only().Labels[tc.key]; got != "test-value" {
				t.Fatalf("%s=%q, want test-value", tc.key, got)
			}
		})
	}
	t.Run("should not label nodes with well-known labels from requirements", func(t *testing.T) {
		k := newKProv(t, kPool("default", withReqs(req("foo", "In", "bar"), req(corev1.LabelWindowsBuild, "NotIn", "test-value"))))
		k.provision(k.pod())
		l := k.only().Labels
		if l["foo"] != "bar" || l[corev1.LabelWindowsBuild] == "test-value" {
			t.Fatalf("labels %v: want foo=bar and no %s=test-value", l, corev1.LabelWindowsBuild)
		}
	})
}

// Karpenter's provisioner suite: "Daemonsets" cases on the DaemonSet's
// own pods (the scheduler's DaemonSet cases are in coordinator/scheduler).
// Karpenter plans a DaemonSet's overhead from its newest pod when it has
// one (a LimitRange may have changed its requests), with the template's
// required node affinity in place of the pod's (the DaemonSet controller
// pins each pod to its node by name).
func TestKarpenterDaemonSetPods(t *testing.T) {
	dsPod := func(k *kprov, ds *appsv1.DaemonSet, opts ...func(*corev1.Pod)) *corev1.Pod {
		p := k.pod(opts...)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr(true)}}
		return p
	}
	for _, tc := range []struct {
		name string
		run  func(k *kprov, p *corev1.Pod)
	}{
		{"should account for overhead using daemonset pod spec instead of daemonset spec", func(k *kprov, p *corev1.Pod) {
			ds := daemonSet("ds", withRequests("cpu", "4", "memory", "4Gi"))
			k.c.DaemonSetList = []*appsv1.DaemonSet{ds}
			k.c.PodList = append(k.c.PodList, dsPod(k, ds, withRequests("cpu", "2", "memory", "2Gi")))
			p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "default"}
		}},
		{"should remove daemonset node hostname affinity when considering daemonset schedulability", func(k *kprov, p *corev1.Pod) {
			k.c.PoolList[0].Spec.Template.ObjectMeta.Labels = map[string]string{"foo": "bar"}
			ds := daemonSet("ds", withRequests("cpu", "4", "memory", "4Gi"), withTerms([]corev1.NodeSelectorRequirement{nsr("foo", corev1.NodeSelectorOpIn, "bar")}))
			k.c.DaemonSetList = []*appsv1.DaemonSet{ds}
			k.c.PodList = append(k.c.PodList, dsPod(k, ds, withRequests("cpu", "2", "memory", "2Gi"),
				withTerms([]corev1.NodeSelectorRequirement{nsr(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node-name")})))
			p.Spec.NodeSelector = map[string]string{"foo": "bar"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKProv(t)
			p := k.pod(withRequests("cpu", "1", "memory", "1Gi"))
			tc.run(k, p)
			k.provision(p)
			k.scheduled(p)
			// 4 cpu and 4Gi (a default-sized type) hold the pod beside the
			// DaemonSet's pod; its template's 4 cpu would need the 16-cpu
			// type. Karpenter launches the cheapest type, the first
			// candidate of the launch.
			launched := ""
			for _, in := range k.r.state.Intents() {
				if slices.Contains(in.Pods, p.Namespace+"/"+p.Name) && len(in.Spec.Candidates) > 0 {
					launched = in.Spec.Candidates[0].InstanceType
				}
			}
			var capacity corev1.ResourceList
			for _, it := range kDefaultTypes() {
				if it.Name == launched {
					capacity = it.Capacity
				}
			}
			if capacity.Cpu().Cmp(resource.MustParse("4")) != 0 || capacity.Memory().Cmp(resource.MustParse("4Gi")) != 0 {
				t.Fatalf("launches %q (%v), want a type of 4 cpu and 4Gi; candidates %+v", launched, capacity,
					requirement(k.claimOf(p), karpv1.LabelInstanceType))
			}
		})
	}
}

// Karpenter's provisioner suite: "Volume Topology Requirements". The
// storage class of its BeforeEach allows test-zone-2 and -3 and binds on
// first consumer.
func TestKarpenterVolumeTopology(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := func(name string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "test-provisioner", VolumeBindingMode: &wffc,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
				{Key: karpv1.LabelZone, Values: []string{"test-zone-2", "test-zone-3"}}}}}}
	}
	pvc := func(name, volume string, class *string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}}
		if volume != "" { // Karpenter's test claims bound to a volume are marked bind-completed
			c.Annotations = map[string]string{karpv1.AnnotationBindCompleted: "yes"}
		}
		return c
	}
	// pv is a CSI volume; with zones, held to them; with host, to that
	// node (by hostname); local makes it a local or hostPath volume.
	pv := func(name, class, host, local string, zones ...string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{StorageClassName: class}}
		switch local {
		case "local":
			v.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/local"}
		case "hostPath":
			v.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/mnt/host"}
		default:
			v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "test-driver", VolumeHandle: name}
		}
		var term []corev1.NodeSelectorRequirement
		if len(zones) > 0 {
			term = append(term, nsr(karpv1.LabelZone, corev1.NodeSelectorOpIn, zones...))
		}
		if host != "" {
			term = append(term, nsr(karpv1.LabelHostname, corev1.NodeSelectorOpIn, host))
		}
		if term != nil {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: term}}}}
		}
		return v
	}
	claimVol := func(claim string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "vol-" + claim,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
	}
	// ephemeral gives the pod a generic ephemeral volume "data": its claim
	// is <pod>-data.
	ephemeral := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	}
	zones := func(zs ...string) func(*corev1.Pod) {
		return withTerms([]corev1.NodeSelectorRequirement{nsr(karpv1.LabelZone, corev1.NodeSelectorOpIn, zs...)})
	}
	str := func(s string) *string { return &s }
	const myClass = "my-storage-class"
	for _, tc := range []struct {
		name string
		// setup adds storage objects and returns the pod's options; the
		// pod's name is given for ephemeral claims.
		setup func(st *fake.Storage, pod string) []func(*corev1.Pod)
		zone  string // the node's zone; "" any; "-" not scheduled
		// ignored: karpenter_scheduler_ignored_pods_count counts the pod
		ignored bool
	}{
		{"should not schedule if invalid pvc", func(*fake.Storage, string) []func(*corev1.Pod) {
			return []func(*corev1.Pod){claimVol("invalid")}
		}, "-", true},
		{"should schedule with an empty storage class if the pvc is bound", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "test-volume", str("")))
			st.PVs = append(st.PVs, pv("test-volume", "", "", ""))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "", false},
		{"should not schedule with an empty storage class if the pvc is not bound", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "", str("")))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "-", false},
		{"should schedule with a missing storage class if the pvc is bound", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "test-volume", str("missing-storage-class")))
			st.PVs = append(st.PVs, pv("test-volume", "missing-storage-class", "", ""))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "", false},
		{"should not schedule with a missing storage class if the pvc is not bound", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "", str("missing-storage-class")))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "-", false},
		{"should schedule to storage class zones if volume does not exist", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "", str(myClass)))
			return []func(*corev1.Pod){claimVol("claim"), zones("test-zone-1", "test-zone-3")}
		}, "test-zone-3", false},
		{"should schedule to storage class zones if volume does not exist (ephemeral volume)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "", str(myClass)))
			return []func(*corev1.Pod){ephemeral, zones("test-zone-1", "test-zone-3")}
		}, "test-zone-3", false},
		{"should not schedule if storage class zones are incompatible", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "", str(myClass)))
			return []func(*corev1.Pod){claimVol("claim"), zones("test-zone-1")}
		}, "-", false},
		{"should not schedule if storage class zones are incompatible (ephemeral volume)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "", str(myClass)))
			return []func(*corev1.Pod){ephemeral, zones("test-zone-1")}
		}, "-", false},
		{"should schedule to volume zones if volume already bound", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "", "", "test-zone-3"))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "test-zone-3", false},
		{"should schedule to volume zones if volume already bound (ephemeral volume)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "", "", "test-zone-3"))
			return []func(*corev1.Pod){ephemeral}
		}, "test-zone-3", false},
		{"should ignore hostname affinity scheduling when using local path volumes (local)", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.StorageClasses = append(st.StorageClasses, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "kubernetes.io/no-provisioner"})
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str("local-path")))
			st.PVs = append(st.PVs, pv("pv", "local-path", "some-node", "local"))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "", false},
		{"should ignore hostname affinity scheduling when using local path volumes (hostPath)", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.StorageClasses = append(st.StorageClasses, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "kubernetes.io/no-provisioner"})
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str("local-path")))
			st.PVs = append(st.PVs, pv("pv", "local-path", "some-node", "hostPath"))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "", false},
		{"should ignore hostname affinity scheduling when using local path volumes (ephemeral volume, local)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.StorageClasses = append(st.StorageClasses, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "kubernetes.io/no-provisioner"})
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "pv", str("local-path")))
			st.PVs = append(st.PVs, pv("pv", "local-path", "some-node", "local"))
			return []func(*corev1.Pod){ephemeral}
		}, "", false},
		{"should ignore hostname affinity scheduling when using local path volumes (ephemeral volume, hostPath)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.StorageClasses = append(st.StorageClasses, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "kubernetes.io/no-provisioner"})
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "pv", str("local-path")))
			st.PVs = append(st.PVs, pv("pv", "local-path", "some-node", "hostPath"))
			return []func(*corev1.Pod){ephemeral}
		}, "", false},
		{"should not ignore hostname affinity when using non-local path volumes", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "some-node", ""))
			return []func(*corev1.Pod){claimVol("claim")}
		}, "-", false},
		{"should not schedule if volume zones are incompatible", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "", "", "test-zone-3"))
			return []func(*corev1.Pod){claimVol("claim"), zones("test-zone-1")}
		}, "-", false},
		{"should not schedule if volume zones are incompatible (ephemeral volume)", func(st *fake.Storage, pod string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc(pod+"-data", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "", "", "test-zone-3"))
			return []func(*corev1.Pod){ephemeral, zones("test-zone-1")}
		}, "-", false},
		// The pod's two required terms are alternatives: the volume's zone
		// holds under each, so relaxing the first term away keeps it.
		{"should not relax an added volume topology zone node-selector away", func(st *fake.Storage, _ string) []func(*corev1.Pod) {
			st.PVCs = append(st.PVCs, pvc("claim", "pv", str(myClass)))
			st.PVs = append(st.PVs, pv("pv", myClass, "", "", "test-zone-3"))
			return []func(*corev1.Pod){claimVol("claim"), withTerms([]corev1.NodeSelectorRequirement{nsr("example.com/label", corev1.NodeSelectorOpIn, "unsupported")},
				[]corev1.NodeSelectorRequirement{nsr(karpv1.LabelCapacityType, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)})}
		}, "test-zone-3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKProv(t)
			k.c.Storage.StorageClasses = []*storagev1.StorageClass{sc(myClass)}
			reg := prometheus.NewRegistry()
			m, err := newMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			k.rig().p.metrics = m
			name := fmt.Sprintf("p-%03d", k.seq+1)
			p := k.pod(tc.setup(&k.c.Storage, name)...)
			k.provision(p)
			if tc.ignored {
				if v, ok := observe.Sample(t, reg, "karpenter_scheduler_ignored_pods_count", nil); !ok || v != 1 {
					t.Fatalf("ignored pods %v (%v), want 1", v, ok)
				}
			}
			if tc.zone == "-" {
				k.notScheduled(p)
				return
			}
			k.scheduled(p)
			if tc.zone != "" {
				k.wantIn(k.claimOf(p), karpv1.LabelZone, tc.zone)
			}
		})
	}
	// A pod whose claim cannot be used yet does not hold up the others.
	for _, tc := range []struct {
		name  string
		setup func(st *fake.Storage)
	}{
		{"should schedule valid pods when a pod with an invalid pvc is encountered (pvc)", func(*fake.Storage) {}},
		{"should schedule valid pods when a pod with an invalid pvc is encountered (storage class)", func(st *fake.Storage) {
			st.PVCs = append(st.PVCs, pvc("invalid", "", str("invalid-storage-class")))
		}},
		{"should schedule valid pods when a pod with an invalid pvc is encountered (volume name)", func(st *fake.Storage) {
			st.PVCs = append(st.PVCs, pvc("invalid", "invalid-volume-name", nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKProv(t)
			tc.setup(&k.c.Storage)
			invalid := k.pod(claimVol("invalid"))
			k.provision(invalid)
			valid := k.pod()
			k.provision(valid)
			k.notScheduled(invalid)
			k.scheduled(valid)
		})
	}
}

// Karpenter's scheduling suite, "VolumeUsage", through the cluster view:
// the claim's volume is counted once per node however many pods use it.
func TestKarpenterVolumeUsageThroughTheView(t *testing.T) {
	const driver = "fake.csi.provider"
	limited := func(k *kprov, count int32) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.LabelNodePool: "default",
			karpv1.LabelInstanceType: "big", karpv1.LabelZone: "test-zone-1", karpv1.LabelHostname: "n1", karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1024"), corev1.ResourceMemory: resource.MustParse("1Ti"),
				corev1.ResourcePods: resource.MustParse("1024")}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		k.c.NodeList = append(k.c.NodeList, n)
		k.c.Storage.CSINodes = append(k.c.Storage.CSINodes, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: "n1", Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}})
	}
	claims := func(k *kprov, p *corev1.Pod, names ...string) {
		for i, c := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
	}
	bound := func(k *kprov, claim string, src corev1.PersistentVolumeSource, class string) {
		k.c.Storage.PVs = append(k.c.Storage.PVs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: claim + "-pv"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src, StorageClassName: class}})
		k.c.Storage.PVCs = append(k.c.Storage.PVCs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default",
			Annotations: map[string]string{karpv1.AnnotationBindCompleted: "yes"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: claim + "-pv", StorageClassName: &class}})
	}
	// plan is the plan of a pass over the pods: how many go to n1, how
	// many new claims it makes.
	plan := func(k *kprov, ps []*corev1.Pod) (onN1, claims int) {
		k.c.PodList = append(k.c.PodList, ps...)
		v := k.rig().views.Build(now)
		p := scheduler.Solve(v.SchedulerInput(v.Pending, v.Nodes))
		for _, nm := range p.Nominations {
			if nm.Node == "n1" {
				onN1++
			}
		}
		return onN1, len(p.NodeClaims)
	}
	t.Run("should launch a single node if all pods use the same PVC", func(t *testing.T) {
		k := newKProv(t)
		limited(k, 10)
		bound(k, "my-claim", corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h"}}, "my-storage-class")
		var ps []*corev1.Pod
		for range 100 {
			p := k.pod()
			claims(k, p, "my-claim")
			ps = append(ps, p)
		}
		if n, claims := plan(k, ps); n != 100 || claims != 0 {
			t.Fatalf("%d pods on n1, %d nodeclaims; want all 100 on n1 (one volume attached)", n, claims)
		}
	})
	t.Run("should not fail for NFS volumes", func(t *testing.T) {
		k := newKProv(t)
		limited(k, 10)
		bound(k, "my-claim", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "fake.server", Path: "/some/path"}}, "")
		var ps []*corev1.Pod
		for range 5 {
			p := k.pod()
			claims(k, p, "my-claim", "my-claim")
			ps = append(ps, p)
		}
		if n, claims := plan(k, ps); n != 5 || claims != 0 {
			t.Fatalf("%d pods on n1, %d nodeclaims; want all 5 on n1", n, claims)
		}
	})
}

// Karpenter's provisioner suite: "MinValuesPolicy". Two arm64 types of 4
// cpu and 4Gi, spot only, at 0.52 each.
func TestKarpenterMinValuesPolicy(t *testing.T) {
	const it = karpv1.LabelInstanceType
	spotIn := func(offers ...string) func(*catalog.InstanceType) {
		return func(t *catalog.InstanceType) {
			t.Offerings = nil
			for i := 0; i < len(offers); i += 2 {
				price, _ := strconv.ParseFloat(offers[i+1], 64)
				t.Offerings = append(t.Offerings, catalog.Offering{Zone: offers[i], CapacityType: karpv1.CapacityTypeSpot, Price: price, Available: true})
			}
		}
	}
	arm := kLabel(karpv1.LabelArch, "arm64")
	twoTypes := []*catalog.InstanceType{kType("instance-type-1", "4", "4Gi", arm, spotIn("test-zone-1-spot", "0.52")),
		kType("instance-type-2", "4", "4Gi", arm, spotIn("test-zone-2-spot", "0.52"))}
	twoZones := []*catalog.InstanceType{kType("instance-type-1", "4", "4Gi", arm, spotIn("test-zone-1", "0.52", "test-zone-2", "0.54"))}
	three := []string{"instance-type-1", "instance-type-2", "instance-type-3"}
	zones := []string{"test-zone-1", "test-zone-2", "test-zone-3"}
	type want struct {
		key       string
		values    []string
		minValues int
	}
	for _, tc := range []struct {
		name   string
		policy scheduler.MinValuesPolicy
		types  []*catalog.InstanceType
		pools  []*karpv1.NodePool
		// pool is the pool of the claim ("" pending); the claim's
		// requirements include want.
		pool string
		want []want
	}{
		{name: "instance types: should not schedule when minValues requirement is not met", policy: scheduler.MinValuesStrict, types: twoTypes,
			pools: []*karpv1.NodePool{kPool("default", withWeight(100), withReqs(minReq(it, 3, three...)))}},
		{name: "instance types: should schedule even when minValues requirement is not met", policy: scheduler.MinValuesBestEffort, types: twoTypes,
			pools: []*karpv1.NodePool{kPool("default", withWeight(100), withReqs(minReq(it, 3, three...)))},
			pool:  "default", want: []want{{it, []string{"instance-type-1", "instance-type-2"}, 2}}},
		{name: "instance types: should relax minValues before falling back to other nodepools", policy: scheduler.MinValuesBestEffort, types: twoTypes,
			pools: []*karpv1.NodePool{kPool("default", withWeight(100), withReqs(minReq(it, 3, three...))),
				kPool("no-min-values", withWeight(10), withReqs(req(it, "In", three...)))},
			pool: "default", want: []want{{it, []string{"instance-type-1", "instance-type-2"}, 2}}},
		{name: "instance types: should choose nodepool with higher weight when relaxing minValues", policy: scheduler.MinValuesBestEffort, types: twoTypes,
			pools: []*karpv1.NodePool{kPool("default", withWeight(100), withReqs(minReq(it, 3, three...))),
				kPool("lower", withWeight(10), withReqs(minReq(it, 3, three...)))},
			pool: "default", want: []want{{it, []string{"instance-type-1", "instance-type-2"}, 2}}},
		{name: "zones: should not schedule when zone minValues requirement is not met", policy: scheduler.MinValuesStrict, types: twoZones,
			pools: []*karpv1.NodePool{kPool("default", withReqs(minReq(karpv1.LabelZone, 3, zones...)))}},
		// Karpenter keeps the pool's three zones on the claim; Joiner's
		// claim names the zones of the offerings it launches into.
		{name: "zones: should schedule even when zone minValues requirement is not met", policy: scheduler.MinValuesBestEffort, types: twoZones,
			pools: []*karpv1.NodePool{kPool("default", withReqs(minReq(karpv1.LabelZone, 3, zones...)))},
			pool:  "default", want: []want{{karpv1.LabelZone, []string{"test-zone-1", "test-zone-2"}, 2}}},
		{name: "instance types and zones: should schedule when minValues requirement is not met", policy: scheduler.MinValuesBestEffort, types: twoZones,
			pools: []*karpv1.NodePool{kPool("default", withWeight(100), withReqs(minReq(it, 3, three...), minReq(karpv1.LabelZone, 3, zones...)))},
			pool:  "default", want: []want{{it, []string{"instance-type-1"}, 1}, {karpv1.LabelZone, []string{"test-zone-1", "test-zone-2"}, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKProv(t, tc.pools...)
			k.cloud.types = tc.types
			k.cloud.zones = []string{"test-zone-1", "test-zone-2", "test-zone-3", "test-zone-1-spot", "test-zone-2-spot"}
			k.rig().views.MinValuesPolicy = tc.policy
			p := k.pod(withRequests("cpu", "0.9", "memory", "0.9Gi"))
			k.provision(p)
			if tc.pool == "" {
				k.notScheduled(p)
				return
			}
			k.scheduled(p)
			nc := k.claimOf(p)
			if nc.Labels[karpv1.LabelNodePool] != tc.pool || nc.Annotations[karpv1.AnnotationMinValuesRelaxed] != "true" {
				t.Fatalf("claim of pool %s, minValues relaxed %q; want pool %s, relaxed", nc.Labels[karpv1.LabelNodePool],
					nc.Annotations[karpv1.AnnotationMinValuesRelaxed], tc.pool)
			}
			if got := k.r.state.Intents()[0].Spec.Candidates[0].InstanceType; got != "instance-type-1" {
				t.Fatalf("first candidate %s, want instance-type-1", got)
			}
			for _, w := range tc.want {
				k.wantIn(nc, w.key, w.values...)
				if r := requirement(nc, w.key); r.MinValues == nil || *r.MinValues != w.minValues {
					t.Fatalf("%s minValues %v, want %d", w.key, r.MinValues, w.minValues)
				}
			}
		})
	}
}
