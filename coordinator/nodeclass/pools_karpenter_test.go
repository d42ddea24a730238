package nodeclass

// Karpenter v1.14.1's NodePool controller suites (counter, hash,
// readiness, registration health, validation), ported as tables over the
// nodeclass loop: each row names the case it comes from.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

// unmanagedRef is another provider's node class (Karpenter's tests' own).
var unmanagedRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}

func unmanaged(np *karpv1.NodePool) *karpv1.NodePool {
	np.Spec.Template.Spec.NodeClassRef = unmanagedRef.DeepCopy()
	return np
}

// lastStatus is the pool's status as last written by the loop, nil when
// it wrote none.
func lastStatus(r *rig, name string) *karpv1.NodePoolStatus {
	var out *karpv1.NodePoolStatus
	for _, np := range r.kube.Pools {
		if np.Name == name {
			out = &np.Status
		}
	}
	return out
}

// ncCap is a Joiner NodeClaim of pool with a provider ID and capacity.
func ncCap(name, pool, cpu, pods, mem string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: awsv1.Kind, Name: "default"}}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
	nc.Status.Capacity = resources(cpu, pods, mem)
	return nc
}

func resources(cpu, pods, mem string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourcePods: pods, corev1.ResourceMemory: mem} {
		if v != "" {
			out[n] = resource.MustParse(v)
		}
	}
	return out
}

// nodeOf is nc's Node with capacity (nil: none reported yet), initialized
// or not.
func nodeOf(nc *karpv1.NodeClaim, initialized bool, capacity corev1.ResourceList) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + nc.Name, Labels: map[string]string{karpv1.LabelNodePool: nc.Labels[karpv1.LabelNodePool]}},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Capacity: capacity}}
	if initialized {
		n.Labels[karpv1.LabelInitialized] = "true"
	}
	return n
}

// base is Karpenter's counter.BaseResources plus what is given.
func base(nodes int64, cpu, pods, mem string) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"),
		corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceEphemeralStorage: resource.MustParse("0"),
		karpv1.ResourceNodes: *resource.NewQuantity(nodes, resource.DecimalSI)}
	for n, q := range resources(cpu, pods, mem) {
		out[n] = q
	}
	return out
}

