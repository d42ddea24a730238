package interruption_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/testenv"
)

// A spot interruption report committed to the FSM, on a real API server:
// the handler commits the termination and deletes the NodeClaim, the
// termination controller terminates the instance and releases it, and
// the report ends up handled. A rebalance recommendation for another
// NodeClaim leaves it alone.
func TestInterruptionRealAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	log := zaptest.NewLogger(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	state := fsm.New()
	raft := fsmtest.New(state)
	apply := func(typ fsm.MessageType, cmd any) {
		t.Helper()
		if r, _ := raft.Propose(ctx, fsm.MustEncode(typ, cmd)); r != nil {
			t.Fatal(r)
		}
	}
	now := time.Now()
	for i, id := range []string{"i-spot", "i-rebal"} {
		intent := "intent-" + id
		name := []string{"spot-claim", "rebal-claim"}[i]
		apply(fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: intent,
			Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: name}}, Pods: []string{"pod-" + id}}}, At: now})
		apply(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: intent, Attempt: 1, At: now})
		apply(fsm.LaunchResultType, fsm.LaunchResult{IntentID: intent, Attempt: 1, At: now,
			Launched: &fsm.Launched{InstanceID: id, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}})
		nc, err := clients.CreateNodeClaim(ctx, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer},
				Annotations: map[string]string{karpv1.AnnotationLaunchID: intent}},
			Spec: karpv1.NodeClaimSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType,
					Operator: karpv1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"spot"}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nc.Status.ProviderID = "aws:///us-east-1a/" + id
		if _, err := clients.UpdateNodeClaimStatus(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}

	cache := kube.NewCache(clients, log)
	run(cache.Run)
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, 2*time.Minute, "nodeclaims with provider IDs in the cache", func() bool {
		return cache.NodeClaimByProviderID("aws:///us-east-1a/i-spot") != nil && cache.NodeClaimByProviderID("aws:///us-east-1a/i-rebal") != nil
	})
	reg := prometheus.NewRegistry()
	rec := kube.NewRecorder(ctx, clients.Kube, "joiner")
	h, err := interruption.New(interruption.Config{Interval: 200 * time.Millisecond}, interruption.Deps{Cache: cache, Claims: clients,
		State: state, Raft: raft, Registerer: reg, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cloud := &observe.Terminations{}
	ctrl, err := termination.New(termination.Config{Resync: 200 * time.Millisecond}, termination.Deps{Cache: cache, Claims: clients,
		Kube: clients.Kube, State: state, Raft: raft, Cloud: cloud, Registerer: reg, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	run(h.Run)
	run(ctrl.Run)

	spotID := "i-spot/spot-interruption/" + now.UTC().Format(time.RFC3339)
	apply(fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: spotID, InstanceID: "i-spot",
		Kind: interruption.KindSpotInterruption, NoticeTime: now, Deadline: now.Add(2 * time.Minute), ReceivedAt: now}})
	apply(fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: "i-rebal/rebalance", InstanceID: "i-rebal",
		Kind: interruption.KindRebalance, NoticeTime: now, ReceivedAt: now}})
	h.Wake()

	kubetest.WaitFor(t, time.Minute, "interrupted nodeclaim gone and both reports handled", func() bool {
		_, err := clients.GetNodeClaim(ctx, "spot-claim")
		a, _ := state.Interruption(spotID)
		b, _ := state.Interruption("i-rebal/rebalance")
		return apierrors.IsNotFound(err) && a.Handled && b.Handled
	})
	terms := state.Terminations()
	if len(terms) != 1 || terms[0].ID != "term-i-spot" || terms[0].Reason != interruption.Reason || terms[0].State != fsm.TerminationDone {
		t.Errorf("terminations %+v: want term-i-spot interrupted done", terms)
	}
	if got := cloud.IDs(); len(got) != 1 || got[0] != "i-spot" {
		t.Errorf("terminate calls %v, want [i-spot]", got)
	}
	rebal, err := clients.GetNodeClaim(ctx, "rebal-claim")
	if err != nil {
		t.Fatal(err)
	}
	if rebal.DeletionTimestamp != nil {
		t.Error("rebalance recommendation deleted its nodeclaim")
	}
	// The Events name the interruption.
	kubetest.WaitFor(t, 2*time.Minute, "SpotInterrupted and RebalanceRecommendation events", func() bool {
		evs, err := clients.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.Reason] = true
		}
		return seen["SpotInterrupted"] && seen["RebalanceRecommendation"] && seen["TerminatingOnInterruption"]
	})
}
