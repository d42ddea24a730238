package drain

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

// scripted refuses evictions with the errors of script in turn (the last
// one for ever when always), then lets them through.
func scripted(script []error, always bool) func(pod string) error {
	return func(string) error {
		if len(script) == 0 {
			return nil
		}
		err := script[0]
		if !always || len(script) > 1 {
			script = script[1:]
		}
		return err
	}
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
			reactEvictions(c, scripted(tc.script, tc.always))
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