// TestCounterAsKarpenter: status.resources and status.nodes (Karpenter's
// nodepool counter suite). Each step puts the NodeClaims and Nodes in the
// cache, runs a pass, and checks each pool's counts.
func TestCounterAsKarpenter(t *testing.T) {
	// Karpenter's two NodeClaims and their Nodes (same capacity).
	nc1 := ncCap("nc-1", "default", "100m", "256", "1Gi")
	nc2 := ncCap("nc-2", "default", "500m", "1000", "5Gi")
	n1, n2 := nodeOf(nc1, true, nc1.Status.Capacity), nodeOf(nc2, true, nc2.Status.Capacity)
	bigger := resources("1", "512", "2Gi")
	static := func(name string, replicas int64) *karpv1.NodePool {
		np := pool(name)
		np.Spec.Replicas = &replicas
		return np
	}
	type step struct {
		claims []*karpv1.NodeClaim
		nodes  []*corev1.Node
		want   map[string]corev1.ResourceList // pool -> resources (nil: status not written)
	}
	for _, tc := range []struct {
		name  string
		pools []*karpv1.NodePool
		steps []step
	}{
		{"should ignore NodePools which aren't managed by this instance of Karpenter", []*karpv1.NodePool{unmanaged(pool("default"))},
			[]step{{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{n1}, want: map[string]corev1.ResourceList{"default": nil}}}},
		{"should set well-known resource to zero when no nodes exist in the cluster", []*karpv1.NodePool{pool("default")},
			[]step{{want: map[string]corev1.ResourceList{"default": base(0, "", "", "")}}}},
		{"should set the counter from the nodeClaim and then to the node when it initializes", []*karpv1.NodePool{pool("default")}, []step{
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{nodeOf(nc1, false, nc1.Status.Capacity)},
				want: map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi")}},
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{nodeOf(nc1, true, bigger)},
				want: map[string]corev1.ResourceList{"default": base(1, "1", "512", "2Gi")}},
		}},
		// Beyond Karpenter's case, its StateNode.Capacity: before the Node is
		// initialized, what it does not report yet is the NodeClaim's.
		{"a Node not initialized that reports no capacity yet counts the NodeClaim's", []*karpv1.NodePool{pool("default")}, []step{
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{nodeOf(nc1, false, nil)},
				want: map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi")}},
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{nodeOf(nc1, false, resources("1", "0", ""))},
				want: map[string]corev1.ResourceList{"default": base(1, "1", "256", "1Gi")}},
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{nodeOf(nc1, true, resources("1", "0", ""))},
				want: map[string]corev1.ResourceList{"default": base(1, "1", "0", "")}},
		}},
		{"should increase the counter when new nodes are created", []*karpv1.NodePool{pool("default")},
			[]step{{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{n1}, want: map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi")}}}},
		{"should decrease the counter when an existing node is deleted", []*karpv1.NodePool{pool("default")}, []step{
			{claims: []*karpv1.NodeClaim{nc1, nc2}, nodes: []*corev1.Node{n1, n2}, want: map[string]corev1.ResourceList{"default": base(2, "600m", "1256", "6Gi")}},
			{claims: []*karpv1.NodeClaim{nc2}, nodes: []*corev1.Node{n2}, want: map[string]corev1.ResourceList{"default": base(1, "500m", "1000", "5Gi")}},
		}},
		{"should zero out the counter when all nodes are deleted", []*karpv1.NodePool{pool("default")}, []step{
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{n1}, want: map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi")}},
			{want: map[string]corev1.ResourceList{"default": base(0, "", "", "")}},
		}},
		{"Status.Nodes: should set Status.Nodes to zero when no nodes exist", []*karpv1.NodePool{pool("default")},
			[]step{{want: map[string]corev1.ResourceList{"default": base(0, "", "", "")}}}},
		{"Status.Nodes: should set Status.Nodes to 2 when two nodes exist", []*karpv1.NodePool{pool("default")},
			[]step{{claims: []*karpv1.NodeClaim{nc1, nc2}, nodes: []*corev1.Node{n1, n2}, want: map[string]corev1.ResourceList{"default": base(2, "600m", "1256", "6Gi")}}}},
		{"Status.Nodes: should update Status.Nodes when nodes are added and removed", []*karpv1.NodePool{pool("default")}, []step{
			{want: map[string]corev1.ResourceList{"default": base(0, "", "", "")}},
			{claims: []*karpv1.NodeClaim{nc1}, nodes: []*corev1.Node{n1}, want: map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi")}},
			{claims: []*karpv1.NodeClaim{nc1, nc2}, nodes: []*corev1.Node{n1, n2}, want: map[string]corev1.ResourceList{"default": base(2, "600m", "1256", "6Gi")}},
			{claims: []*karpv1.NodeClaim{nc2}, nodes: []*corev1.Node{n2}, want: map[string]corev1.ResourceList{"default": base(1, "500m", "1000", "5Gi")}},
			{want: map[string]corev1.ResourceList{"default": base(0, "", "", "")}},
		}},
		{"Status.Nodes: should handle multiple nodepools including static with different node counts",
			[]*karpv1.NodePool{pool("default"), static("static", 2)}, []step{{
				claims: []*karpv1.NodeClaim{nc1, ncCap("s-1", "static", "300m", "", ""), ncCap("s-2", "static", "300m", "", "")},
				nodes:  []*corev1.Node{n1},
				want:   map[string]corev1.ResourceList{"default": base(1, "100m", "256", "1Gi"), "static": base(2, "600m", "", "")},
			}}},
		{"Status.Nodes: should handle static nodepools with replicas correctly (the nodes there, not the replicas)",
			[]*karpv1.NodePool{static("static", 3)}, []step{{
				claims: []*karpv1.NodeClaim{ncCap("s-1", "static", "300m", "", ""), ncCap("s-2", "static", "300m", "", "")},
				want:   map[string]corev1.ResourceList{"static": base(2, "600m", "", "")},
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(&fake.Cache{PoolList: tc.pools, ClassList: []*awsv1.EC2NodeClass{readyClass(metav1.ConditionTrue, "Ready")}})
			for i, s := range tc.steps {
				r.cache.ClaimList, r.cache.NodeList = s.claims, s.nodes
				r.kube.Pools = nil
				r.l.Reconcile(context.Background())
				for name, want := range s.want {
					got := lastStatus(r, name)
					if want == nil {
						if got != nil {
							t.Fatalf("step %d: the status of pool %s was written: %v", i, name, got.Resources)
						}
						continue
					}
					if got == nil {
						t.Fatalf("step %d: no status written for pool %s", i, name)
					}
					if !equality.Semantic.DeepEqual(got.Resources, want) {
						t.Errorf("step %d: pool %s resources %v, want %v", i, name, got.Resources, want)
					}
					wantNodes := want[karpv1.ResourceNodes]
					if got.Nodes == nil || *got.Nodes != wantNodes.Value() {
						t.Errorf("step %d: pool %s status.nodes %v, want %d", i, name, got.Nodes, wantNodes.Value())
					}
					fake.Find(r.cache.PoolList, name).Status = *got
				}
			}
		})
	}
}

// TestReadinessAsKarpenter: NodeClassReady and Ready from the pool's
// EC2NodeClass (Karpenter's nodepool readiness suite).
func TestReadinessAsKarpenter(t *testing.T) {
	terminating := readyClass(metav1.ConditionTrue, "Ready")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name                  string
		pool                  *karpv1.NodePool
		class                 *awsv1.EC2NodeClass // nil: none
		written               bool
		ready                 metav1.ConditionStatus
		classReady, reasonWhy string
	}{
		{name: "should ignore NodePools which aren't managed by this instance of Karpenter", pool: unmanaged(pool("default")),
			class: readyClass(metav1.ConditionTrue, "Ready")},
		{name: "should have status condition on nodePool as not ready when nodeClass does not exist", pool: pool("default"), written: true,
			ready: metav1.ConditionFalse, classReady: "False", reasonWhy: "NodeClassNotFound"},
		{name: "should have status condition on nodePool as ready if nodeClass is ready", pool: pool("default"),
			class: readyClass(metav1.ConditionTrue, "Ready"), written: true, ready: metav1.ConditionTrue, classReady: "True", reasonWhy: ConditionNodeClassReady},
		{name: "should have status condition on nodePool as not ready if nodeClass is not ready", pool: pool("default"),
			class: readyClass(metav1.ConditionFalse, "reason"), written: true, ready: metav1.ConditionFalse, classReady: "False", reasonWhy: "reason"},
		{name: "should have status condition on nodePool as not ready if nodeClass does not have status conditions", pool: pool("default"),
			class: readyClass("", ""), written: true, ready: metav1.ConditionFalse, classReady: "False", reasonWhy: "NodeClassReadinessUnknown"},
		{name: "should mark NodeClassReady status condition on nodePool as NotReady if nodeClass is terminating", pool: pool("default"),
			class: terminating, written: true, ready: metav1.ConditionFalse, classReady: "False", reasonWhy: "NodeClassTerminating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fake.Cache{PoolList: []*karpv1.NodePool{tc.pool}}
			if tc.class != nil {
				c.ClassList = []*awsv1.EC2NodeClass{tc.class}
			}
			r := newRig(c)
			r.l.Reconcile(context.Background())
			st := lastStatus(r, "default")
			if !tc.written {
				if st != nil {
					t.Fatalf("status written: %+v", st.Conditions)
				}
				return
			}
			if st == nil {
				t.Fatal("no status written")
			}
			if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionReady); c == nil || c.Status != tc.ready {
				t.Errorf("Ready = %+v, want %s", c, tc.ready)
			}
			if c := meta.FindStatusCondition(st.Conditions, ConditionNodeClassReady); c == nil || string(c.Status) != tc.classReady || c.Reason != tc.reasonWhy {
				t.Errorf("NodeClassReady = %+v, want %s %s", c, tc.classReady, tc.reasonWhy)
			}
		})
	}
}

