package interruption_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/events"
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
	now := time.Now()
	for i, id := range []string{"i-spot", "i-rebal"} {
		intent := "intent-" + id
		name := []string{"spot-claim", "rebal-claim"}[i]
		raft.MustPlanAndLaunch(t, intent, cloud.LaunchSpec{NodePool: "default", NodeClaim: name}, []string{"pod-" + id},
			fsm.Launched{InstanceID: id, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, now)
		kubetest.CreateLaunched(ctx, t, clients, kubetest.NodeClaim(name, map[string]string{karpv1.AnnotationLaunchID: intent},
			karpv1.LabelCapacityType, "spot"), "aws:///us-east-1a/"+id, "")
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
	rec := events.NewRecorder(ctx, clients.Kube, "")
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
	raft.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: spotID, InstanceID: "i-spot",
		Kind: interruption.KindSpotInterruption, NoticeTime: now, Deadline: now.Add(2 * time.Minute), ReceivedAt: now}})
	raft.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: "i-rebal/rebalance", InstanceID: "i-rebal",
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
	// The Events name the interruption (the AWS provider's reasons).
	kubetest.WaitFor(t, 2*time.Minute, "SpotInterrupted, SpotRebalanceRecommendation and TerminatingOnInterruption events", func() bool {
		evs, err := clients.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.Reason] = true
		}
		return seen["SpotInterrupted"] && seen["SpotRebalanceRecommendation"] && seen["TerminatingOnInterruption"]
	})
}
