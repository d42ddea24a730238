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
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/events"
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
	c := env.Client
	const ns, target, spare, instance = "term", "node-target", "node-spare", "i-0abc"
	providerID := "aws:///us-east-1a/" + instance
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.RegisterNode(ctx, t, c, target, providerID, []string{karpv1.TerminationFinalizer})
	kl := &kubetest.Kubelet{Client: c, Namespace: ns, Nodes: map[string]bool{target: true, spare: true}, TerminateAfter: 300 * time.Millisecond}
	wg.Add(1)
	go func() { defer wg.Done(); kl.Run(ctx) }()

	// Raft: the NodeClaim's launch intent and instance.
	state := fsm.New()
	raft := fsmtest.New(state)
	raft.MustPlanAndLaunch(t, "intent-1", cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-abcde"}, []string{"p"},
		fsm.Launched{InstanceID: instance, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}, time.Now())

	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	claim := kubetest.NodeClaim("default-abcde", map[string]string{karpv1.AnnotationLaunchID: "intent-1"}, karpv1.LabelCapacityType, "on-demand")
	claim.Labels = map[string]string{karpv1.LabelNodePool: "default"}
	nc := kubetest.CreateLaunched(ctx, t, clients, claim, providerID, target)

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

	cloud := &observe.Terminations{}
	reg := prometheus.NewRegistry()
	startTermination(ctx, t, &wg, clients, termination.Deps{Kube: c, State: state, Raft: raft, Cloud: cloud,
		Registerer: reg, Recorder: events.NewRecorder(ctx, c, ""), Log: log})

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
	// Karpenter's eviction requests count each pod's eviction as 200 (the
	// PDB's refusals, if any, as 429).
	if got, ok := observe.Sample(t, reg, "karpenter_pods_eviction_requests_total", map[string]string{"code": "200"}); !ok || got != 2 {
		t.Errorf(`karpenter_pods_eviction_requests_total{code="200"} = %v (found %v), want 2`, got, ok)
	}
	least := minReady()
	if least < 1 {
		t.Errorf("ready replicas fell to %d: the PDB (maxUnavailable 1) was violated", least)
	}
	t.Logf("minimum ready replicas during the drain: %d", least)
}

// startTermination runs the coordinator's informer cache and a termination
// controller (deps completed with the cache and the NodeClaim clients) until
// ctx ends.
func startTermination(ctx context.Context, t *testing.T, wg *sync.WaitGroup, clients *kube.Clients, deps termination.Deps) {
	t.Helper()
	cache := kube.NewCache(clients, deps.Log)
	wg.Add(1)
	go func() { defer wg.Done(); _ = cache.Run(ctx) }()
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	deps.Cache, deps.Claims = cache, clients
	ctrl, err := termination.New(termination.Config{Resync: 500 * time.Millisecond}, deps)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = ctrl.Run(ctx) }()
}

// On a real control plane, an adopted NodeClaim (its instance unknown to
// raft) whose Node has a VolumeAttachment is drained, then waits with
// VolumesDetached Unknown and the instance running; once the attachment is
// deleted (the attach-detach controller's job) the instance is terminated
// and the NodeClaim released. The VolumeAttachment comes from the
// coordinator's informer cache.
func TestTerminationWaitsForVolumeAttachmentRealControlPlane(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	c := env.Client
	const nodeName, instance, attachmentName = "node-vol", "i-0vol", "csi-0123456789abcdef"
	providerID := "aws:///us-east-1b/" + instance
	kubetest.RegisterNode(ctx, t, c, nodeName, providerID, []string{karpv1.TerminationFinalizer})
	pv := "pvc-0f1e2d3c"
	if _, err := c.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: attachmentName},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	created := kubetest.CreateLaunched(ctx, t, clients, kubetest.NodeClaim("adopted-vol", nil, corev1.LabelArchStable, "amd64"), providerID, nodeName)
	state := fsm.New()
	cloud := &observe.Terminations{}
	startTermination(ctx, t, &wg, clients, termination.Deps{Kube: c, State: state, Raft: fsmtest.New(state), Cloud: cloud, Log: zaptest.NewLogger(t)})

	if err := clients.DeleteNodeClaim(ctx, created.Name); err != nil {
		t.Fatal(err)
	}
	volumes := func() *metav1.Condition {
		nc, err := clients.GetNodeClaim(ctx, created.Name)
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionVolumesDetached)
	}
	kubetest.WaitFor(t, 2*time.Minute, "VolumesDetached Unknown (awaiting the attachment)", func() bool {
		c := volumes()
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == "AwaitingVolumeDetachment"
	})
	if got := cloud.IDs(); len(got) != 0 {
		t.Fatalf("terminated %v while %s exists", got, attachmentName)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Fatalf("node while waiting for volumes: %v", err)
	}

	if err := c.StorageV1().VolumeAttachments().Delete(ctx, attachmentName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, 2*time.Minute, "nodeclaim released", func() bool {
		_, err := clients.GetNodeClaim(ctx, created.Name)
		return apierrors.IsNotFound(err)
	})
	if got := cloud.IDs(); len(got) != 1 || got[0] != instance {
		t.Errorf("terminate calls %v, want [%s]", got, instance)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node: %v, want not found", err)
	}
}
