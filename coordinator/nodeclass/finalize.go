package nodeclass

import (
	"context"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/events"
)

// ClassCleaner deletes what the cloud keeps for a class being deleted
// (cloud/aws.Provider: its instance profiles and launch templates). A
// Cloud without it has nothing to delete.
type ClassCleaner interface {
	FinalizeNodeClass(ctx context.Context, nc *awsv1.EC2NodeClass) error
}

// FinalizerWriter sets an object's finalizers (kube.Clients). With a
// Writer without it, classes get no finalizer and nothing waits on their
// deletion.
type FinalizerWriter interface {
	SetFinalizers(ctx context.Context, gvr schema.GroupVersionResource, name, resourceVersion string, finalizers []string) error
}

// ensureFinalizer puts Karpenter's EC2NodeClass termination finalizer on
// a live class, so deleting it waits for its NodeClaims and clean-up.
func (l *Loop) ensureFinalizer(ctx context.Context, cached *awsv1.EC2NodeClass) {
	fw, ok := l.d.Kube.(FinalizerWriter)
	if !ok || slices.Contains(cached.Finalizers, karpv1.NodeClassTerminationFinalizer) {
		return
	}
	fins := append(slices.Clone(cached.Finalizers), karpv1.NodeClassTerminationFinalizer)
	if err := fw.SetFinalizers(ctx, kube.EC2NodeClassesGVR, cached.Name, cached.ResourceVersion, fins); err != nil &&
		ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		l.log.Warn("adding the termination finalizer", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
	}
}

// finalize ends a deleted class as Karpenter's EC2NodeClass termination
// does: while NodeClaims use it, it waits (an Event names them); then the
// cloud deletes the class's instance profiles and launch templates, and
// the finalizer is removed. A failure is retried on the next pass.
func (l *Loop) finalize(ctx context.Context, cached *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim) {
	fw, ok := l.d.Kube.(FinalizerWriter)
	if !ok || !slices.Contains(cached.Finalizers, karpv1.NodeClassTerminationFinalizer) {
		return
	}
	key := "ec2nodeclass-termination/" + cached.Name
	if users := claimsOf(cached.Name, claims); len(users) > 0 {
		if l.changed(key, strings.Join(users, ",")) {
			events.Publish(l.d.Recorder, events.ClassWaitsForClaims(cached, users))
		}
		return
	}
	if cleaner, ok := l.d.Cloud.(ClassCleaner); ok {
		if err := cleaner.FinalizeNodeClass(ctx, cached); err != nil {
			if ctx.Err() == nil && l.changed(key, err.Error()) {
				l.log.Warn("deleting the cloud resources of a deleted ec2nodeclass", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
				l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "FailedCleanup", "%v", err)
			}
			return
		}
	}
	fins := slices.DeleteFunc(slices.Clone(cached.Finalizers), func(f string) bool { return f == karpv1.NodeClassTerminationFinalizer })
	if err := fw.SetFinalizers(ctx, kube.EC2NodeClassesGVR, cached.Name, cached.ResourceVersion, fins); err != nil {
		if ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			l.log.Warn("removing the termination finalizer", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
		}
		return
	}
	delete(l.said, key)
	l.log.Info("finalized ec2nodeclass", zap.String("ec2nodeclass", cached.Name))
}

// claimsOf names the NodeClaims whose nodeClassRef is the class, sorted.
func claimsOf(class string, claims []*karpv1.NodeClaim) []string {
	var out []string
	for _, c := range claims {
		if r := c.Spec.NodeClassRef; r != nil && r.Name == class && r.Kind == "EC2NodeClass" && (r.Group == "" || r.Group == awsv1.Group) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}
