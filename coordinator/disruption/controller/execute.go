package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/coordinator/disruption/annotate"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/podutil"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/lifecycle"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// candidate is one node a command removes.
type candidate struct {
	node, nodeClaim, instanceID, termID string
}

// command is one decision being executed.
type command struct {
	method disruption.Method
	// reason is what the NodeClaim's annotation and DisruptionReason
	// condition say: Expired, Empty, Drifted or Underutilized.
	reason     string
	message    string
	candidates []candidate
	// replacements are the NodeClaims that must be Initialized first.
	replacements []string
	// announced are the replacements whose DisruptionLaunching Event was
	// recorded.
	announced map[string]bool
	started   time.Time
	// rollback, when set, is why the command is being rolled back (retried
	// every pass until done).
	rollback string
	// decision is delete or replace (Karpenter's metric label).
	decision string
}

// termID is the termination intent ID of an instance.
func termID(instanceID string) string { return "term-" + instanceID }

var methods = map[string]disruption.Method{}

func init() {
	for _, m := range []disruption.Method{disruption.MethodExpiration, disruption.MethodEmptiness, disruption.MethodStaticDrift,
		disruption.MethodDrift, disruption.MethodMultiNode, disruption.MethodSingleNode} {
		methods[string(m)] = m
	}
}

// methodReason is the user-facing reason of a method.
func methodReason(m disruption.Method) string {
	switch m {
	case disruption.MethodExpiration:
		return "Expired"
	case disruption.MethodEmptiness:
		return string(karpv1.DisruptionReasonEmpty)
	case disruption.MethodDrift, disruption.MethodStaticDrift:
		return string(karpv1.DisruptionReasonDrifted)
	}
	return string(karpv1.DisruptionReasonUnderutilized)
}

