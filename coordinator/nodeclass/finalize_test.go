package nodeclass

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/nodeclass/nodeclasstest"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/observe"
)

// finalizingWriter is a nodeclasstest.Writer that also sets finalizers (on
// the cached classes, as the informer would show them).
type finalizingWriter struct {
	nodeclasstest.Writer
	cache *fake.Cache
	err   error
	sets  []string
}

func (w *finalizingWriter) SetFinalizers(_ context.Context, gvr schema.GroupVersionResource, name, _ string, fins []string) error {
	if w.err != nil {
		return w.err
	}
	if gvr != kube.EC2NodeClassesGVR {
		return errors.New("not an EC2NodeClass")
	}
	w.sets = append(w.sets, name+"="+strings.Join(fins, ","))
	for _, nc := range w.cache.ClassList {
		if nc.Name == name {
			nc.Finalizers = slices.Clone(fins)
		}
	}
	return nil
}

// cleaningCloud is fakeCloud that records class clean-ups.
type cleaningCloud struct {
	fakeCloud
	err     error
	cleaned []string
}

func (c *cleaningCloud) FinalizeNodeClass(_ context.Context, nc *awsv1.EC2NodeClass) error {
	if c.err != nil {
		return c.err
	}
	c.cleaned = append(c.cleaned, nc.Name)
	return nil
}

func claimOfClass(name, class string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodeClaimSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}
}

// TestClassTermination: live classes get Karpenter's termination
// finalizer; a deleted class waits (an Event names its NodeClaims) until
// none uses it, then the cloud cleans up and the finalizer goes; a failed
// clean-up keeps the finalizer and is retried.
func TestClassTermination(t *testing.T) {
	c := &fake.Cache{ClassList: []*awsv1.EC2NodeClass{class("default"), class("other")},
		ClaimList: []*karpv1.NodeClaim{claimOfClass("a", "default"), claimOfClass("b", "default"), claimOfClass("c", "other")}}
	w := &finalizingWriter{cache: c}
	cl := &cleaningCloud{}
	r := newRig(c)
	r.l = New(Config{Now: func() time.Time { return r.now }}, Deps{Cache: c, Kube: w, Cloud: cl, Catalog: r.catalog, Recorder: r.rec})
	ctx := context.Background()
	r.l.Reconcile(ctx)
	for _, nc := range c.ClassList {
		if !slices.Equal(nc.Finalizers, []string{"karpenter.k8s.aws/termination"}) {
			t.Errorf("%s finalizers %v", nc.Name, nc.Finalizers)
		}
	}
	r.l.Reconcile(ctx)
	if len(w.sets) != 2 {
		t.Errorf("finalizer writes %v, want one per class", w.sets)
	}

	// Deleted while NodeClaims use it: it waits, saying so once.
	now := metav1.Now()
	c.ClassList[0].DeletionTimestamp = &now
	r.l.Reconcile(ctx)
	r.l.Reconcile(ctx)
	events := observe.Events(r.rec)
	if len(cl.cleaned) != 0 || len(events) != 1 || !strings.Contains(events[0], "WaitingOnNodeClaimTermination Waiting on NodeClaim termination for a, b") {
		t.Fatalf("cleaned %v, events %v", cl.cleaned, events)
	}
	if _, ok := r.catalog.Classes()["default"]; ok {
		t.Error("a deleted class is still published")
	}

	// Its NodeClaims gone, a failing clean-up keeps the finalizer.
	c.ClaimList = c.ClaimList[2:]
	cl.err = errors.New("AccessDenied")
	r.l.Reconcile(ctx)
	if !slices.Contains(c.ClassList[0].Finalizers, "karpenter.k8s.aws/termination") {
		t.Fatal("finalizer removed although the clean-up failed")
	}
	if events := strings.Join(observe.Events(r.rec), "\n"); !strings.Contains(events, "FailedCleanup AccessDenied") {
		t.Errorf("events %q", events)
	}
	cl.err = nil
	r.l.Reconcile(ctx)
	if len(c.ClassList[0].Finalizers) != 0 || !slices.Equal(cl.cleaned, []string{"default"}) {
		t.Errorf("after the clean-up: finalizers %v, cleaned %v", c.ClassList[0].Finalizers, cl.cleaned)
	}
	if !slices.Contains(c.ClassList[1].Finalizers, "karpenter.k8s.aws/termination") {
		t.Error("the live class lost its finalizer")
	}
}
