package events

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/poll"
)

// TestRecorderWritesKarpentersSource: Events leave as Karpenter's do
// (source and reporting controller "karpenter"), with the host given, and
// reference their object by kind, name and UID (Nodes and NodeClaims
// alike), so `kubectl describe` finds them.
func TestRecorderWritesKarpentersSource(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kube := fake.NewClientset()
	rec := NewRecorder(ctx, kube, "ip-10-0-0-1")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", UID: "n-uid"}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", UID: "c-uid"}}
	Publish(rec, SpotInterruption(node, nc)...)
	var got []corev1.Event
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "two Events", func() bool {
		l, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = l.Items
		return len(got) == 2
	})
	uids := map[string]string{}
	for _, e := range got {
		if e.Source.Component != "karpenter" || e.ReportingController != "karpenter" || e.Source.Host != "ip-10-0-0-1" {
			t.Errorf("%s: source %+v, reporting controller %q; want karpenter on ip-10-0-0-1", e.Name, e.Source, e.ReportingController)
		}
		if e.Reason != SpotInterrupted || e.Type != corev1.EventTypeWarning {
			t.Errorf("%s: %s %s", e.Name, e.Type, e.Reason)
		}
		uids[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = string(e.InvolvedObject.UID)
	}
	if uids["Node/ip-10-0-0-1"] != "n-uid" || uids["NodeClaim/default-abcde"] != "c-uid" {
		t.Errorf("involved objects %v, want the Node's and the NodeClaim's UIDs", uids)
	}
}