// start executes a fresh decision: commit, launch replacements, taint, and
// (without replacements) delete.
func (c *Controller) start(ctx context.Context, v *pass, dec *disruption.Decision) error {
	if dec.Method == disruption.MethodStaticDrift && c.d.Static != nil {
		// Count and launch under the static pools' lock, so the static
		// loop and static drift never both take the last of a pool's
		// limits.nodes.
		c.d.Static.Lock()
		defer c.d.Static.Unlock()
		if dec = c.recountStatic(v, dec); dec == nil {
			return nil
		}
	}
	cmd := &command{method: dec.Method, reason: methodReason(dec.Method), message: dec.Message, started: v.now}
	for _, n := range dec.Candidates {
		id := v.instanceOf(n.Name())
		if id == "" {
			c.log.Warn("not disrupting node: no instance is recorded for it", zap.String("node", n.Name()))
			c.coolDown[n.Name()] = v.now.Add(c.cfg.CoolDown)
			continue
		}
		cmd.candidates = append(cmd.candidates, candidate{node: n.Name(), nodeClaim: n.NodeClaim.Name, instanceID: id, termID: termID(id)})
	}
	if len(cmd.candidates) == 0 {
		return nil
	}
	// 1. Commit the decision before acting on it.
	for i, cd := range cmd.candidates {
		err := fsm.Propose(ctx, c.d.Raft, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: cd.termID, InstanceID: cd.instanceID, Reason: string(cmd.method), At: v.now})
		if err != nil {
			committed := &command{method: cmd.method, reason: cmd.reason, candidates: cmd.candidates[:i], started: cmd.started}
			for _, done := range committed.candidates {
				c.commands[done.termID] = committed
			}
			c.beginRollback(committed, fmt.Sprintf("committing the termination intent of node %s failed: %v", cd.node, err))
			return fmt.Errorf("committing termination intent %s for node %s: %w", cd.termID, cd.node, err)
		}
		c.commands[cd.termID] = cmd
	}
	action := "delete"
	if len(dec.Replacements) > 0 {
		action = "replace"
	}
	c.metrics.decisions.WithLabelValues(string(cmd.method), action).Inc()
	cmd.decision = action
	c.metrics.karp.Decision(string(cmd.method), action, cmd.pools(v))
	c.log.Info("disrupting node(s)", zap.String("method", string(cmd.method)), zap.String("action", action),
		zap.Strings("node", cmd.nodes()), zap.Float64("savings", dec.Savings), zap.String("reason", dec.Message))
	for _, cd := range cmd.candidates {
		if nc := v.snap.NodeClaims[cd.node]; nc != nil {
			c.d.Recorder.Eventf(nc, corev1.EventTypeNormal, "DisruptionStarted", "%s: %s", cmd.method, dec.Message)
		}
	}

	// 2. Replacements first: the provisioner plans capacity for the pods of
	// tainted nodes, so the replacements hold their nominations before the
	// taint goes on.
	if len(dec.Replacements) > 0 && dec.Method == disruption.MethodStaticDrift {
		// One empty node of the pool per candidate; the candidates' pods
		// are the provisioner's to place (the replacements are capacity).
		names, err := c.d.Launcher.LaunchClaims(ctx, dec.Replacements, nil, "disruption/"+strings.ToLower(string(cmd.method)))
		if len(names) < len(dec.Replacements) {
			c.beginRollback(cmd, fmt.Sprintf("only %d of %d replacement(s) could be launched: %v", len(names), len(dec.Replacements), err))
			return c.rollbackCommand(ctx, cmd)
		}
		cmd.replacements = names
		c.log.Info("launched replacement nodeclaim(s)", zap.String("method", string(cmd.method)), zap.Strings("nodeclaim", cmd.replacements))
	} else if pods := candidatePods(dec.Candidates); carries(dec.Replacements, pods) {
		// (Planned NodeClaims that carry only the cluster's pending pods
		// are the provisioner's to launch: without one for the candidates'
		// pods, the decision is a deletion.)
		claims := claimsFor(dec.Replacements, pods, c.nominationsSince(cmd.started))
		if len(claims) > 0 {
			names, err := c.d.Launcher.LaunchClaims(ctx, claims, nil, "disruption/"+strings.ToLower(string(cmd.method)))
			switch {
			case err != nil && len(names) == 0:
				c.beginRollback(cmd, fmt.Sprintf("launching %d replacement(s) failed: %v", len(claims), err))
				return c.rollbackCommand(ctx, cmd)
			case len(names) < len(claims):
				c.beginRollback(cmd, fmt.Sprintf("only %d of %d replacement(s) could be launched", len(names), len(claims)))
				return c.rollbackCommand(ctx, cmd)
			case err != nil:
				c.log.Warn("replacement nodeclaim(s) committed but not all created; the provisioner recreates them", zap.Error(err))
			}
			cmd.replacements = names
		}
		cmd.replacements = mergeReplacements(cmd.replacements, pods, c.nominationsSince(cmd.started))
		if len(cmd.replacements) == 0 {
			c.beginRollback(cmd, "no replacement could be launched")
			return c.rollbackCommand(ctx, cmd)
		}
		c.log.Info("launched replacement nodeclaim(s)", zap.String("method", string(cmd.method)), zap.Strings("nodeclaim", cmd.replacements))
	}
	// 3. Taint, and the DisruptionReason condition with it (Karpenter's
	// markDisrupted).
	for _, cd := range cmd.candidates {
		if err := c.taint(ctx, cd.node); err != nil {
			c.beginRollback(cmd, fmt.Sprintf("tainting node %s failed: %v", cd.node, err))
			return errors.Join(err, c.rollbackCommand(ctx, cmd))
		}
		c.markDisrupted(ctx, cmd, c.d.Cache.NodeClaim(cd.nodeClaim))
	}
	if len(cmd.replacements) > 0 {
		return nil // advance waits for them, pass after pass
	}
	// 4. Nothing to wait for.
	return c.finish(ctx, cmd)
}

// pools are the NodePools of the candidates' NodeClaims, one per candidate
// (karpmetrics.Decision counts each pool once).
func (cmd *command) pools(v *pass) []string {
	out := make([]string, 0, len(cmd.candidates))
	for _, cd := range cmd.candidates {
		if nc := v.snap.NodeClaims[cd.node]; nc != nil {
			out = append(out, nc.Labels[karpv1.LabelNodePool])
		}
	}
	return out
}

