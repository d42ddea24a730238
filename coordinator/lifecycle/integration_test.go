package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/fakeclock"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestLifecycleControlPlane runs the loop against a real API server with
// the CRDs installed: a NodeClaim whose intent launched goes Launched ->
// Registered -> Initialized once a Node with its providerID joins (the
// Node gets the claim's labels, the finalizer and an owner reference; the
// startup taint is removed as in the sim); a NodeClaim whose intent stays
// pending is deleted at the launch timeout (fake clock); an instance that
// vanishes from the cloud is recorded lost and its NodeClaim deleted.
func TestLifecycleControlPlane(t *testing.T) {
	// Admission would taint the new Node node.kubernetes.io/not-ready, and
	// no node lifecycle controller runs here to lift it.
	env := testenv.Start(t, testenv.Options{CRDs: true,
		APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}})
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx
	clients, cache := simstack.Kube(t, r, env.Config, log)

	state := fsm.New()
	raft := fsmtest.New(state)
	clk := fakeclock.New(time.Now().UTC())
	start := clk.Now()
	cl := &fakeCloud{insts: map[string]cloud.Instance{"i-1": {ID: "i-1", State: "running"}}}
	spec := func(claim string) fsm.LaunchSpec {
		return fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: claim, Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", ImageID: "ami-1"}}}}
	}
	raft.MustPropose(t, fsm.PlanCommitType, fsm.PlanCommit{At: start, Intents: []fsm.NewIntent{
		{ID: "intent1", Spec: spec("default-aaaaa"), Pods: []string{"default/p1"}},
		{ID: "intent2", Spec: spec("default-bbbbb"), Pods: []string{"default/p2"}},
	}})
	raft.MustLaunch(t, "intent1", fsm.Launched{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: start}, start)

	newClaim := func(name, intentID string) {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer},
				Labels:      map[string]string{karpv1.LabelNodePool: "default", "team": "a"},
				Annotations: map[string]string{karpv1.AnnotationLaunchID: intentID}},
			Spec: karpv1.NodeClaimSpec{
				StartupTaints: []corev1.Taint{{Key: startupKey, Effect: corev1.TaintEffectNoSchedule}},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn,
					Values: []string{"m5.large"}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			},
		}
		if _, err := clients.CreateNodeClaim(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	newClaim("default-aaaaa", "intent1")

	reg := prometheus.NewRegistry()
	l, err := New(Config{RemoveStartupTaints: true, Resync: 200 * time.Millisecond, GCInterval: -1, Now: clk.Now},
		Deps{Cache: cache, Claims: clients, Nodes: clients.Kube, State: state, Raft: raft, Cloud: cl, Classes: fakeClasses{},
			Registerer: reg, Recorder: events.NewRecorder(ctx, clients.Kube, ""), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Go(l.Run)

	cond := func(nc *karpv1.NodeClaim, typ string) metav1.ConditionStatus {
		if nc == nil {
			return ""
		}
		if c := condition(nc.Status.Conditions, typ); c != nil {
			return c.Status
		}
		return ""
	}
	simstack.Eventually(t, time.Minute, "Launched", func() (bool, string) {
		nc := cache.NodeClaim("default-aaaaa")
		return cond(nc, karpv1.ConditionLaunched) == metav1.ConditionTrue && nc.Labels[karpv1.LabelInstanceType] == "m5.large",
			fmt.Sprintf("launched %q", cond(nc, karpv1.ConditionLaunched))
	})
	nc := cache.NodeClaim("default-aaaaa")
	if nc.Status.ProviderID != "aws:///us-east-1a/i-1" || nc.Status.ImageID != "ami-1" || nc.Status.Capacity.Cpu().Value() != 2 {
		t.Fatalf("launched status %+v", nc.Status)
	}

	// The kubelet registers the Node (Ready, with the user-data startup taint).
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Labels: map[string]string{corev1.LabelHostname: "ip-10-0-0-1"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1", Taints: []corev1.Taint{{Key: startupKey, Effect: corev1.TaintEffectNoSchedule},
			{Key: karpv1.TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute}}}}
	created, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The lifecycle syncs the Node concurrently: retry on conflicts.
	setReady := func(status corev1.ConditionStatus, reason string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := env.Client.CoreV1().Nodes().Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			_, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionTrue, "KubeletReady")

	simstack.Eventually(t, time.Minute, "Initialized", func() (bool, string) {
		nc := cache.NodeClaim("default-aaaaa")
		why := ""
		if n := cache.Node("ip-10-0-0-1"); n != nil {
			_, why = Initialized(nc, n)
		}
		return cond(nc, karpv1.ConditionInitialized) == metav1.ConditionTrue && cond(nc, karpv1.ConditionReady) == metav1.ConditionTrue,
			fmt.Sprintf("registered %q initialized %q ready %q (%s)", cond(nc, karpv1.ConditionRegistered), cond(nc, karpv1.ConditionInitialized),
				cond(nc, karpv1.ConditionReady), why)
	})
	nc = cache.NodeClaim("default-aaaaa")
	if nc.Status.NodeName != "ip-10-0-0-1" || cond(nc, karpv1.ConditionRegistered) != metav1.ConditionTrue {
		t.Fatalf("registered status %+v", nc.Status)
	}
	got, err := env.Client.CoreV1().Nodes().Get(ctx, "ip-10-0-0-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{karpv1.LabelRegistered: "true", karpv1.LabelInitialized: "true", karpv1.LabelNodePool: "default",
		"team": "a", karpv1.LabelInstanceType: "m5.large", karpv1.LabelZone: "us-east-1a", karpv1.LabelCapacityType: "on-demand"} {
		if got.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if !slices.Contains(got.Finalizers, karpv1.TerminationFinalizer) {
		t.Errorf("node finalizers %v", got.Finalizers)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != nc.UID {
		t.Errorf("node owner references %+v, want the nodeclaim %s", got.OwnerReferences, nc.UID)
	}
	if len(got.Spec.Taints) != 0 {
		t.Errorf("node taints %v, want the startup taint removed", got.Spec.Taints)
	}
	if inst, _ := state.Instance("i-1"); inst.State != fsm.InstanceReady || inst.NodeName != "ip-10-0-0-1" {
		t.Errorf("instance %+v, want ready on ip-10-0-0-1", inst)
	}

	simstack.Eventually(t, time.Minute, "events on the nodeclaim", func() (bool, string) {
		evs, err := env.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=default-aaaaa"})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range evs.Items {
			reasons = append(reasons, e.Reason)
		}
		slices.Sort(reasons)
		return slices.Equal(reasons, []string{"Initialized", "Launched", "Ready", "Registered"}), fmt.Sprint(reasons)
	})

	// Launch timeout: intent2 never launches.
	newClaim("default-bbbbb", "intent2")
	simstack.Eventually(t, time.Minute, "the second nodeclaim in the cache", func() (bool, string) { return cache.NodeClaim("default-bbbbb") != nil, "absent" })
	clk.Add(6 * time.Minute)
	simstack.Eventually(t, time.Minute, "launch timeout", func() (bool, string) {
		nc := cache.NodeClaim("default-bbbbb")
		return nc != nil && nc.DeletionTimestamp != nil, "not deleted"
	})
	if in, _ := state.Intent("intent2"); in.State != fsm.IntentCancelled {
		t.Errorf("intent2 %s, want cancelled", in.State)
	}
	if nc := cache.NodeClaim("default-aaaaa"); nc.DeletionTimestamp != nil {
		t.Fatalf("the initialized nodeclaim was deleted at the launch timeout")
	}

	// GC: the instance vanishes. While its Node still says Ready nothing
	// is collected (Karpenter's guard); once the node controller marks it
	// Unknown (the kubelet went with the instance), it is.
	cl.mu.Lock()
	cl.insts["i-1"] = cloud.Instance{ID: "i-1", State: "terminated"}
	cl.mu.Unlock()
	if gone, err := l.CollectGarbage(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("CollectGarbage with the node Ready = %v, %v", gone, err)
	}
	setReady(corev1.ConditionUnknown, "NodeStatusUnknown")
	simstack.Eventually(t, time.Minute, "the node not Ready in the cache", func() (bool, string) {
		n := cache.Node(created.Name)
		return n != nil && !nodeReady(n), "still Ready"
	})
	if gone, err := l.CollectGarbage(ctx); err != nil || len(gone) != 1 {
		t.Fatalf("CollectGarbage = %v, %v", gone, err)
	}
	simstack.Eventually(t, time.Minute, "gc deletion", func() (bool, string) {
		nc := cache.NodeClaim("default-aaaaa")
		return nc != nil && nc.DeletionTimestamp != nil, "not deleted"
	})
	if inst, _ := state.Instance("i-1"); inst.State != fsm.InstanceLost {
		t.Errorf("instance %s, want lost", inst.State)
	}
	if got := counter(t, reg, "joiner_nodeclaims_initialized_total"); got != 1 {
		t.Errorf("initialized_total %v", got)
	}
	if got := counter(t, reg, "joiner_nodeclaims_lifecycle_deleted_total"); got != 2 {
		t.Errorf("lifecycle_deleted_total %v, want 2 (launch timeout, instance gone)", got)
	}
}
