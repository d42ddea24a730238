package drain

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// forced delete, which is no eviction request. A disruption budget's
// refusal (429, or the 500 of a pod two budgets select, as Karpenter reads
// it) is a blocked eviction: the node's FailedDraining Event, in
// Karpenter's words, and ForceAfter counts it.
func TestEvictionCodes(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	pdb := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	// The eviction API's answer, a bare Status (no reason).
	multiPDB := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
	const (
		violates = "Node/ip-10-0-0-1/uid-node FailedDraining: Failed to drain node, evicting pod violates a PDB (Pod=default/web)"
		multiple = "Node/ip-10-0-0-1/uid-node FailedDraining: Failed to drain node, eviction does not support multiple PDBs (Pod=default/web)"
	)
	for _, tc := range []struct {
		name   string
		script []error
		always bool // the last error for ever
		force  bool // ForceAfter
		want   []string
		failed string // the FailedDraining Event ("": none)
	}{
		{name: "evicted", want: []string{"evicted/200"}},
		{name: "blocked then evicted", script: []error{pdb, pdb}, want: []string{"blocked/429", "blocked/429", "evicted/200"}, failed: violates},
		{name: "multiple PDBs then evicted", script: []error{multiPDB, multiPDB}, want: []string{"blocked/500", "blocked/500", "evicted/200"},
			failed: multiple},
		{name: "not found", script: []error{apierrors.NewNotFound(podGR, "web")}, want: []string{"gone/404"}},
		{name: "conflict", script: []error{apierrors.NewConflict(podGR, "web", errors.New("UID precondition"))}, want: []string{"gone/409"}},
		{name: "internal error then evicted", script: []error{apierrors.NewInternalError(errors.New("etcd"))}, want: []string{"error/500", "evicted/200"}},
		{name: "no status then evicted", script: []error{errors.New("connection refused")}, want: []string{"error/0", "evicted/200"}},
		{name: "forced delete", script: []error{pdb}, always: true, force: true, want: []string{"blocked/429", "deleted/0"}, failed: violates},
		{name: "multiple PDBs: forced delete", script: []error{multiPDB}, always: true, force: true, want: []string{"blocked/500", "deleted/0"},
			failed: multiple},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(node(), pod("web"))
			reactEvictions(c, scripted(tc.script, tc.always))
			o := &obs{n: map[string]int{}}
			rec := &recorded{}
			opts := fastOpts()
			opts.Observer, opts.Recorder = o, rec
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
			var failed []string
			for _, ev := range rec.all() {
				if strings.Contains(ev, " FailedDraining: ") {
					failed = append(failed, ev)
				}
			}
			if want := []string{tc.failed}; tc.failed == "" && len(failed) > 0 || tc.failed != "" && !slices.Equal(failed, want) {
				t.Errorf("FailedDraining Events %q, want %q", failed, tc.failed)
			}
		})
	}
}
