package drain

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// scripted is a reactor for create pods/eviction: it answers the errors of
// script in turn (the last one for ever when always), then deletes the pod
// and answers 201.
type scripted struct {
	mu     sync.Mutex
	script []error
	always bool
	client *fake.Clientset
}

func (s *scripted) react(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateAction)
	if !ok || a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := ca.GetObject().(*policyv1.Eviction)
	s.mu.Lock()
	if len(s.script) > 0 {
		err := s.script[0]
		if !s.always || len(s.script) > 1 {
			s.script = s.script[1:]
		}
		s.mu.Unlock()
		return true, nil, err
	}
	s.mu.Unlock()
	return true, nil, s.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), ev.Name)
}

// TestEvictionCodes: the Observer gets each eviction request's status as
// Karpenter counts it (200 for an eviction made, though the API answers
// 201; the error's status code), 0 for errors without a status and for a
// forced delete, which is no eviction request.
func TestEvictionCodes(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	pdb := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	for _, tc := range []struct {
		name   string
		script []error
		always bool // the last error for ever
		force  bool // ForceAfter
		want   []string
	}{
		{name: "evicted", want: []string{"evicted/200"}},
		{name: "blocked then evicted", script: []error{pdb, pdb}, want: []string{"blocked/429", "blocked/429", "evicted/200"}},
		{name: "not found", script: []error{apierrors.NewNotFound(podGR, "web")}, want: []string{"gone/404"}},
		{name: "conflict", script: []error{apierrors.NewConflict(podGR, "web", errors.New("UID precondition"))}, want: []string{"gone/409"}},
		{name: "internal error then evicted", script: []error{apierrors.NewInternalError(errors.New("etcd"))}, want: []string{"error/500", "evicted/200"}},
		{name: "no status then evicted", script: []error{errors.New("connection refused")}, want: []string{"error/0", "evicted/200"}},
		{name: "forced delete", script: []error{pdb}, always: true, force: true, want: []string{"blocked/429", "deleted/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(node(), pod("web"))
			s := &scripted{script: tc.script, always: tc.always, client: c}
			c.PrependReactor("create", "pods", s.react)
			o := &obs{n: map[string]int{}}
			opts := fastOpts()
			opts.Observer = o
			if tc.force {
				opts.ForceAfter = 50 * time.Millisecond
			}
			d := New(c, zaptest.NewLogger(t), opts)
			if _, err := d.Drain(context.Background(), Request{Node: nodeName, Reason: "spot-interruption", Deadline: time.Now().Add(10 * time.Second), Evict: true}); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			got := o.all()
			if tc.always {
				got = slices.Compact(got) // how many attempts are refused before it gives up depends on timing
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("observed %v, want %v", got, tc.want)
			}
		})
	}
}
