package termination_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/testenv"
)

func ptr[T any](v T) *T { return &v }

// Deleting a NodeClaim on a real control plane: its Node (running two
// replicas of a Deployment under a PDB that allows one disruption) is
// tainted, its pods are evicted through the eviction API without breaking
// the PDB and land on a spare node, the instance is terminated, the Node
// is deleted and the finalizer released.
func TestDeleteNodeClaimRealControlPlane(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true, Scheduler: true,
		Controllers: []string{"*", "-node-lifecycle-controller"}})
	log := zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	c := env.Client
	const ns, target, spare, instance = "term", "node-target", "node-spare", "i-0abc"
	providerID := "aws:///us-east-1a/" + instance
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.RegisterNode(ctx, t, c, target, providerID, []string{karpv1.TerminationFinalizer})
	kl := &kubetest.Kubelet{Client: c, Namespace: ns, Nodes: map[string]bool{target: true, spare: true}, TerminateAfter: 300 * time.Millisecond}
	run(kl.Run)

	// Raft: the NodeClaim's launch intent and instance.
	state := fsm.New()
	raft := fsmtest.New(state)
	raft.MustPropose(t, fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "intent-1",
		Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-abcde"}}, Pods: []string{"p"}}}, At: time.Now()})
	raft.MustPropose(t, fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent-1", Attempt: 1, At: time.Now()})
	raft.MustPropose(t, fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-1", Attempt: 1, At: time.Now(),
		Launched: &fsm.Launched{InstanceID: instance, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}})

	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", Finalizers: []string{karpv1.TerminationFinalizer},
			Labels:      map[string]string{karpv1.LabelNodePool: "default"},
			Annotations: map[string]string{karpv1.AnnotationLaunchID: "intent-1"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: karpv1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"on-demand"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
	created, err := clients.CreateNodeClaim(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	created.Status.ProviderID = providerID
	created.Status.NodeName = target
	if _, err := clients.UpdateNodeClaimStatus(ctx, created); err != nil {
		t.Fatal(err)
	}

	// Two web replicas on the target under a PDB allowing one disruption.
	kubetest.CreateWeb(ctx, t, c, ns, 2)
	kubetest.WaitFor(t, 3*time.Minute, "2 web pods ready on the target", func() bool {
		return kubetest.ReadyOn(ctx, c, ns, target) == 2
	})
	kubetest.WaitFor(t, 3*time.Minute, "PDB allows one disruption", func() bool {
		p, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1
	})
	kubetest.RegisterNode(ctx, t, c, spare, "aws:///us-east-1a/i-0spare", nil)

	// Watch the target for the taint and the Deployment for ready replicas.
	var sawTaint atomic.Bool
	nw, err := c.CoreV1().Nodes().Watch(ctx, kubetest.ByName(target))
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Watch(ctx, t, nw, func(ev watch.Event) {
		if n, ok := ev.Object.(*corev1.Node); ok && termination.Tainted(n) {
			sawTaint.Store(true)
		}
	})
	minReady := kubetest.MinReadyReplicas(ctx, t, c, ns, "web", 2)

	cache := kube.NewCache(clients, log)
	run(func(ctx context.Context) { _ = cache.Run(ctx) })
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	cloud := &observe.Terminations{}
	reg := prometheus.NewRegistry()
	ctrl, err := termination.New(termination.Config{Resync: 500 * time.Millisecond}, termination.Deps{Cache: cache, Claims: clients,
		Kube: c, State: state, Raft: raft, Cloud: cloud, Registerer: reg, Recorder: kube.NewRecorder(ctx, c, "joiner"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	run(func(ctx context.Context) { _ = ctrl.Run(ctx) })

	if err := clients.DeleteNodeClaim(ctx, nc.Name); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, 2*time.Minute, "nodeclaim released", func() bool {
		_, err := clients.GetNodeClaim(ctx, nc.Name)
		return apierrors.IsNotFound(err)
	})

	if _, err := c.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("target node: %v, want not found", err)
	}
	if got := cloud.IDs(); len(got) == 0 || got[0] != instance {
		t.Errorf("terminate calls %v, want %s", got, instance)
	}
	terms := state.Terminations()
	if len(terms) != 1 || terms[0].ID != "term-"+instance || terms[0].Reason != termination.DefaultReason || terms[0].State != fsm.TerminationDone {
		t.Errorf("terminations %+v: want term-%s deleted done", terms, instance)
	}
	kubetest.WaitFor(t, 3*time.Minute, "2 web pods ready on the spare", func() bool {
		return kubetest.ReadyOn(ctx, c, ns, spare) == 2
	})
	if !sawTaint.Load() {
		t.Error("never saw karpenter.sh/disrupted:NoSchedule on the target")
	}
	least := minReady()
	if least < 1 {
		t.Errorf("ready replicas fell to %d: the PDB (maxUnavailable 1) was violated", least)
	}
	t.Logf("minimum ready replicas during the drain: %d", least)
}
