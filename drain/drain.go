// Package drain takes a node out of service before a deadline: it taints and
// cordons the node, then evicts its pods through the eviction API (so
// PodDisruptionBudgets hold), in parallel, and waits for them to go.
//
// It is a library with one entry point, (*Drainer).Drain, used by the node
// agent on an interruption notice and meant for reuse by the coordinator's
// termination path. It keeps no state between calls: everything it needs to
// resume after a crash (taints, condition) lives on the Node.
//
// Rules:
//   - Mirror (static) pods and finished pods are not evicted.
//   - By default (the node agent's drain, as aws-node-termination-handler)
//     DaemonSet pods are not evicted either and the others are evicted all
//     at once. With Options.KarpenterTermination (the coordinator's
//     termination) the drain follows Karpenter's: pods go in four groups,
//     each evicted only once the previous one is gone (non-critical pods,
//     non-critical DaemonSet pods, critical pods, critical DaemonSet pods;
//     critical: priorityClassName system-cluster-critical or
//     system-node-critical), and pods that tolerate
//     karpenter.sh/disrupted:NoSchedule are neither evicted nor waited for
//     (they could be scheduled right back).
//   - Pods stuck terminating (deletionTimestamp over a minute past: their
//     kubelet is gone) are neither evicted nor waited for, as Karpenter's.
//   - Pods whose karpenter.sh/do-not-disrupt protects them ("true", or a
//     duration not yet elapsed since the pod started) are left alone until
//     the deadline (the drain completes without them; they are listed in
//     Result.Left). In Karpenter's order they also hold the groups after
//     their own (Result.Held), as Karpenter waits for them.
//   - By default each eviction asks for the pod's own
//     terminationGracePeriodSeconds, capped by the time left before the
//     deadline (an interruption's). With KarpenterTermination it asks for
//     none, as Karpenter's: the NodeClaim's terminationGracePeriod is kept
//     by deleting the pods it would cut short (Request.TerminationTime).
//   - Every pod of a group is asked to go at once: Parallelism bounds the
//     API calls in flight, not the pods being evicted or waited for.
//   - 429 (a PDB forbids it now), and the 500 of a pod two PDBs select, are
//     retried with back-off until the deadline; only after ForceAfter (if
//     set) is a blocked pod deleted directly.
//   - DryRun logs every mutation instead of making it.
package drain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Taint and condition names Joiner puts on a node it drains.
const (
	// TaintInterruptionKey names why the node is going away (value: the reason).
	TaintInterruptionKey = karpv1.TaintInterruptionKey
	// ConditionType is the node condition that tells a human what happened.
	ConditionType corev1.NodeConditionType = karpv1.ConditionInterruption
)

// ErrDeadline is returned (wrapped) when pods are still on the node at the deadline.
var ErrDeadline = errors.New("drain deadline reached")

// Request is one drain.
type Request struct {
	// Node is the node name.
	Node string
	// Reason is a short token naming why (spot-interruption, scheduled-event,
	// ...); it becomes the joiner.io/interruption taint value and the
	// condition reason.
	Reason string
	// Message is a human-readable line for the condition and Events.
	Message string
	// Deadline is when the node goes away.
	Deadline time.Time
	// Evict: when false, only taint and cordon.
	Evict bool
	// Advisory: the notice only warns (a rebalance recommendation under
	// the taint policy): cordon and the joiner.io/interruption taint, not
	// karpenter.sh/disrupted. Never with Evict.
	Advisory bool
	// TerminationTime, when set, is when the node will be terminated
	// whatever is still on it (the NodeClaim's terminationGracePeriod
	// ends): each pod still waiting to go (do-not-disrupt, PDB-blocked,
	// in a later group, or terminating with a grace period past it) is
	// deleted once less than its own terminationGracePeriodSeconds remain
	// before it, with the time left (at least 1 s) as grace, bypassing its
	// PDB and do-not-disrupt, as Karpenter's DeleteExpiringPods; a Disrupted
	// Event tells the pod so. Zero: never. The deletions due when a drain
	// lists the pods are made before any eviction; later ones while the
	// drain runs, the rest by a later drain (Result.NextDelete says when).
	TerminationTime time.Time
	// EvictionReason ends each evicted pod's Evicted Event ("Evicted pod:
	// <reason>", Karpenter's: the NodeClaim's disruption reason); default
	// Reason.
	EvictionReason string
}

// Result says what a drain did.
type Result struct {
	Evicted []string // namespace/name of pods evicted (or deleted after ForceAfter)
	Skipped []string // DaemonSet (unless KarpenterTermination), mirror, finished pods, pods stuck terminating (and, with KarpenterTermination, tolerating karpenter.sh/disrupted)
	Left    []string // pods do-not-disrupt protects, left until the deadline
	Held    []string // KarpenterTermination: pods of the groups after a Left pod's, not evicted while it is there
	Stuck   []string // pods still there when the deadline passed
	// NextDelete is when the next pod this drain left on the node is due
	// for deletion by Request.TerminationTime: drain again by then (zero:
	// none due).
	NextDelete time.Time
}