// TestValidationAsKarpenter: ValidationSucceeded from Karpenter's runtime
// validation (its nodepool validation suite).
func TestValidationAsKarpenter(t *testing.T) {
	capacityTypes := func(values ...string) *karpv1.NodePool {
		return pool("default", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: values})
	}
	longTaint := pool("default")
	longTaint.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "test.com.test." + strings.Repeat("a", 250) + "/test", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name    string
		pool    *karpv1.NodePool
		written bool
		valid   bool
	}{
		{"should fail validation with only invalid capacity types", capacityTypes("xspot"), true, false},
		{"should pass validation with valid capacity types", capacityTypes(karpv1.CapacityTypeOnDemand), true, true},
		{"should fail open if invalid and valid capacity types are present", capacityTypes(karpv1.CapacityTypeOnDemand, "xspot"), true, true},
		{"should ignore NodePools which aren't managed by this instance of Karpenter", unmanaged(pool("default")), false, false},
		{"should set the NodePoolValidationSucceeded status condition to true if nodePool healthy checks succeed", pool("default"), true, true},
		{"should set the NodePoolValidationSucceeded status condition to false if nodePool validation failed", longTaint, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(&fake.Cache{PoolList: []*karpv1.NodePool{tc.pool}, ClassList: []*awsv1.EC2NodeClass{readyClass(metav1.ConditionTrue, "Ready")}})
			r.l.Reconcile(context.Background())
			st := lastStatus(r, "default")
			if !tc.written {
				if st != nil {
					t.Fatalf("status written: %+v", st.Conditions)
				}
				return
			}
			if st == nil {
				t.Fatal("no status written")
			}
			want, reason := metav1.ConditionTrue, awsv1.ConditionValidationSucceeded
			if !tc.valid {
				want, reason = metav1.ConditionFalse, "NodePoolValidationFailed"
			}
			if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionValidationSucceeded); c == nil || c.Status != want || c.Reason != reason {
				t.Errorf("ValidationSucceeded = %+v, want %s %s", c, want, reason)
			}
			// The class is ready: Ready follows validation.
			if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionReady); c == nil || c.Status != want {
				t.Errorf("Ready = %+v, want %s", c, want)
			}
		})
	}
}

