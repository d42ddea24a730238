package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/agent"
	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/agent/report"
	"github.com/joiner-dev/joiner/agent/report/reporttest"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/poll"
	"github.com/joiner-dev/joiner/test/testenv"
)

// The whole agent against AEMM (IMDSv2 only) and a real API server: a spot
// notice taints and cordons the node and is committed once by a flaky
// coordinator; a rebalance recommendation (taint-only policy) is reported too;
// the agent's Node Events are found by the Node's UID.
func TestAgentAEMMEndToEnd(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, IMDSv2Only: true, SpotDelay: 2 * time.Second, RebalanceDelay: time.Second})
	ctx := t.Context()
	c := env.Client
	const nodeName = "e2e-node"
	created, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	coord := reporttest.NewCluster(t, 3, 11)
	coord.SetDropRate(0.5)
	runAgent(ctx, t, agent.Config{
		NodeName: nodeName, Interval: time.Second, IMDS: imds.ClientOptions{Endpoint: m.Endpoint},
		Report: report.Options{Endpoints: coord.Endpoints(), RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond},
		Drain:  drain.Options{Recorder: events.NewRecorder(ctx, c, nodeName)},
	}, c)

	var node *corev1.Node
	waitUntil(t, 90*time.Second, "node cordoned with the spot-interruption taint", func() bool {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || !n.Spec.Unschedulable {
			return false
		}
		node = n
		for _, tt := range n.Spec.Taints {
			if tt.Key == drain.TaintInterruptionKey {
				return true
			}
		}
		return false
	})
	waitUntil(t, 90*time.Second, "both notices committed", func() bool { return len(coord.Log()) == 2 })
	time.Sleep(2 * time.Second) // more polls: nothing is reported twice
	kinds := map[string]int{}
	for _, e := range coord.Log() {
		kinds[e.Report.Kind]++
		if e.Report.Node != nodeName || e.Report.InstanceID == "" {
			t.Errorf("report %+v lacks node or instance", e.Report)
		}
	}
	if kinds[string(imds.KindSpotInterruption)] != 1 || kinds[string(imds.KindRebalance)] != 1 {
		t.Errorf("committed %v, want one spot and one rebalance report", kinds)
	}
	var keys []string
	for _, tt := range node.Spec.Taints {
		keys = append(keys, tt.Key+"="+tt.Value)
	}
	t.Logf("node taints: %v", keys)

	// The agent's Events on its Node carry the Node's UID, so the query
	// `kubectl describe node` makes (a field selector on involvedObject.uid)
	// returns them; they come from source "karpenter" with the node as host.
	selector := fields.Set{"involvedObject.uid": string(created.UID), "involvedObject.kind": "Node"}.AsSelector().String()
	var found map[string]corev1.Event
	waitUntil(t, time.Minute, "the agent's Cordoned and Drained Events listed by the node's UID", func() bool {
		l, err := c.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Fatalf("listing events by %s: %v", selector, err)
		}
		found = map[string]corev1.Event{}
		for _, e := range l.Items {
			found[e.Reason] = e
		}
		_, cordoned := found[events.Cordoned]
		_, drained := found[events.Drained]
		return cordoned && drained
	})
	for reason, e := range found {
		if e.InvolvedObject.Name != nodeName || e.Source.Component != events.Component || e.Source.Host != nodeName {
			t.Errorf("%s Event: involved %+v, source %+v; want node %s from karpenter on %s", reason, e.InvolvedObject, e.Source, nodeName, nodeName)
		}
	}
}

// NTH's cancellation, end to end (AEMM, a real API server): a scheduled
// reboot cordons, taints and labels a NodePool node out of load
// balancers; once AEMM shows the event canceled, the agent takes off
// exactly that, leaving a taint someone else put there.
func TestAgentCanceledEventUncordons(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSEvents, IMDSv2Only: true, EventCode: "system-reboot", EventState: "active"})
	ctx := t.Context()
	c := env.Client
	const nodeName = "event-node"
	theirs := corev1.Taint{Key: "example.com/theirs", Effect: corev1.TaintEffectNoSchedule}
	_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{theirs}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(ctx, t, agent.Config{
		NodeName: nodeName, Interval: 200 * time.Millisecond, IMDS: imds.ClientOptions{Endpoint: m.Endpoint}, CoordinatorDrains: true,
		BootID: func() (string, error) { return "boot-1", nil },
	}, c)

	node := func() *corev1.Node {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	has := func(n *corev1.Node, key string) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
	}
	waitUntil(t, 90*time.Second, "node cordoned, tainted and out of load balancers", func() bool {
		n := node()
		return n.Spec.Unschedulable && has(n, karpv1.TaintDisruptedKey) && has(n, drain.TaintInterruptionKey) && n.Labels[drain.LabelExcludeFromLB] != ""
	})
	if err := m.RestartWith(testenv.IMDSOptions{Scenario: testenv.IMDSEvents, IMDSv2Only: true, EventCode: "system-reboot", EventState: "canceled"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, "the agent's cordon taken off", func() bool {
		n := node()
		return !n.Spec.Unschedulable && !has(n, karpv1.TaintDisruptedKey) && !has(n, drain.TaintInterruptionKey)
	})
	n := node()
	if !has(n, theirs.Key) || n.Labels[drain.LabelExcludeFromLB] != "" || n.Annotations[karpv1.AnnotationAgentHold] != "" {
		t.Errorf("after the cancel: taints %v, labels %v, annotations %v; want %s kept, no label, no hold", n.Spec.Taints, n.Labels, n.Annotations, theirs.Key)
	}
}

// runAgent builds an agent from cfg on c and runs it until the test ends
// (or ctx is done); the test's cleanup stops it and waits for Run to return.
func runAgent(ctx context.Context, t *testing.T, cfg agent.Config, c kubernetes.Interface) {
	t.Helper()
	a, err := agent.New(cfg, c, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 50*time.Millisecond, what, cond)
}