func (cmd *command) nodes() []string {
	out := make([]string, len(cmd.candidates))
	for i, cd := range cmd.candidates {
		out[i] = cd.node
	}
	return out
}

// candidatePods are the keys of the candidates' reschedulable pods.
func candidatePods(ns []*disruption.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range ns {
		for _, p := range n.Node.Pods {
			if podutil.Reschedulable(p) {
				out[key(p)] = true
			}
		}
	}
	return out
}

// carries says whether a planned NodeClaim carries one of pods.
func carries(planned []scheduler.NodeClaim, pods map[string]bool) bool {
	for _, cl := range planned {
		if slices.ContainsFunc(cl.Pods, func(k string) bool { return pods[k] }) {
			return true
		}
	}
	return false
}

// claimsFor keeps, on each planned replacement, only the candidates' pods
// that no live intent holds yet (held: nominationsSince the command
// started; pods of other disrupted nodes are the provisioner's to place,
// and a pod can be nominated once); a replacement left without pods is
// dropped.
func claimsFor(planned []scheduler.NodeClaim, pods map[string]bool, held map[string]fsm.LaunchIntent) []scheduler.NodeClaim {
	var out []scheduler.NodeClaim
	for _, cl := range planned {
		var keep []string
		for _, k := range cl.Pods {
			if _, ok := held[k]; pods[k] && !ok {
				keep = append(keep, k)
			}
		}
		if len(keep) == 0 {
			continue
		}
		cl.Pods = keep
		out = append(out, cl)
	}
	return out
}

