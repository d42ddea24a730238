package drain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/logging"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Eviction results reported to the Observer.
const (
	ResultEvicted = "evicted"
	ResultBlocked = "blocked"
	ResultDeleted = "deleted"
	ResultGone    = "gone"
	ResultError   = "error"
)

// slots bounds the drain's concurrent API calls (Options.Parallelism): a
// pod holds one only while its eviction, delete or GET is in flight, never
// while it backs off or waits to be gone, so pods a disruption budget
// blocks (or with a long preStop) do not keep the others from their
// eviction requests.
type slots chan struct{}

// do makes call holding a slot; false (call not made) when ctx ends first.
func (s slots) do(ctx context.Context, call func()) bool {
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-s }()
	call()
	return true
}

// multiplePDBsMessage is the eviction API's answer (500) for a pod two
// disruption budgets select, whatever they allow: Karpenter treats it as a
// blocked eviction, as 429.
const multiplePDBsMessage = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."

// blockedByBudget is the FailedDraining error when err says a disruption
// budget refuses pod's eviction (429, or more than one budget: Karpenter's
// wording for each), nil when err is no such refusal.
func blockedByBudget(err error, pod string) error {
	if apierrors.IsTooManyRequests(err) {
		return events.PDBBlocksEviction(pod)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message == multiplePDBsMessage {
		return fmt.Errorf("eviction does not support multiple PDBs (Pod=%s)", pod)
	}
	return nil
}

// evictPod evicts p (retrying a refused eviction until ctx's deadline) and
// waits until it is gone or stuck terminating. It returns false if the pod
// is still there (and not stuck) when ctx ends. A pod already terminating
// is not evicted again, only waited for. Each API call holds one of slots.
// The first time a disruption budget refuses its eviction it calls
// blockedBy with the reason (which records the node's FailedDraining once
// per drain).
func (d *Drainer) evictPod(ctx context.Context, log *zap.Logger, req Request, p *corev1.Pod, start time.Time, slots slots,
	blockedBy func(err error)) bool {
	log = log.With(logging.Pod(p.Namespace, p.Name))
	if d.opts.DryRun {
		log.Info("dry-run: would have evicted pod")
		return true
	}
	if p.DeletionTimestamp == nil {
		blocked := 0
		retry := backoff.New(d.opts.RetryBase, d.opts.RetryMax)
		for attempt := 0; ; attempt++ {
			grace := d.grace(p, req.Deadline)
			opts := &metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &p.UID}}
			forced := d.opts.ForceAfter > 0 && d.opts.Now().Sub(start) >= d.opts.ForceAfter && blocked > 0
			var err error
			made := slots.do(ctx, func() {
				if forced {
					err = d.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *opts)
				} else {
					err = d.kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
						ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, DeleteOptions: opts,
					})
				}
			})
			if !made {
				log.Warn("pod not evicted before the deadline", zap.Int("blocked", blocked))
				return false
			}
			code := evictionCode(err, forced)
			budget := blockedByBudget(err, p.Namespace+"/"+p.Name)
			switch {
			case err == nil && forced:
				d.observe(req, ResultDeleted, code)
				log.Warn("pod deleted: eviction blocked past force-after", zap.Duration("force-after", d.opts.ForceAfter))
			case err == nil:
				d.observe(req, ResultEvicted, code)
				log.Info("pod evicted", zap.Int64p("grace-seconds", grace))
				d.publish(events.PodEvicted(p, cmp.Or(req.EvictionReason, req.Reason)))
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone, or replaced by a pod with another UID: nothing to evict.
				d.observe(req, ResultGone, code)
				return true
			case budget != nil:
				d.observe(req, ResultBlocked, code)
				blocked++
				if blocked == 1 {
					log.Info("eviction blocked by a disruption budget; retrying until the deadline", zap.Error(err))
					blockedBy(budget)
				}
			default:
				d.observe(req, ResultError, code)
				log.Warn("evicting pod", zap.Error(err), zap.Int("attempt", attempt+1))
			}
			if err == nil {
				break
			}
			if !backoff.Sleep(ctx, retry.Step()) {
				log.Warn("pod not evicted before the deadline", zap.Int("blocked", blocked))
				return false
			}
		}
	}
	return d.waitGone(ctx, log, p, slots)
}

// evictionCode is the status of an eviction request as Karpenter counts it
// (see Observer): 200 when it succeeded, the error's API status code, 0 for
// a forced delete (no eviction) or an error without an API status.
func evictionCode(err error, forced bool) int {
	if forced {
		return 0
	}
	if err == nil {
		return http.StatusOK
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}

// grace is the grace period an eviction asks for: none (the pod's own) in
// Karpenter's termination, whose evictions send none (the NodeClaim's
// terminationGracePeriod is kept by deleting expiring pods, see
// Request.TerminationTime); otherwise (the node agent's drain before an
// interruption's hard deadline) the pod's own capped by the time left
// (nil: the pod's own fits).
func (d *Drainer) grace(p *corev1.Pod, deadline time.Time) *int64 {
	if d.opts.KarpenterTermination {
		return nil
	}
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		own = *p.Spec.TerminationGracePeriodSeconds
	}
	left := int64(d.timeLeft(deadline) / time.Second)
	if own <= left {
		return nil
	}
	g := max(left, 1)
	return &g
}

// currentPod reads p as it is now: from the cache (Options.Pod) while it
// holds the pod, else from the API server. The cache may not have seen a
// pod the drain listed from the API server yet, so its "not there" is
// confirmed once by a GET: one per pod, not one per poll.
func (d *Drainer) currentPod(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	if d.opts.Pod != nil {
		if cur := d.opts.Pod(p.Namespace, p.Name); cur != nil {
			return cur, nil
		}
	}
	return d.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
}

// waitGone polls p until it is gone (or replaced by a pod of another UID)
// or stuck terminating by the drain's clock: a pod whose kubelet is gone
// keeps its deletionTimestamp for ever, and Karpenter stops waiting for it
// a minute past that (IsStuckTerminating). Each look holds one of slots.
// It returns false if ctx ends first.
func (d *Drainer) waitGone(ctx context.Context, log *zap.Logger, p *corev1.Pod, slots slots) bool {
	for {
		var (
			cur *corev1.Pod
			err error
		)
		if !slots.do(ctx, func() { cur, err = d.currentPod(ctx, p) }) {
			log.Warn("pod still terminating at the deadline")
			return false
		}
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID) {
			return true
		}
		if err == nil && podutil.StuckTerminating(cur, d.opts.Now()) {
			log.Warn("pod stuck terminating (its kubelet is gone?); not waiting for it",
				zap.Time("deletion-timestamp", cur.DeletionTimestamp.Time))
			return true
		}
		if err != nil && ctx.Err() == nil {
			log.Debug("checking pod", zap.Error(err))
		}
		if !backoff.Sleep(ctx, d.opts.PollInterval) {
			log.Warn("pod still terminating at the deadline")
			return false
		}
	}
}