// TestRegistrationHealthAsKarpenter: NodeRegistrationHealthy as the loop
// writes it (Karpenter's nodepool registration health suite): Unknown and
// the record forgotten when the pool or its class changed since it was
// written, else kept and seeding the record.
func TestRegistrationHealthAsKarpenter(t *testing.T) {
	const uid = types.UID("uid-pool")
	cond := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionNodeRegistrationHealthy, Status: status, Reason: "unhealthy", Message: "unhealthy", ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name                 string
		unmanaged, noClass   bool
		poolGen, classGen    int64
		cond                 []metav1.Condition
		observedGen          int64
		want                 metav1.ConditionStatus // "": no condition
		wantHealth           poolhealth.Status
		wantObservedClassGen int64
	}{
		{name: "should ignore setting NodeRegistrationHealthy status condition on NodePools which aren't managed by this instance of Karpenter",
			unmanaged: true, poolGen: 1, classGen: 1},
		{name: "should not set NodeRegistrationHealthy status condition on nodePool when nodeClass does not exist", noClass: true, poolGen: 1, classGen: 1},
		{name: "should set NodeRegistrationHealthy status condition on nodePool as Unknown and reset the NodeRegistrationHealthBuffer if the nodeClass observed generation doesn't match with that on nodePool",
			poolGen: 1, classGen: 2, cond: cond(metav1.ConditionFalse, 1), observedGen: 1,
			want: metav1.ConditionUnknown, wantHealth: poolhealth.Unknown, wantObservedClassGen: 2},
		{name: "should set NodeRegistrationHealthy status condition on nodePool as Unknown if the nodePool is updated",
			poolGen: 2, classGen: 1, cond: cond(metav1.ConditionFalse, 1), observedGen: 1,
			want: metav1.ConditionUnknown, wantHealth: poolhealth.Unknown, wantObservedClassGen: 1},
		{name: "should not set NodeRegistrationHealthy status condition on nodePool as Unknown if it is already set to true",
			poolGen: 1, classGen: 1, cond: cond(metav1.ConditionTrue, 1), observedGen: 1,
			want: metav1.ConditionTrue, wantHealth: poolhealth.Healthy, wantObservedClassGen: 1},
		{name: "should not set NodeRegistrationHealthy status condition on nodePool as Unknown if it is already set to false",
			poolGen: 1, classGen: 1, cond: cond(metav1.ConditionFalse, 1), observedGen: 1,
			want: metav1.ConditionFalse, wantHealth: poolhealth.Unhealthy, wantObservedClassGen: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := pool("default")
			if tc.unmanaged {
				unmanaged(np)
			}
			np.UID, np.Generation = uid, tc.poolGen
			np.Status.Conditions, np.Status.NodeClassObservedGeneration = tc.cond, tc.observedGen
			c := &fake.Cache{PoolList: []*karpv1.NodePool{np}}
			if !tc.noClass {
				cl := readyClass(metav1.ConditionTrue, "Ready")
				cl.Generation = tc.classGen
				c.ClassList = []*awsv1.EC2NodeClass{cl}
			}
			r := newRig(c)
			h := poolhealth.New()
			r.l.d.Health = h
			r.l.Reconcile(context.Background())
			st := lastStatus(r, "default")
			var got *metav1.Condition
			if st != nil {
				got = meta.FindStatusCondition(st.Conditions, ConditionNodeRegistrationHealthy)
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("NodeRegistrationHealthy written: %+v", got)
				}
				return
			}
			if got == nil || got.Status != tc.want {
				t.Fatalf("NodeRegistrationHealthy = %+v, want %s", got, tc.want)
			}
			if st.NodeClassObservedGeneration != tc.wantObservedClassGen {
				t.Errorf("nodeClassObservedGeneration %d, want %d", st.NodeClassObservedGeneration, tc.wantObservedClassGen)
			}
			// A kept condition seeds the empty record (a new leader's).
			if health, _ := h.Status(uid); health != tc.wantHealth {
				t.Errorf("record %v, want %v", health, tc.wantHealth)
			}
		})
	}
}