// mergeReplacements adds the NodeClaims of the live launch intents that
// hold one of pods (held: nominationsSince the command started: a
// replacement launched earlier, or by the provisioner) to names, sorted
// and unique.
func mergeReplacements(names []string, pods map[string]bool, held map[string]fsm.LaunchIntent) []string {
	out := slices.Clone(names)
	for k := range pods {
		if in, ok := held[k]; ok {
			out = append(out, in.Spec.NodeClaim)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// nominationsSince are raft's nominations now (pod key -> live intent)
// made at or after since, a command's start. The candidates' pods were
// bound when it started: a nomination older than that was used up when
// kube-scheduler bound them (possibly elsewhere) and holds no room for
// them now. Read from raft, not the pass's view, so a replacement the
// provisioner planned since the pass began counts.
func (c *Controller) nominationsSince(since time.Time) map[string]fsm.LaunchIntent {
	live := map[string]fsm.LaunchIntent{}
	for _, in := range c.d.State.Intents() {
		if in.State.Live() && !in.CreatedAt.Before(since) {
			live[in.ID] = in
		}
	}
	out := map[string]fsm.LaunchIntent{}
	for k, id := range c.d.State.NominatedPods() {
		if in, ok := live[id]; ok {
			out[k] = in
		}
	}
	return out
}

// advance adopts the disruptions a previous leader left and moves every
// command in flight on: finish when its replacements are Initialized, roll
// back when one failed or the wait timed out.
func (c *Controller) advance(ctx context.Context, v *pass) error {
	for id := range c.finished {
		if _, ok := v.pending[id]; !ok {
			delete(c.finished, id)
		}
	}
	c.adopt(ctx, v)
	seen := map[*command]bool{}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(c.commands)) {
		cmd := c.commands[id]
		if cmd == nil || seen[cmd] {
			continue
		}
		seen[cmd] = true
		if err := c.advanceCommand(ctx, v, cmd); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) advanceCommand(ctx context.Context, v *pass, cmd *command) error {
	if cmd.rollback != "" {
		return c.rollbackCommand(ctx, cmd)
	}
	// Candidates whose intent is no longer pending (terminated, cancelled)
	// are out of our hands.
	live := cmd.candidates[:0]
	for _, cd := range cmd.candidates {
		if _, ok := v.pending[cd.termID]; ok {
			live = append(live, cd)
		} else {
			delete(c.commands, cd.termID)
		}
	}
	cmd.candidates = live
	if len(cmd.candidates) == 0 {
		return nil
	}
	var waiting []string
	for _, name := range cmd.replacements {
		ok, failed := c.replacementState(v, name)
		if failed != "" {
			c.failInQueue(v, cmd)
			c.beginRollback(cmd, failed)
			return c.rollbackCommand(ctx, cmd)
		}
		c.announce(cmd, name, ok)
		if !ok {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) > 0 {
		if v.now.Sub(cmd.started) > c.cfg.ReplacementTimeout {
			c.failInQueue(v, cmd)
			c.beginRollback(cmd, fmt.Sprintf("replacement nodeclaim(s) %s not initialized within %s", strings.Join(waiting, ", "), c.cfg.ReplacementTimeout))
			return c.rollbackCommand(ctx, cmd)
		}
		return nil
	}
	return c.finish(ctx, cmd)
}

// failInQueue counts a command that failed while it waited for its
// replacements in karpenter_voluntary_disruption_queue_failures_total, by
// its replacements that are not initialized, as Karpenter's queue does
// (commands that fail before they wait, or that a new leader rolls back,
// never reach Karpenter's queue and are not counted).
func (c *Controller) failInQueue(v *pass, cmd *command) {
	n := 0
	for _, name := range cmd.replacements {
		if ok, _ := c.replacementState(v, name); !ok {
			n++
		}
	}
	c.metrics.karp.DecisionFailed(string(cmd.method), cmp.Or(cmd.decision, "delete"), n)
}

// announce records, once per replacement and as soon as it is in the
// cache, Karpenter's DisruptionLaunching Event and, while it is not
// initialized, DisruptionWaitingReadiness.
func (c *Controller) announce(cmd *command, name string, initialized bool) {
	nc := c.d.Cache.NodeClaim(name)
	if nc == nil || cmd.announced[name] {
		return
	}
	if cmd.announced == nil {
		cmd.announced = map[string]bool{}
	}
	cmd.announced[name] = true
	events.Publish(c.d.Recorder, events.Launching(nc, cmd.reason))
	if !initialized {
		events.Publish(c.d.Recorder, events.WaitingOnReadiness(nc))
	}
}

// replacementState says whether a replacement NodeClaim is Initialized,
// or why it failed.
func (c *Controller) replacementState(v *pass, name string) (ok bool, failed string) {
	nc := c.d.Cache.NodeClaim(name)
	if nc != nil && nc.DeletionTimestamp != nil {
		return false, fmt.Sprintf("replacement nodeclaim %s is being deleted", name)
	}
	if nc != nil {
		if init, _ := initialized(nc); init {
			return true, ""
		}
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionLaunched); cond != nil && cond.Status != metav1.ConditionTrue &&
			cond.Reason == lifecycle.ReasonLaunchFailed {
			return false, fmt.Sprintf("replacement nodeclaim %s failed to launch: %s", name, cond.Message)
		}
	}
	if _, live := v.intentByClaim[name]; !live {
		return false, fmt.Sprintf("the launch of replacement nodeclaim %s failed or was cancelled", name)
	}
	return false, ""
}

// adopt turns every pending disruption termination intent that no command
// holds into one: resumed when safe, rolled back otherwise.
func (c *Controller) adopt(ctx context.Context, v *pass) {
	for _, id := range slices.Sorted(maps.Keys(v.pending)) {
		t := v.pending[id]
		m, ours := methods[t.Reason]
		if !ours || c.commands[id] != nil || c.finished[id] {
			continue
		}
		node := v.nodeOfInstance[t.InstanceID]
		nc := v.snap.NodeClaims[node]
		if node == "" || nc == nil || nc.DeletionTimestamp != nil {
			continue // deleted (the termination controller's), or not ours to resume
		}
		if live := c.d.Cache.NodeClaim(nc.Name); live == nil || live.DeletionTimestamp != nil {
			continue
		}
		cmd := &command{method: m, reason: methodReason(m), message: "resumed after a leader change", started: t.CreatedAt,
			candidates: []candidate{{node: node, nodeClaim: nc.Name, instanceID: t.InstanceID, termID: id}}}
		c.commands[id] = cmd
		pods := map[string]bool{}
		for _, p := range v.snap.PodsByNode[node] {
			if podutil.Reschedulable(p) {
				pods[key(p)] = true
			}
		}
		if m != disruption.MethodExpiration {
			cmd.replacements = mergeReplacements(nil, pods, c.nominationsSince(cmd.started))
		}
		switch {
		case m == disruption.MethodExpiration || len(pods) == 0 || len(cmd.replacements) > 0:
			c.log.Info("resuming disruption", zap.String("method", string(m)), zap.String("node", node),
				zap.Strings("replacements", cmd.replacements))
			if err := c.taint(ctx, node); err != nil {
				c.log.Warn("tainting node", zap.String("node", node), zap.Error(err))
			}
		default:
			c.beginRollback(cmd, "resumed after a leader change, and no replacement holds the node's pods")
		}
	}
}

// finish annotates, marks and deletes every candidate NodeClaim; the
// termination controller drains and terminates. Errors leave the command
// in place to retry next pass.
func (c *Controller) finish(ctx context.Context, cmd *command) error {
	var errs []error
	left := cmd.candidates[:0]
	for _, cd := range cmd.candidates {
		if err := c.deleteClaim(ctx, cmd, cd); err != nil {
			errs = append(errs, err)
			left = append(left, cd)
			continue
		}
		c.log.Info("deleted nodeclaim", zap.String("nodeclaim", cd.nodeClaim), zap.String("node", cd.node),
			zap.String("method", string(cmd.method)), zap.String("reason", cmd.reason))
		c.finished[cd.termID] = true
		if cmd.method != disruption.MethodEmptiness { // an empty node has no pods to move
			c.moving[cd.node] = c.cfg.Now()
		}
		delete(c.commands, cd.termID)
	}
	cmd.candidates = left
	return errors.Join(errs...)
}

func (c *Controller) deleteClaim(ctx context.Context, cmd *command, cd candidate) error {
	nc, err := annotate.Reason(ctx, c.d.Kube, cd.nodeClaim, cmd.reason, nil)
	if nc == nil || err != nil {
		return err
	}
	c.markDisrupted(ctx, cmd, nc)
	if err := c.d.Kube.DeleteNodeClaim(ctx, cd.nodeClaim); err != nil {
		return err
	}
	events.Publish(c.d.Recorder, events.Terminating(c.d.Cache.Node(cd.node), nc, cmd.reason)...)
	c.metrics.karp.NodeClaimDisrupted(nc, strings.ToLower(cmd.reason))
	return nil
}

// markDisrupted sets the NodeClaim's DisruptionReason condition (best
// effort: a failure is logged and tried again when the claim is deleted).
// Karpenter sets it with the taint, when the command starts, and removes it
// when the command fails.
func (c *Controller) markDisrupted(ctx context.Context, cmd *command, nc *karpv1.NodeClaim) {
	if nc == nil || nc.DeletionTimestamp != nil {
		return
	}
	set := func(st *karpv1.NodeClaim) bool {
		return meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: karpv1.ConditionDisruptionReason, Status: metav1.ConditionTrue,
			Reason: cmd.reason, Message: fmt.Sprintf("%s: %s", cmd.method, cmd.message), LastTransitionTime: metav1.NewTime(c.cfg.Now()),
			ObservedGeneration: st.Generation})
	}
	if !set(nc.DeepCopy()) {
		return // already so
	}
	// The cached claim may be a write behind (this pass's status writes):
	// read it again on a conflict, as clearDisruptionReason does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.d.Kube.GetNodeClaim(ctx, nc.Name)
		if err != nil {
			return err
		}
		if cur.DeletionTimestamp != nil || !set(cur) {
			return nil
		}
		_, err = c.d.Kube.UpdateNodeClaimStatus(ctx, cur)
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Debug("setting the DisruptionReason condition", zap.String("nodeclaim", nc.Name), zap.Error(err))
	}
}

