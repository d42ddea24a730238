package drain

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/logging"
)

// expiring is a pod to delete at a time.
type expiring struct {
	at  time.Time
	pod *corev1.Pod
}

// expiringDeletes lists when each pod must be deleted to get its whole
// terminationGracePeriodSeconds before the node's termination time, soonest
// first. A pod already terminating is listed only when its own deletion
// would end after the termination time (Karpenter's
// IsPodEligibleForForcedEviction); a pod with no grace period of its own
// (never from the API server, which defaults it) is not listed.
func expiringDeletes(pods []corev1.Pod, terminationTime time.Time) []expiring {
	var out []expiring
	for i := range pods {
		p := &pods[i]
		if p.Spec.TerminationGracePeriodSeconds == nil {
			continue
		}
		if p.DeletionTimestamp != nil && !p.DeletionTimestamp.After(terminationTime) {
			continue
		}
		at := terminationTime.Add(-time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second)
		out = append(out, expiring{at: at, pod: p})
	}
	slices.SortStableFunc(out, func(a, b expiring) int { return a.at.Compare(b.at) })
	return out
}

// dueBy splits deletes (soonest first) into those due at now and the
// later ones.
func dueBy(deletes []expiring, now time.Time) (due, later []expiring) {
	n := 0
	for n < len(deletes) && !deletes[n].at.After(now) {
		n++
	}
	return deletes[:n], deletes[n:]
}

// deleteExpiring makes the deletions of deletes (see
// Request.TerminationTime), each at its time, until ctx ends. It returns
// how many it went through (made, or found the pod gone or failed) and the
// pods it deleted. A pod already gone is not an error; a failed delete is
// logged and left to the next drain of the node.
func (d *Drainer) deleteExpiring(ctx context.Context, log *zap.Logger, req Request, deletes []expiring) (done int, deleted map[types.UID]bool) {
	deleted = map[types.UID]bool{}
	for _, e := range deletes {
		if wait := e.at.Sub(d.opts.Now()); wait > 0 && !backoff.Sleep(ctx, wait) {
			return done, deleted
		}
		if ctx.Err() != nil {
			return done, deleted
		}
		done++
		p := e.pod
		plog := log.With(logging.Pod(p.Namespace, p.Name))
		// Clamped to 1 s: 0 would delete the pod from etcd at once, before
		// its containers stop.
		grace := max(int64(req.TerminationTime.Sub(d.opts.Now())/time.Second), 1)
		if d.opts.DryRun {
			plog.Info("dry-run: would have deleted pod for the node's termination time", zap.Int64("grace-seconds", grace))
			continue
		}
		err := d.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID},
		})
		switch {
		case err == nil:
			deleted[p.UID] = true
			d.publish(events.PodDeletedForTermination(p, grace, req.TerminationTime))
			plog.Info("pod deleted for the node's termination time", zap.Int64("grace-seconds", grace),
				zap.Int64p("pod-grace-seconds", p.Spec.TerminationGracePeriodSeconds), zap.Time("termination-time", req.TerminationTime))
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// gone, or replaced by a pod with another UID
		case ctx.Err() != nil:
			// cut off by the drain's end: still to do (NextDelete)
			return done - 1, deleted
		default:
			plog.Warn("deleting pod for the node's termination time; the next drain retries", zap.Error(err))
		}
	}
	return done, deleted
}
