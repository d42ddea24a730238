package termination

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/logging"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Volumes is what the wait for volume detachment reads (kube.Cache): after
// the drain, the instance is terminated only once the attach-detach
// controller has deleted the VolumeAttachments of the node's evicted pods,
// so their volumes can attach elsewhere (Karpenter's
// awaitVolumeDetachment), or once the terminationGracePeriod has passed.
type Volumes interface {
	VolumeAttachmentsOnNode(node string) []*storagev1.VolumeAttachment
	PodsOnNode(node string) []*corev1.Pod
	PersistentVolumeClaim(namespace, name string) *corev1.PersistentVolumeClaim
}

// PendingAttachments names the VolumeAttachments that hold the
// termination of a drained node, sorted: those of PersistentVolumes, except
// the volumes of pods the drain leaves on the node (Undrainable), which
// stay attached until the instance goes. claim looks up a
// PersistentVolumeClaim (nil: none).
func PendingAttachments(vas []*storagev1.VolumeAttachment, pods []*corev1.Pod,
	claim func(namespace, name string) *corev1.PersistentVolumeClaim, now time.Time) []string {
	if len(vas) == 0 {
		return nil
	}
	kept := map[string]bool{} // PersistentVolumes of pods that stay
	for _, p := range pods {
		if !Undrainable(p, now) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			var name string
			switch {
			case v.PersistentVolumeClaim != nil:
				name = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil: // the generic ephemeral volume's claim
				name = p.Name + "-" + v.Name
			default:
				continue
			}
			if pvc := claim(p.Namespace, name); pvc != nil && pvc.Spec.VolumeName != "" {
				kept[pvc.Spec.VolumeName] = true
			}
		}
	}
	var out []string
	for _, va := range vas {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && !kept[*pv] {
			out = append(out, va.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Undrainable reports whether the drain leaves a pod on the node, so
// the instance does not wait for its volumes: not drainable as Karpenter
// has it (tolerating karpenter.sh/disrupted, stuck terminating, a mirror
// pod). DaemonSet pods are drained (in their groups) and count.
func Undrainable(p *corev1.Pod, now time.Time) bool { return !podutil.Drainable(p, now) }

// volumesUndecided: the NodeClaim's VolumesDetached condition is not yet
// True or False (absent, or Unknown while waiting).
func volumesUndecided(nc *karpv1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == karpv1.ConditionVolumesDetached {
			return c.Status == metav1.ConditionUnknown
		}
	}
	return true
}

// Reasons (and messages) of the VolumesDetached condition, Karpenter's:
// the attachments waited for are named in the Node's
// AwaitingVolumeDetachment Event, not in the condition.
const (
	reasonAwaitingVolumes = "AwaitingVolumeDetachment"
	reasonGraceElapsed    = "TerminationGracePeriodElapsed"
)

// awaitVolumes records that the instance waits for VolumeAttachments
// (VolumesDetached Unknown) and names them on the Node, as Karpenter does
// on every pass, deduplicated per Node (events.DefaultDedupeTimeout).
func (c *Controller) awaitVolumes(ctx context.Context, log *zap.Logger, in ClaimInput) error {
	changed, err := c.putClaimCondition(ctx, in.Claim.Name, karpv1.ConditionVolumesDetached, metav1.ConditionUnknown, reasonAwaitingVolumes, reasonAwaitingVolumes)
	if err != nil {
		return err
	}
	if changed {
		log.Info("waiting for volumes to detach before terminating", logging.Node(in.Node.Name), zap.Strings("volumeattachments", in.Attachments))
	}
	if c.dedupe.Allow(0, events.AwaitingVolumeDetachment, in.Node.Name) {
		events.Publish(c.d.Recorder, events.AwaitingVolumes(in.Node, in.Attachments))
	}
	return nil
}

// volumesDetached records how the wait for volume detachment ended:
// VolumesDetached True, or False when the grace period ended it with
// attachments left; the wait's length goes to the metric.
func (c *Controller) volumesDetached(ctx context.Context, log *zap.Logger, in ClaimInput) error {
	// Karpenter's: True with the type as its reason and no message;
	// False with TerminationGracePeriodElapsed as reason and message.
	status, reason, msg, result := metav1.ConditionTrue, karpv1.ConditionVolumesDetached, "", "detached"
	if len(in.Attachments) > 0 {
		status, reason, msg, result = metav1.ConditionFalse, reasonGraceElapsed, reasonGraceElapsed, "grace_elapsed"
	}
	waiting := meta.FindStatusCondition(in.Claim.Status.Conditions, karpv1.ConditionVolumesDetached)
	changed, err := c.putClaimCondition(ctx, in.Claim.Name, karpv1.ConditionVolumesDetached, status, reason, msg)
	if err != nil || !changed {
		return err
	}
	if waiting != nil && waiting.Status == metav1.ConditionUnknown {
		took := in.Now.Sub(waiting.LastTransitionTime.Time)
		c.metrics.volumeWait.WithLabelValues(result).Observe(took.Seconds())
		log.Info("volume wait over", zap.String("result", result), zap.Duration("waited", took), zap.Strings("volumeattachments", in.Attachments))
	}
	return nil
}