// beginRollback marks a command for rollback (done by rollbackCommand).
func (c *Controller) beginRollback(cmd *command, why string) {
	if cmd.rollback != "" {
		return
	}
	cmd.rollback = why
	c.metrics.rollbacks.WithLabelValues(string(cmd.method)).Inc()
	c.log.Warn("rolling back disruption", zap.String("method", string(cmd.method)), zap.Strings("node", cmd.nodes()), zap.String("reason", why))
}

// rollbackCommand removes the taints, cancels the termination intents and
// cools the candidates down. Each step is idempotent; what fails is
// retried next pass.
func (c *Controller) rollbackCommand(ctx context.Context, cmd *command) error {
	var errs []error
	left := cmd.candidates[:0]
	now := c.cfg.Now()
	for _, cd := range cmd.candidates {
		c.coolDown[cd.node] = now.Add(c.cfg.CoolDown)
		if nc := c.d.Cache.NodeClaim(cd.nodeClaim); nc != nil && nc.DeletionTimestamp != nil || c.interrupted(cd.node) {
			// Someone else is deleting it, or it is being interrupted: the
			// termination intent (same ID) and the taint are theirs now.
			delete(c.commands, cd.termID)
			continue
		}
		if err := c.untaint(ctx, cd.node); err != nil {
			errs = append(errs, err)
			left = append(left, cd)
			continue
		}
		if err := c.clearDisruptionReason(ctx, cd.nodeClaim); err != nil {
			c.log.Debug("clearing the DisruptionReason condition", zap.String("nodeclaim", cd.nodeClaim), zap.Error(err))
		}
		err := fsm.Propose(ctx, c.d.Raft, fsm.TerminationCancelType, fsm.TerminationCancel{ID: cd.termID, Reason: cmd.rollback, At: now})
		if err != nil && !errors.Is(err, fsm.ErrUnknownTermination) && !errors.Is(err, fsm.ErrTerminationNotPending) {
			errs = append(errs, fmt.Errorf("cancelling termination intent %s: %w", cd.termID, err))
			left = append(left, cd)
			continue
		}
		delete(c.commands, cd.termID)
		if nc := c.d.Cache.NodeClaim(cd.nodeClaim); nc != nil {
			c.d.Recorder.Eventf(nc, corev1.EventTypeWarning, "DisruptionRolledBack", "%s: %s; not a candidate again before %s",
				cmd.method, cmd.rollback, now.Add(c.cfg.CoolDown).UTC().Format(time.RFC3339))
		}
		c.log.Info("rolled back disruption", zap.String("node", cd.node), zap.String("method", string(cmd.method)))
	}
	cmd.candidates = left
	return errors.Join(errs...)
}

