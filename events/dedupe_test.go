package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestDedupe: Karpenter's recorder drops an Event whose reason and dedupe
// values were recorded within the timeout (two minutes unless the Event
// names its own), and records it again after.
func TestDedupe(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := NewDedupe(func() time.Time { return now })
	steps := []struct {
		advance time.Duration
		timeout time.Duration
		reason  string
		values  []string
		want    bool
	}{
		{0, 0, TerminationGracePeriodExpiring, []string{"node-a"}, true},
		{0, 0, TerminationGracePeriodExpiring, []string{"node-a"}, false},
		{0, 0, TerminationGracePeriodExpiring, []string{"node-b"}, true}, // other values
		{0, 0, FailedDraining, []string{"node-a"}, true},                 // other reason
		{119 * time.Second, 0, TerminationGracePeriodExpiring, []string{"node-a"}, false},
		{time.Second, 0, TerminationGracePeriodExpiring, []string{"node-a"}, true}, // two minutes passed
		{0, time.Minute, NoCompatibleInstanceTypes, []string{"np-uid"}, true},
		{59 * time.Second, time.Minute, NoCompatibleInstanceTypes, []string{"np-uid"}, false},
		{time.Second, time.Minute, NoCompatibleInstanceTypes, []string{"np-uid"}, true},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := d.Allow(s.timeout, s.reason, s.values...); got != s.want {
			t.Errorf("step %d: Allow(%v, %s, %v) = %v, want %v", i, s.timeout, s.reason, s.values, got, s.want)
		}
	}
}

// TestObjectKey: an object's Events are deduped by its UID, or by its
// type, namespace and name while it has none.
func TestObjectKey(t *testing.T) {
	var noPool *karpv1.NodePool
	cases := []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"uid", &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np-uid"}}, "np-uid"},
		{"cluster-scoped, no uid", &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, "*v1.NodePool/default"},
		{"namespaced, no uid", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}, "*v1.Pod/ns/web"},
		{"nil pointer", noPool, ""},
		{"nil", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectKey(tc.obj); got != tc.want {
				t.Errorf("ObjectKey = %q, want %q", got, tc.want)
			}
		})
	}
}