// TestHashAsKarpenter: karpenter.sh/nodepool-hash on pools and, when the
// hash version changes, on their NodeClaims (Karpenter's nodepool hash
// suite, "Static Drift Hash").
func TestHashAsKarpenter(t *testing.T) {
	// Karpenter's pool: template metadata, taints, startup taints,
	// expireAfter and terminationGracePeriod.
	hashedPool := func() *karpv1.NodePool {
		np := pool("default")
		np.Spec.Template.ObjectMeta.Annotations = map[string]string{"keyAnnotation": "valueAnnotation", "keyAnnotation2": "valueAnnotation2"}
		np.Spec.Template.ObjectMeta.Labels = map[string]string{"keyLabel": "valueLabel"}
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "key", Effect: corev1.TaintEffectNoExecute}}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "key", Effect: corev1.TaintEffectNoExecute}}
		np.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(5 * time.Minute)
		np.Spec.Template.Spec.TerminationGracePeriod = ptrDuration(karpv1.NewDuration(5 * time.Minute))
		return np
	}
	claimWith := func(name, hash, version string, drifted bool) *karpv1.NodeClaim {
		nc := ncCap(name, "default", "1", "", "")
		nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: version}
		if drifted {
			nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"}}
		}
		return nc
	}
	withHash := func(np *karpv1.NodePool, hash, version string) *karpv1.NodePool {
		np.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: version}
		return np
	}
	poolLine := func(np *karpv1.NodePool) string {
		return fmt.Sprintf("nodepools/default map[%s:%s %s:%s]", karpv1.AnnotationNodePoolHash, np.Hash(), karpv1.AnnotationNodePoolHashVersion, karpv1.NodePoolHashVersion)
	}
	for _, tc := range []struct {
		name   string
		pool   *karpv1.NodePool
		claims []*karpv1.NodeClaim
		// change, when set, is applied after a first pass (whose hash the
		// pool then carries); the second pass is checked.
		change func(*karpv1.NodePool)
		want   func(np *karpv1.NodePool) []string // exactly these writes
	}{
		{name: "should ignore NodePools which aren't managed by this instance of Karpenter", pool: unmanaged(hashedPool()),
			want: func(*karpv1.NodePool) []string { return nil }},
		{name: "should update the drift hash when NodePool static field is updated", pool: hashedPool(),
			change: func(np *karpv1.NodePool) {
				np.Spec.Template.ObjectMeta.Labels = map[string]string{"keyLabeltest": "valueLabeltest"}
				np.Spec.Template.ObjectMeta.Annotations = map[string]string{"keyAnnotation2": "valueAnnotation2", "keyAnnotation": "valueAnnotation"}
			},
			want: func(np *karpv1.NodePool) []string { return []string{poolLine(np)} }},
		{name: "should not update the drift hash when NodePool behavior field is updated", pool: hashedPool(),
			change: func(np *karpv1.NodePool) {
				np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("16")}
				np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
				np.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(30 * time.Second)
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelTopologyZone, Operator: karpv1.OpIn, Values: []string{"test"}}}
				w := int32(80)
				np.Spec.Weight = &w
			},
			want: func(*karpv1.NodePool) []string { return nil }},
		{name: "should update nodepool hash version when the nodepool hash version is out of sync with the controller hash version",
			pool: withHash(hashedPool(), "abceduefed", "test"), want: func(np *karpv1.NodePool) []string { return []string{poolLine(np)} }},
		{name: "should update nodepool hash versions on all nodeclaims when the hash versions don't match the controller hash version",
			pool: withHash(hashedPool(), "abceduefed", "test"), claims: []*karpv1.NodeClaim{claimWith("one", "123456", "test", false), claimWith("two", "123456", "test", false)},
			want: func(np *karpv1.NodePool) []string {
				claim := func(name string) string {
					return fmt.Sprintf("nodeclaims/%s map[%s:%s %s:%s]", name, karpv1.AnnotationNodePoolHash, np.Hash(), karpv1.AnnotationNodePoolHashVersion, karpv1.NodePoolHashVersion)
				}
				return []string{claim("one"), claim("two"), poolLine(np)}
			}},
		{name: "should not update nodepool hash on all nodeclaims when the hash versions match the controller hash version",
			pool: withHash(hashedPool(), "abceduefed", "test-version"), claims: []*karpv1.NodeClaim{claimWith("current", "1234564654", karpv1.NodePoolHashVersion, false)},
			want: func(np *karpv1.NodePool) []string { return []string{poolLine(np)} }},
		{name: "should not update nodepool hash on the nodeclaim if it's drifted",
			pool: withHash(hashedPool(), "abceduefed", "test"), claims: []*karpv1.NodeClaim{claimWith("drifted", "123456", "test", true)},
			want: func(np *karpv1.NodePool) []string {
				return []string{fmt.Sprintf("nodeclaims/drifted map[%s:%s]", karpv1.AnnotationNodePoolHashVersion, karpv1.NodePoolHashVersion), poolLine(np)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := tc.pool
			r := newRig(&fake.Cache{PoolList: []*karpv1.NodePool{np}, ClaimList: tc.claims})
			if tc.change != nil {
				r.l.Reconcile(context.Background())
				before := np.Hash()
				withHash(np, before, karpv1.NodePoolHashVersion)
				tc.change(np)
				r.kube.Annotated = nil
			}
			r.l.Reconcile(context.Background())
			var got []string
			for _, a := range r.kube.Annotated {
				if !strings.HasPrefix(a, "ec2nodeclasses/") {
					got = append(got, a)
				}
			}
			want := tc.want(np)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func ptrDuration(d karpv1.Duration) *karpv1.Duration { return &d }