// taint puts karpenter.sh/disrupted:NoSchedule on a node (gone: nothing
// to do).
func (c *Controller) taint(ctx context.Context, name string) error {
	return c.updateNode(ctx, name, func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintDisruptedKey }) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule})
		return true
	}, "tainted node")
}

// untaint removes karpenter.sh/disrupted unless the agent put it there
// for an interruption (then the joiner.io/interruption taint is present)
// or the node is being deleted (removeDisruptedTaint).
func (c *Controller) untaint(ctx context.Context, name string) error {
	return c.updateNode(ctx, name, removeDisruptedTaint, "untainted node")
}

// interrupted says whether the agent reported an interruption on the node
// (it taints it joiner.io/interruption).
func (c *Controller) interrupted(node string) bool {
	n := c.d.Cache.Node(node)
	return n != nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintInterruptionKey })
}

// karpv1.TaintInterruptionKey is agent/drain's TaintInterruptionKey.

func (c *Controller) updateNode(ctx context.Context, name string, mutate func(*corev1.Node) bool, done string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.d.Nodes.GetNode(ctx, name)
		if err != nil {
			return err
		}
		n = n.DeepCopy()
		if !mutate(n) {
			return nil
		}
		if _, err := c.d.Nodes.UpdateNode(ctx, n); err != nil {
			return err
		}
		c.log.Info(done, zap.String("node", name), zap.String("taint", karpv1.TaintDisruptedKey+":NoSchedule"))
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating taints of node %s: %w", name, err)
	}
	return nil
}
