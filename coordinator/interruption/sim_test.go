package interruption_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/simstack/provisioning"
)

// TestQueueOnSimStack runs the interruption queue loop with the handler,
// termination and the provisioning loops against a real control plane and
// the simulated region, whose EventBridge fills the queue. No agent runs
// on the nodes (a Windows node or a stock AMI): a spot interruption
// reaches Joiner through the queue alone, the interrupted NodeClaim is
// replaced and its offering becomes unavailable. For a second node the
// agent's report arrives beside the queue's: one action, one Event.
func TestQueueOnSimStack(t *testing.T) {
	env := simstack.SchedulingEnv(t)
	log := zaptest.NewLogger(t)
	r := simstack.NewRunner(context.Background())
	defer r.Stop()
	ctx := r.Ctx
	const cluster = "intr" // the queue is named for the cluster, as Karpenter's stack names it
	cfg := simstack.SimConfig(300 * time.Millisecond)
	cfg.InterruptionQueue = cluster
	cfg.IAM.Access.Cluster = cluster
	c := simstack.StartCloud(t, r, env.Client, cfg, cluster, log)
	stack := provisioning.StartOn(t, r, c, env.Config, cluster, log)
	clients, cache, state := stack.Clients, stack.Cache, stack.State

	rec := events.NewRecorder(ctx, clients.Kube, "")
	term, err := termination.New(termination.Config{Resync: time.Second}, termination.Deps{Cache: cache, Claims: clients, Kube: clients.Kube,
		State: state, Raft: stack.Raft, Cloud: stack.Cloud, Replacements: stack.Provisioner, Registerer: stack.Registry, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := interruption.New(interruption.Config{Interval: 500 * time.Millisecond}, interruption.Deps{Cache: cache, Claims: clients,
		State: state, Raft: stack.Raft, Offerings: c.Provider, Registerer: stack.Registry, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := joineraws.NewQueue(c.Clients.SQS, cluster)
	if err != nil {
		t.Fatal(err)
	}
	ql, err := interruption.NewQueueLoop(interruption.QueueConfig{OnCommit: h.Wake}, interruption.QueueDeps{Queue: queue,
		Cache: cache, State: state, Raft: stack.Raft, Registerer: stack.Registry, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Go(term.Run)
	r.Go(h.Run)
	r.Go(ql.Run)

	simstack.ApplyManifests(t, ctx, clients, "testdata/spot.yaml")
	const replicas = 2 // 3 CPUs each: one pod per 4-CPU node
	// No kubelet finishes an evicted pod: these go at once.
	simstack.CreateInflate(t, ctx, clients.Kube, replicas, "3", func(s *corev1.PodSpec) { s.TerminationGracePeriodSeconds = new(int64) })
	settled := func(what string) []*karpv1.NodeClaim {
		t.Helper()
		var claims []*karpv1.NodeClaim
		simstack.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			_, bound, live, err := provisioning.Pods(ctx, clients.Kube, "app=inflate")
			if err != nil {
				t.Fatal(err)
			}
			claims = cache.NodeClaims()
			ready := 0
			for _, nc := range claims {
				if nc.DeletionTimestamp == nil && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionReady) {
					ready++
				}
			}
			return bound == replicas && live == replicas && ready == replicas && len(claims) == replicas,
				fmt.Sprintf("pods bound %d live %d, nodeclaims %d ready %d", bound, live, len(claims), ready)
		})
		return claims
	}
	claims := settled("every pod bound on a ready spot nodeclaim")
	a, b := claims[0], claims[1]
	instanceOf := func(nc *karpv1.NodeClaim) string {
		return nc.Status.ProviderID[strings.LastIndexByte(nc.Status.ProviderID, '/')+1:]
	}
	idA, idB := instanceOf(a), instanceOf(b)

	// A: the queue alone.
	if _, err := c.Sim.Interrupt(idA); err != nil {
		t.Fatal(err)
	}
	reportsOf := func(id string) (n, handled int, ids string) {
		for _, rep := range state.Interruptions() {
			if rep.InstanceID == id && rep.Kind == interruption.KindSpotInterruption {
				n++
				if rep.Handled {
					handled++
				}
				ids += rep.ID + " "
			}
		}
		return n, handled, ids
	}
	simstack.Eventually(t, time.Minute, "the queue's report of "+idA+" handled", func() (bool, string) {
		n, handled, ids := reportsOf(idA)
		return n == 1 && handled == 1 && strings.Contains(ids, "/event/"), ids
	})
	inst, ok := state.Instance(idA)
	if !ok {
		t.Fatalf("instance %s not in the state", idA)
	}
	offering := cloud.OfferingKey{InstanceType: inst.InstanceType, Zone: inst.Zone, CapacityType: karpv1.CapacityTypeSpot}
	if available(t, ctx, c.Provider, cache, offering) {
		t.Errorf("offering %s still available after its spot instance was reclaimed", offering)
	}
	settled("nodeclaim " + a.Name + " replaced, every pod bound again")
	if cache.NodeClaim(a.Name) != nil {
		t.Errorf("interrupted nodeclaim %s still there", a.Name)
	}

	// B: the queue's report and the agent's, as the API commits it.
	action, err := c.Sim.Interrupt(idB)
	if err != nil {
		t.Fatal(err)
	}
	simstack.Eventually(t, time.Minute, "the queue's report of "+idB, func() (bool, string) {
		n, _, ids := reportsOf(idB)
		return n == 1, ids
	})
	stack.Raft.MustPropose(t, fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{
		ID: idB + "/" + interruption.KindSpotInterruption + "/" + action.Format(time.RFC3339), InstanceID: idB, NodeName: b.Status.NodeName,
		Kind: interruption.KindSpotInterruption, NoticeTime: action, Deadline: action, ReceivedAt: time.Now()}})
	h.Wake()
	simstack.Eventually(t, time.Minute, "both reports of "+idB+" handled", func() (bool, string) {
		n, handled, ids := reportsOf(idB)
		return n == 2 && handled == 2, ids
	})
	if got, _ := observe.Sample(t, stack.Registry, "joiner_interruption_actions_total", map[string]string{"action": "duplicate"}); got != 1 {
		t.Errorf("duplicate actions %v, want 1 (the second report of %s)", got, idB)
	}
	simstack.Eventually(t, time.Minute, "SpotInterrupted and TerminatingOnInterruption events of "+b.Name, func() (bool, string) {
		evs, err := clients.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + b.Name})
		if err != nil {
			return false, err.Error()
		}
		count := map[string]int32{}
		for _, e := range evs.Items {
			count[e.Reason] += max(1, e.Count)
		}
		if count["SpotInterrupted"] > 1 || count["TerminatingOnInterruption"] > 1 {
			t.Fatalf("events %v: one notice acted on twice", count)
		}
		return count["SpotInterrupted"] == 1 && count["TerminatingOnInterruption"] == 1, fmt.Sprint(count)
	})
	settled("nodeclaim " + b.Name + " replaced, every pod bound again")

	if got, _ := observe.Sample(t, stack.Registry, "karpenter_interruption_received_messages_total",
		map[string]string{"message_type": "spot_interrupted"}); got != 2 {
		t.Errorf("spot_interrupted messages received %v, want 2", got)
	}
	simstack.Eventually(t, time.Minute, "every queue message deleted", func() (bool, string) {
		visible, hidden := c.Sim.QueueMessages()
		return visible+hidden == 0, fmt.Sprintf("%d visible, %d in flight", visible, hidden)
	})
}

// available reports whether the provider offers k for the default class.
func available(t *testing.T, ctx context.Context, p *joineraws.Provider, cache *kube.Cache, k cloud.OfferingKey) bool {
	t.Helper()
	its, err := p.InstanceTypes(ctx, cache.NodeClass("default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		for _, o := range it.Offerings {
			if it.Name == k.InstanceType && o.Zone == k.Zone && o.CapacityType == k.CapacityType {
				return o.Available
			}
		}
	}
	t.Fatalf("no offering %s", k)
	return false
}