// Observer is told about each eviction outcome (metrics). result is one of
// evicted, blocked (429), deleted (forced), gone, error. code is the HTTP
// status of the eviction request as Karpenter counts it
// (karpenter_pods_eviction_requests_total): 200 for an eviction made (the
// API answers 201), the error's status otherwise (404, 409, 429, 500, ...);
// 0 when no eviction request was answered with a status: a forced delete
// (no eviction) or an error carrying no API status (transport, timeout).
// reason is the drain's reason as Karpenter labels the pods it drained
// (karpenter_pods_drained_total, counted for result evicted): see
// DrainedReason.
type Observer interface {
	Eviction(result string, code int, reason string)
}

// ReasonForceful is Karpenter's drained reason of a node not disrupted
// voluntarily (expired, interrupted, deleted by hand, ...).
const ReasonForceful = "Forceful Termination"

// DrainedReason is the reason Karpenter gives the pods it evicts from a
// node (karpenter_pods_drained_total): the reason of its NodeClaim's
// DisruptionReason condition, which only voluntary disruption sets (Empty,
// Drifted, Underutilized), or "Forceful Termination" without one. reason is
// the drain's (Request.EvictionReason, else Request.Reason).
func DrainedReason(reason string) string {
	if slices.Contains(corekarp.DisruptionReasons, corekarp.DisruptionReason(reason)) {
		return reason
	}
	return ReasonForceful
}

// The default bounds of the back-off of a blocked eviction
// (Options.RetryBase, Options.RetryMax).
const (
	DefaultRetryBase = 500 * time.Millisecond
	DefaultRetryMax  = 5 * time.Second
)

// Options configure a Drainer.
type Options struct {
	// DryRun logs mutations instead of making them.
	DryRun bool
	// ForceAfter: when > 0, a pod whose eviction is still blocked this long
	// after the drain started is deleted directly. Default 0: never.
	ForceAfter time.Duration
	// RetryBase and RetryMax bound the 429 back-off (defaults 500 ms and 5 s).
	RetryBase, RetryMax time.Duration
	// PollInterval for "is the pod gone yet" (default 500 ms).
	PollInterval time.Duration
	// Pod, when set, answers "is the pod gone yet" from an informer cache
	// (nil: not there, then confirmed by one GET, since the cache may not
	// have seen a pod listed from the API server) instead of a GET per pod
	// and poll: the coordinator's, which drains many nodes at once, reads
	// its cache as Karpenter does.
	Pod func(namespace, name string) *corev1.Pod
	// Parallelism bounds a group's eviction API calls in flight (evictions,
	// deletes, GETs of pods waited for; default 32). A pod holds no slot
	// while it backs off or waits to be gone.
	Parallelism int
	// KarpenterTermination drains as Karpenter's node termination (the
	// coordinator's): four groups in order, each evicted once the previous
	// is gone (non-critical pods, non-critical DaemonSet pods, critical
	// pods, critical DaemonSet pods), DaemonSet pods evicted in theirs, a
	// do-not-disrupt pod holding the groups after its own (Result.Held),
	// pods tolerating karpenter.sh/disrupted:NoSchedule neither evicted nor
	// waited for. Default false, aws-node-termination-handler's (the node
	// agent's): DaemonSet pods skipped, every other pod evicted at once.
	KarpenterTermination bool
	// Skip returns true for pods that must never be evicted (e.g. the agent's own pod).
	Skip     func(*corev1.Pod) bool
	Observer Observer
	// Recorder records the Events (events.NewRecorder, one per process);
	// nil: none.
	Recorder record.EventRecorder
	// Now is the clock (tests).
	Now func() time.Time
}

// Drainer drains nodes.
type Drainer struct {
	kube kubernetes.Interface
	log  *zap.Logger
	opts Options
}

// New builds a Drainer.
func New(kube kubernetes.Interface, log *zap.Logger, o Options) *Drainer {
	defaults.Positive(&o.RetryBase, DefaultRetryBase)
	defaults.Positive(&o.RetryMax, DefaultRetryMax)
	defaults.Positive(&o.PollInterval, 500*time.Millisecond)
	defaults.Positive(&o.Parallelism, 32)
	defaults.Clock(&o.Now)
	return &Drainer{kube: kube, log: log, opts: o}
}

