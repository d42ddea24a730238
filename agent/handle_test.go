package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/drain"
)

// failing makes the first n requests of verb on resource (no subresource)
// fail with the errors of errs in turn; after fails more, it calls then
// (once).
type failing struct {
	mu    sync.Mutex
	n     int
	errs  []error
	calls int
	after int
	then  func()
}

func (f *failing) react(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "" {
		return false, nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.n >= 0 && f.calls > f.n {
		return false, nil, nil
	}
	if f.then != nil && f.calls == f.after {
		f.then()
	}
	return true, nil, f.errs[(f.calls-1)%len(f.errs)]
}

// TestHandleRetriesCordonAndDrainStart: the IMDS watcher hands a notice
// over once, so an API error while tainting the node or starting its drain
// (a 5xx, a timeout) must not lose it: the agent retries with back-off
// until the node is cordoned and drained, or its context ends.
func TestHandleRetriesCordonAndDrainStart(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	transient := []error{
		apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		apierrors.NewServerTimeout(nodes, "update", 1),
		apierrors.NewServiceUnavailable("apiserver is shutting down"),
		context.DeadlineExceeded, // the client's own timeout
	}
	for _, tc := range []struct {
		name           string
		verb, resource string
		fails          int // -1: for ever
		action         Action
		wantCordoned   bool
		wantCondition  string // the node's Interruption condition reason
	}{
		{name: "node updates fail", verb: "update", resource: "nodes", fails: 4, action: ActionDrain, wantCordoned: true, wantCondition: "Drained"},
		{name: "node reads fail", verb: "get", resource: "nodes", fails: 3, action: ActionDrain, wantCordoned: true, wantCondition: "Drained"},
		{name: "listing the node's pods fails", verb: "list", resource: "pods", fails: 2, action: ActionDrain, wantCordoned: true, wantCondition: "Drained"},
		{name: "taint only: node updates fail", verb: "update", resource: "nodes", fails: 3, action: ActionTaint, wantCordoned: true, wantCondition: "Cordoned"},
		{name: "node updates fail for ever: gives up when the agent stops", verb: "update", resource: "nodes", fails: -1, action: ActionDrain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := &failing{n: tc.fails, errs: transient}
			if tc.fails < 0 {
				f.after, f.then = 5, cancel // the agent stops after 5 failures
			}
			kube.PrependReactor(tc.verb, tc.resource, f.react)
			a, err := New(Config{
				NodeName: "node-1", IMDSGetter: &fakeIMDS{bodies: map[string]string{}},
				Drain: drain.Options{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond},
			}, kube, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			n := imds.Notice{ID: "i-1/" + string(imds.KindSpotInterruption), Kind: imds.KindSpotInterruption, Deadline: time.Now().Add(2 * time.Minute)}
			a.handle(ctx, n, tc.action, time.Now())
			switch {
			case tc.fails >= 0 && ctx.Err() != nil:
				t.Fatalf("handle returned only when the context ended: %v", ctx.Err())
			case tc.fails < 0 && ctx.Err() == nil:
				t.Fatal("handle gave up while the agent was running")
			}
			obj, err := kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "node-1")
			if err != nil {
				t.Fatal(err)
			}
			node := obj.(*corev1.Node)
			wantTaints := 2 // karpenter.sh/disrupted and joiner.io/interruption
			if tc.action == ActionTaint {
				wantTaints = 1 // advisory: not marked disrupted
			}
			if node.Spec.Unschedulable != tc.wantCordoned || len(node.Spec.Taints) != wantTaints && tc.wantCordoned {
				t.Errorf("node unschedulable %v, taints %v; want cordoned %v", node.Spec.Unschedulable, node.Spec.Taints, tc.wantCordoned)
			}
			var reason string
			for _, c := range node.Status.Conditions {
				if c.Type == drain.ConditionType {
					reason = c.Reason
				}
			}
			if reason != tc.wantCondition {
				t.Errorf("condition %s reason %q, want %q", drain.ConditionType, reason, tc.wantCondition)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if tc.fails > 0 && f.calls <= tc.fails {
				t.Errorf("%d %s %s requests, want more than the %d failing ones", f.calls, tc.verb, tc.resource, tc.fails)
			}
		})
	}
}
