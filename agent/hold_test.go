package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/agent/report"
	"github.com/joiner-dev/joiner/agent/report/reporttest"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/drain"
)

const (
	eventActive   = `[{"NotBefore":"21 Nov 2030 13:00:00 GMT","Code":"system-reboot","EventId":"ev-1","State":"active"}]`
	eventCanceled = `[{"NotBefore":"21 Nov 2030 13:00:00 GMT","Code":"system-reboot","EventId":"ev-1","State":"canceled"}]`
	eventDone     = `[{"NotBefore":"21 Nov 2030 13:00:00 GMT","Code":"system-reboot","EventId":"ev-1","State":"completed"}]`
	spotNotice    = `{"action":"terminate","time":"2030-11-21T12:02:00Z"}`
)

// nodePoolNode is a node Joiner launched (it has a NodePool).
func nodePoolNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{karpv1.LabelNodePool: "default"}}}
}

// startAgent runs an agent (coordinator drains, boot boot) on kube and im
// until the test ends.
func startAgent(t *testing.T, kube *fake.Clientset, im *fakeIMDS, boot string) *Agent {
	t.Helper()
	a, err := New(Config{
		NodeName: "node-1", IMDSGetter: im, Interval: 10 * time.Millisecond, CoordinatorDrains: true,
		BootID: func() (string, error) { return boot, nil },
		Drain:  drain.Options{RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond},
	}, kube, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

func getNode(t *testing.T, kube *fake.Clientset) *corev1.Node {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func taintKeys(n *corev1.Node) []string {
	var ks []string
	for _, t := range n.Spec.Taints {
		ks = append(ks, t.Key)
	}
	slices.Sort(ks)
	return ks
}

func heldNotices(t *testing.T, n *corev1.Node) []string {
	t.Helper()
	s, ok := n.Annotations[karpv1.AnnotationAgentHold]
	if !ok {
		return nil
	}
	var h hold
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range h.Notices {
		ids = append(ids, string(x.Kind))
	}
	slices.Sort(ids)
	return ids
}

func condition(n *corev1.Node) (corev1.ConditionStatus, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == drain.ConditionType {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// TestHoldTakenOffWhenNoticeEnds: the agent cordons and taints its node
// for a scheduled event, and when IMDS shows the event canceled or
// completed it takes off exactly what it added: a cordon, taint or label
// that was there before stays, and so does the whole hold while another
// notice (a spot interruption) still stands for it.
func TestHoldTakenOffWhenNoticeEnds(t *testing.T) {
	disrupted := corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name  string
		node  func() *corev1.Node
		ended string
		spot  bool
		// after the event ended
		wantUnschedulable bool
		wantTaints        []string
		wantLabel         string
		wantHeld          []string
		wantCondition     string
	}{
		{name: "canceled", node: nodePoolNode, ended: eventCanceled, wantCondition: ReasonNoticeEnded},
		{name: "completed", node: nodePoolNode, ended: eventDone, wantCondition: ReasonNoticeEnded},
		{name: "gone from IMDS", node: nodePoolNode, ended: "[]", wantCondition: ReasonNoticeEnded},
		{name: "someone else's cordon, taint and label stay", node: func() *corev1.Node {
			n := nodePoolNode()
			n.Spec.Unschedulable = true
			n.Spec.Taints = []corev1.Taint{disrupted}
			n.Labels[drain.LabelExcludeFromLB] = "true"
			return n
		}, ended: eventCanceled, wantUnschedulable: true, wantTaints: []string{karpv1.TaintDisruptedKey}, wantLabel: "true", wantCondition: ReasonNoticeEnded},
		{name: "a spot notice still holds the node", node: nodePoolNode, ended: eventCanceled, spot: true,
			wantUnschedulable: true, wantTaints: []string{drain.TaintInterruptionKey, karpv1.TaintDisruptedKey}, wantLabel: excludeFromLBValue,
			wantHeld: []string{string(imds.KindSpotInterruption)}, wantCondition: "Cordoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(tc.node())
			im := &fakeIMDS{bodies: map[string]string{imds.PathInstanceID: "i-1", imds.PathScheduledEvents: eventActive}}
			if tc.spot {
				im.set(imds.PathSpotInstanceAction, spotNotice)
			}
			startAgent(t, kube, im, "boot-1")
			want := []string{string(imds.KindScheduledEvent)}
			if tc.spot {
				want = []string{string(imds.KindScheduledEvent), string(imds.KindSpotInterruption)}
			}
			waitFor(t, func() bool {
				n := getNode(t, kube)
				return n.Spec.Unschedulable && len(n.Spec.Taints) == 2 && n.Labels[drain.LabelExcludeFromLB] != "" &&
					slices.Equal(heldNotices(t, n), want)
			}, "node cordoned, tainted and held for the notices")

			im.set(imds.PathScheduledEvents, tc.ended)
			waitFor(t, func() bool {
				return slices.Equal(heldNotices(t, getNode(t, kube)), tc.wantHeld)
			}, "the scheduled event dropped from the hold")
			waitFor(t, func() bool {
				_, reason := condition(getNode(t, kube))
				return reason == tc.wantCondition
			}, "condition reason "+tc.wantCondition)
			n := getNode(t, kube)
			if n.Spec.Unschedulable != tc.wantUnschedulable || !slices.Equal(taintKeys(n), tc.wantTaints) || n.Labels[drain.LabelExcludeFromLB] != tc.wantLabel {
				t.Errorf("after the event ended: unschedulable %v, taints %v, %s=%q; want %v, %v, %q",
					n.Spec.Unschedulable, taintKeys(n), drain.LabelExcludeFromLB, n.Labels[drain.LabelExcludeFromLB],
					tc.wantUnschedulable, tc.wantTaints, tc.wantLabel)
			}
		})
	}
}

// TestHoldAfterRestart: an agent starting on a node an earlier agent
// held takes the hold off when the node rebooted since (its boot ID
// changed) or when the scheduled event it was held for ended meanwhile;
// a hold for a notice still in force stays.
func TestHoldAfterRestart(t *testing.T) {
	held := func(boot string, notices ...heldNotice) func() *corev1.Node {
		return func() *corev1.Node {
			n := nodePoolNode()
			n.Spec.Unschedulable = true
			n.Spec.Taints = drain.Taints(string(notices[0].Kind))
			n.Labels[drain.LabelExcludeFromLB] = excludeFromLBValue
			b, _ := json.Marshal(hold{BootID: boot, Notices: notices, Cordoned: true, ExcludeFromLB: true, Taints: []heldTaint{
				{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}, {Key: drain.TaintInterruptionKey, Effect: corev1.TaintEffectNoSchedule}}})
			n.Annotations = map[string]string{karpv1.AnnotationAgentHold: string(b)}
			return n
		}
	}
	spot := heldNotice{ID: "i-1/spot-interruption/2030-11-21T12:02:00Z", Kind: imds.KindSpotInterruption}
	event := heldNotice{ID: "i-1/scheduled-event/2030-11-21T13:00:00Z", Kind: imds.KindScheduledEvent, EventID: "ev-1"}
	for _, tc := range []struct {
		name       string
		node       func() *corev1.Node
		imds       map[string]string
		wantHeld   bool
		wantReason string
	}{
		{name: "rebooted", node: held("boot-0", event), imds: map[string]string{imds.PathScheduledEvents: eventDone}, wantReason: ReasonRebooted},
		{name: "rebooted, spot notice", node: held("boot-0", spot), wantReason: ReasonRebooted},
		{name: "event completed while no agent ran", node: held("boot-1", event), imds: map[string]string{imds.PathScheduledEvents: eventDone}, wantReason: ReasonNoticeEnded},
		{name: "event canceled and gone while no agent ran", node: held("boot-1", event), wantReason: ReasonNoticeEnded},
		{name: "same boot, spot notice", node: held("boot-1", spot), wantHeld: true},
		// a coordinator took the NodePool node over (it deletes the
		// NodeClaim): it stays closed to new pods after a reboot too
		{name: "rebooted, handed over", node: held("boot-0", heldNotice{ID: event.ID, Kind: event.Kind, EventID: event.EventID, HandedOver: true}),
			wantHeld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(tc.node())
			im := &fakeIMDS{bodies: map[string]string{imds.PathInstanceID: "i-1"}}
			for p, b := range tc.imds {
				im.set(p, b)
			}
			if tc.wantHeld {
				// Nothing to wait for: the start-up check, run alone,
				// must leave the node untouched.
				updates := 0
				kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					updates++
					return false, nil, nil
				})
				a, err := New(Config{NodeName: "node-1", IMDSGetter: im, CoordinatorDrains: true,
					BootID: func() (string, error) { return "boot-1", nil }}, kube, zaptest.NewLogger(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := a.recoverHold(context.Background()); err != nil {
					t.Fatal(err)
				}
				n := getNode(t, kube)
				if !n.Spec.Unschedulable || n.Annotations[karpv1.AnnotationAgentHold] == "" || updates != 0 {
					t.Errorf("hold of a notice in force: unschedulable %v, annotation %q, %d node updates; want it kept, untouched",
						n.Spec.Unschedulable, n.Annotations[karpv1.AnnotationAgentHold], updates)
				}
				return
			}
			startAgent(t, kube, im, "boot-1")
			waitFor(t, func() bool {
				_, reason := condition(getNode(t, kube))
				return reason == tc.wantReason
			}, "condition reason "+tc.wantReason)
			n := getNode(t, kube)
			if n.Spec.Unschedulable || len(n.Spec.Taints) != 0 || n.Labels[drain.LabelExcludeFromLB] != "" || n.Annotations[karpv1.AnnotationAgentHold] != "" {
				t.Errorf("hold not taken off: unschedulable %v, taints %v, labels %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations)
			}
		})
	}
}

// TestClaimWhoseNode: with the coordinator draining, a drain notice on a
// node without a NodePool (a managed node group's: no NodeClaim, so no
// coordinator drain) leaves it schedulable; a NodePool node is cordoned,
// tainted and labelled out of load balancers in one update (as Karpenter
// taints and labels together); a taint-only notice cordons any node
// without the label; an agent that drains itself cordons any node.
func TestClaimWhoseNode(t *testing.T) {
	for _, tc := range []struct {
		name              string
		nodePool          bool
		coordinatorDrains bool
		action            Action
		wantCordoned      bool
		wantLabel         bool
	}{
		{name: "coordinator drains, NodePool node", nodePool: true, coordinatorDrains: true, action: ActionDrain, wantCordoned: true, wantLabel: true},
		{name: "coordinator drains, node without NodePool", coordinatorDrains: true, action: ActionDrain},
		{name: "coordinator drains, node without NodePool, taint only", coordinatorDrains: true, action: ActionTaint, wantCordoned: true},
		{name: "coordinator drains, NodePool node, taint only", nodePool: true, coordinatorDrains: true, action: ActionTaint, wantCordoned: true},
		{name: "local drain, node without NodePool", action: ActionDrain, wantCordoned: true, wantLabel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := nodePoolNode()
			if !tc.nodePool {
				node.Labels = nil
			}
			kube := fake.NewClientset(node)
			var mu sync.Mutex
			var updates []*corev1.Node
			kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "" {
					mu.Lock()
					updates = append(updates, a.(k8stesting.UpdateAction).GetObject().(*corev1.Node).DeepCopy())
					mu.Unlock()
				}
				return false, nil, nil
			})
			a, err := New(Config{
				NodeName: "node-1", IMDSGetter: &fakeIMDS{bodies: map[string]string{}}, CoordinatorDrains: tc.coordinatorDrains,
				BootID: func() (string, error) { return "boot-1", nil },
				Drain:  drain.Options{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond},
			}, kube, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n := imds.Notice{ID: "i-1/spot-interruption/x", Kind: imds.KindSpotInterruption, Deadline: time.Now().Add(2 * time.Minute)}
			a.handle(ctx, n, tc.action, time.Now())
			if ctx.Err() != nil {
				t.Fatal("handle returned only when the context ended")
			}
			got := getNode(t, kube)
			if got.Spec.Unschedulable != tc.wantCordoned || (len(got.Spec.Taints) > 0) != tc.wantCordoned {
				t.Errorf("unschedulable %v, taints %v; want cordoned and tainted %v", got.Spec.Unschedulable, got.Spec.Taints, tc.wantCordoned)
			}
			if has := got.Labels[drain.LabelExcludeFromLB] != ""; has != tc.wantLabel {
				t.Errorf("label %s set %v, want %v", drain.LabelExcludeFromLB, has, tc.wantLabel)
			}
			mu.Lock()
			defer mu.Unlock()
			if !tc.wantCordoned {
				if len(updates) != 0 {
					t.Errorf("%d node updates, want none", len(updates))
				}
				return
			}
			// The first update takes the node: taints, cordon and label at once.
			first := updates[0]
			if !first.Spec.Unschedulable || len(first.Spec.Taints) == 0 || (first.Labels[drain.LabelExcludeFromLB] != "") != tc.wantLabel ||
				first.Annotations[karpv1.AnnotationAgentHold] == "" {
				t.Errorf("first node update: unschedulable %v, taints %v, labels %v, annotations %v; want all in one",
					first.Spec.Unschedulable, first.Spec.Taints, first.Labels, first.Annotations)
			}
		})
	}
}

// TestHoldAfterReport: a notice whose report a coordinator acknowledged
// hands a NodePool node over to it (it deletes the NodeClaim, as Karpenter
// on a scheduled change, and drains the node): the notice's end leaves
// the node cordoned, closed to new pods while it goes. A node without a
// NodePool (the agent drains it itself) is nobody's to take: it is
// uncordoned as without a report.
func TestHoldAfterReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodePool bool
		wantKept bool
	}{
		{name: "NodePool node", nodePool: true, wantKept: true},
		{name: "node without NodePool", nodePool: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := nodePoolNode()
			if !tc.nodePool {
				node.Labels = nil
			}
			kube := fake.NewClientset(node)
			statusOnly(kube)
			coord := reporttest.NewCluster(t, 1, 3)
			a, err := New(Config{
				NodeName: "node-1", IMDSGetter: &fakeIMDS{bodies: map[string]string{}}, CoordinatorDrains: tc.nodePool,
				BootID: func() (string, error) { return "boot-1", nil },
				Drain:  drain.Options{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond},
				Report: report.Options{Endpoints: coord.Endpoints(), RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond},
			}, kube, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n := imds.Notice{ID: "i-1/scheduled-event/2030-11-21T13:00:00Z", Kind: imds.KindScheduledEvent, EventID: "ev-1", InstanceID: "i-1",
				Action: "system-reboot", Deadline: time.Now().Add(time.Hour)}
			a.onNotice(ctx, n)
			waitFor(t, func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return a.handedOver[n.ID] && getNode(t, kube).Spec.Unschedulable
			}, "report acknowledged and node cordoned")
			if tc.nodePool {
				// the hand-over outlives the agent: it is on the node
				waitFor(t, func() bool {
					h, ok := a.readHold(getNode(t, kube))
					return ok && len(h.Notices) == 1 && h.Notices[0].HandedOver
				}, "hand-over recorded in the hold")
			}
			ended := n
			ended.Ended = true
			a.onNotice(ctx, ended)
			a.wg.Wait()
			got := getNode(t, kube)
			if kept := got.Spec.Unschedulable && len(got.Spec.Taints) > 0; kept != tc.wantKept {
				t.Errorf("after the end: unschedulable %v, taints %v; want kept %v", got.Spec.Unschedulable, got.Spec.Taints, tc.wantKept)
			}
		})
	}
}

// statusOnly makes the fake clientset's UpdateStatus of a Node change its
// status alone, as the API server does: the fake stores the whole object,
// so the drain's Drained condition, written from a read made before the
// notice ended, put back the cordon the agent had just taken off (seen
// once under load).
func statusOnly(kube *fake.Clientset) {
	kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := u.GetObject().(*corev1.Node)
		cur, err := kube.Tracker().Get(a.GetResource(), "", in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*corev1.Node).DeepCopy()
		out.Status = in.Status
		return true, out, kube.Tracker().Update(a.GetResource(), out, "")
	})
}