// Drain taints and cordons req.Node and, when req.Evict, evicts its pods and
// waits for them to go. It returns when every evictable pod is gone, at the
// deadline (ErrDeadline, with Result.Stuck naming the pods), or when ctx ends.
// Calling it again for the same node is harmless.
func (d *Drainer) Drain(ctx context.Context, req Request) (Result, error) {
	if req.Node == "" || req.Reason == "" {
		return Result{}, fmt.Errorf("drain request: node %q and reason %q must be set", req.Node, req.Reason)
	}
	log := d.log.With(logging.Node(req.Node), zap.String("reason", req.Reason), zap.Time("deadline", req.Deadline))
	node, err := d.cordon(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if !req.Evict {
		return Result{}, nil
	}
	d.publish(events.NodeDraining(node, req.Deadline, req.Message))
	res, err := d.evictAll(ctx, log, req, node)
	if err != nil {
		d.publish(events.DrainFailed(node, err)) // err names the pods left at the deadline
		d.setCondition(ctx, req, "DrainFailed", err.Error())
		return res, err
	}
	msg := fmt.Sprintf("Drained: %d evicted, %d skipped (%s)", len(res.Evicted), len(res.Skipped), d.skippedKinds())
	if len(res.Left) > 0 {
		msg += fmt.Sprintf(", %d do-not-disrupt pods left until the deadline: %s", len(res.Left), strings.Join(res.Left, ", "))
	}
	if len(res.Held) > 0 {
		msg += fmt.Sprintf(", %d pods of later groups held while they are there: %s", len(res.Held), strings.Join(res.Held, ", "))
	}
	d.publish(events.NodeDrained(node, msg))
	d.setCondition(ctx, req, "Drained", msg)
	log.Info("node drained", zap.Int("evicted", len(res.Evicted)), zap.Int("skipped", len(res.Skipped)), zap.Strings("left", res.Left),
		zap.Strings("held", res.Held))
	return res, nil
}

// skippedKinds names the pods a drain skips, for the Drained message.
func (d *Drainer) skippedKinds() string {
	if d.opts.KarpenterTermination {
		return "mirror/finished/stuck terminating/tolerating karpenter.sh/disrupted"
	}
	return "DaemonSet/mirror/finished/stuck terminating"
}

// Karpenter's eviction groups (KarpenterTermination), in order.
const (
	groupNonCritical = iota
	groupNonCriticalDaemonSet
	groupCritical
	groupCriticalDaemonSet
	groupCount
)

var groupNames = [groupCount]string{"non-critical", "non-critical DaemonSet", "critical", "critical DaemonSet"}

// plan is what a drain does with a node's pods.
type plan struct {
	// groups are the pods to evict (or, already terminating, wait for),
	// group by group: each starts once the previous one is gone. Without
	// KarpenterTermination there is one.
	groups              [][]corev1.Pod
	skipped, left, held []string
	// waiting is every pod the drain waits for or leaves (groups, left
	// and held): the pods a termination time deletes.
	waiting []corev1.Pod
}

// classify plans the drain of the node's pods at now. A pod stuck
// terminating is skipped before do-not-disrupt is looked at: like
// Karpenter's IsDrainable, nothing waits for it, whatever its annotations.
// With KarpenterTermination, a do-not-disrupt pod holds the groups after
// its own, as Karpenter's drain waits for it before going on.
func (d *Drainer) classify(pods []corev1.Pod, now time.Time) plan {
	karp := d.opts.KarpenterTermination
	var p plan
	if karp {
		p.groups = make([][]corev1.Pod, groupCount)
	} else {
		p.groups = make([][]corev1.Pod, 1)
	}
	firstLeft := len(p.groups) // the first group with a do-not-disrupt pod
	for i := range pods {
		pod := &pods[i]
		g := 0
		if karp {
			g = groupOf(pod)
		}
		name := pod.Namespace + "/" + pod.Name
		switch {
		case !karp && podutil.OwnedByDaemonSet(pod), podutil.OwnedByNode(pod), pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed,
			podutil.StuckTerminating(pod, now), karp && podutil.ToleratesDisrupted(pod), d.opts.Skip != nil && d.opts.Skip(pod):
			p.skipped = append(p.skipped, name)
		case podutil.DoNotDisruptActive(pod, now):
			p.left = append(p.left, name)
			p.waiting = append(p.waiting, *pod)
			firstLeft = min(firstLeft, g)
		default:
			p.groups[g] = append(p.groups[g], *pod)
			p.waiting = append(p.waiting, *pod)
		}
	}
	for _, later := range p.groups[min(firstLeft+1, len(p.groups)):] {
		p.held = append(p.held, podNames(later)...)
	}
	p.groups = p.groups[:min(firstLeft+1, len(p.groups))]
	sort.Strings(p.skipped)
	sort.Strings(p.left)
	sort.Strings(p.held)
	return p
}

// groupOf is the pod's eviction group in Karpenter's order.
func groupOf(p *corev1.Pod) int {
	g := groupNonCritical
	if p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical" {
		g = groupCritical
	}
	if podutil.OwnedByDaemonSet(p) {
		g++ // groupNonCriticalDaemonSet, groupCriticalDaemonSet
	}
	return g
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Namespace + "/" + pods[i].Name
	}
	return out
}

// evictAll evicts the node's pods group by group (see plan) until the
// deadline; a group that is not gone by then leaves the later ones on the
// node (Result.Stuck).
func (d *Drainer) evictAll(ctx context.Context, log *zap.Logger, req Request, node *corev1.Node) (Result, error) {
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	pods, err := d.listPods(ctx, req.Node)
	if err != nil {
		return Result{}, err
	}
	p := d.classify(pods, d.opts.Now())
	res := Result{Skipped: p.skipped, Left: p.left, Held: p.held}
	total := 0
	for _, g := range p.groups {
		total += len(g)
	}
	log.Info("evicting pods", zap.Int("pods", total), zap.Int("skipped", len(p.skipped)), zap.Strings("left", p.left),
		zap.Strings("held", p.held))
	stopExpiring := d.startExpiring(ctx, log, req, &p)
	start := d.opts.Now()
	var blocked sync.Once
	blockedBy := func(err error) {
		blocked.Do(func() { d.publish(events.DrainFailed(node, err)) })
	}
	for i, g := range p.groups {
		if len(g) == 0 {
			continue
		}
		if d.opts.KarpenterTermination {
			log.Info("evicting pod group", zap.String("group", groupNames[i]), zap.Int("pods", len(g)))
		}
		evicted, stuck := d.evictGroup(ctx, log, req, g, start, blockedBy)
		res.Evicted = append(res.Evicted, evicted...)
		res.Stuck = append(res.Stuck, stuck...)
		if len(stuck) > 0 { // ctx ended: the later groups stay on the node too
			for _, later := range p.groups[i+1:] {
				res.Stuck = append(res.Stuck, podNames(later)...)
			}
			break
		}
	}
	// The deletions still to come are made by the next drain of the node.
	res.NextDelete = stopExpiring()
	sort.Strings(res.Evicted)
	sort.Strings(res.Stuck)
	if len(res.Stuck) > 0 {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("draining node %s: %w with %d pods still on it: %s", req.Node, ErrDeadline, len(res.Stuck), strings.Join(res.Stuck, ", "))
		}
		return res, fmt.Errorf("draining node %s: %w", req.Node, ctx.Err())
	}
	return res, nil
}

// startExpiring makes the deletions req.TerminationTime asks for (see
// Request.TerminationTime): those due now before it returns, as Karpenter
// deletes expiring pods on each pass (the pods it deleted are then only
// waited for, not evicted), and the later ones, each at its time, while the
// drain runs. The returned stop ends that and says when the first deletion
// not made is due (zero: none left).
func (d *Drainer) startExpiring(ctx context.Context, log *zap.Logger, req Request, p *plan) (stop func() time.Time) {
	if req.TerminationTime.IsZero() {
		return func() time.Time { return time.Time{} }
	}
	due, later := dueBy(expiringDeletes(p.waiting, req.TerminationTime), d.opts.Now())
	_, deleted := d.deleteExpiring(ctx, log, req, due)
	now := metav1.NewTime(d.opts.Now())
	for _, g := range p.groups {
		for i := range g {
			if deleted[g[i].UID] && g[i].DeletionTimestamp == nil {
				g[i].DeletionTimestamp = &now
			}
		}
	}
	if len(later) == 0 {
		return func() time.Time { return time.Time{} }
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		done int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		done, _ = d.deleteExpiring(ctx, log, req, later)
	}()
	return func() time.Time {
		cancel()
		wg.Wait()
		if done < len(later) {
			return later[done].at
		}
		return time.Time{}
	}
}

// evictGroup asks every pod of the group to go at once (at most
// Parallelism API calls in flight) and waits until each is gone; it returns
// the pods evicted and those still there when ctx ended (a pod is stuck
// only once ctx has ended).
func (d *Drainer) evictGroup(ctx context.Context, log *zap.Logger, req Request, pods []corev1.Pod, start time.Time,
	blockedBy func(err error)) (evicted, stuck []string) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(slots, d.opts.Parallelism)
	)
	for i := range pods {
		p := pods[i]
		name := p.Namespace + "/" + p.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := d.evictPod(ctx, log, req, &p, start, slots, blockedBy)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				evicted = append(evicted, name)
			} else {
				stuck = append(stuck, name)
			}
		}()
	}
	wg.Wait()
	return evicted, stuck
}

func (d *Drainer) observe(req Request, result string, code int) {
	if d.opts.Observer != nil {
		d.opts.Observer.Eviction(result, code, DrainedReason(cmp.Or(req.EvictionReason, req.Reason)))
	}
}
