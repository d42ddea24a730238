package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/joiner-dev/joiner/agent/imds"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/logging"
)

// The agent's hold on its node: the cordon, taints and
// exclude-from-load-balancers label it put there and the notices it put
// them there for, recorded on the Node (karpv1.AnnotationAgentHold) in
// the same update that makes them, so that the agent, or the agent after
// a restart, takes off exactly what it added and nothing someone else
// put there: when the last of those notices ends (a scheduled event
// canceled or completed) or after the node rebooted (its boot ID
// changed), as aws-node-termination-handler uncordons on a canceled event
// and after a reboot.

// excludeFromLBValue is the value the agent (like drain) gives the
// exclude-from-external-load-balancers label.
const excludeFromLBValue = "joiner"

// DefaultBootIDPath is where Linux names the current boot (the same file
// the kubelet reports as the Node's bootID; not namespaced, so a pod reads
// the host's).
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// Condition reasons the agent sets on its node's joiner.io/Interruption
// condition when it takes its hold off (status False).
const (
	ReasonNoticeEnded = "NoticeEnded"
	ReasonRebooted    = "Rebooted"
)

var (
	// errNotJoiners: a drain notice on a node without a NodePool, under
	// --coordinator-drains: no NodeClaim, so no coordinator drains it.
	errNotJoiners = errors.New("the node has no " + karpv1.LabelNodePool + " label: it has no NodeClaim, so no coordinator drains it")
	// errNoticeEnded: the notice ended before the node was cordoned for it.
	errNoticeEnded = errors.New("the notice ended")
)

// hold is the annotation's content.
type hold struct {
	// BootID is the node's boot when the hold was last taken.
	BootID string `json:"bootID,omitempty"`
	// Notices the hold stands for; it is taken off when none is left.
	Notices []heldNotice `json:"notices"`
	// Cordoned: the agent set spec.unschedulable.
	Cordoned bool `json:"cordoned,omitempty"`
	// Taints the agent added (key and effect).
	Taints []heldTaint `json:"taints,omitempty"`
	// ExcludeFromLB: the agent set node.kubernetes.io/exclude-from-external-load-balancers.
	ExcludeFromLB bool `json:"excludeFromLB,omitempty"`
}

type heldNotice struct {
	ID      string    `json:"id"`
	Kind    imds.Kind `json:"kind"`
	EventID string    `json:"eventID,omitempty"`
	// HandedOver: a coordinator acknowledged the notice's report, so it
	// deletes the node's NodeClaim; kept across agent restarts and reboots.
	HandedOver bool `json:"handedOver,omitempty"`
}

// keptFor says whether the hold of notice x stays when x ends: on a
// NodePool node whose NodeClaim a coordinator is deleting for it, the node
// stays closed to new pods until it is gone.
func keptFor(node *corev1.Node, x heldNotice, handedOver bool) bool {
	return node.Labels[karpv1.LabelNodePool] != "" && (handedOver || x.HandedOver)
}

// markHandedOver records in the hold that a coordinator acknowledged
// notice id's report (nothing when the hold does not hold it).
func (a *Agent) markHandedOver(ctx context.Context, id string) error {
	a.holdMu.Lock()
	defer a.holdMu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := a.kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		h, ok := a.readHold(node)
		i := slices.IndexFunc(h.Notices, func(x heldNotice) bool { return x.ID == id })
		if !ok || i < 0 || h.Notices[i].HandedOver {
			return nil
		}
		h.Notices[i].HandedOver = true
		if err := writeHold(node, h); err != nil {
			return err
		}
		_, err = a.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the hand-over of notice %s on node %s: %w", id, a.cfg.NodeName, err)
	}
	return nil
}

type heldTaint struct {
	Key    string             `json:"key"`
	Effect corev1.TaintEffect `json:"effect"`
}

// readHold reads node's hold; ok false when it has none. An annotation
// that does not parse is logged and counts as none: the agent cannot know
// what it added.
func (a *Agent) readHold(node *corev1.Node) (h hold, ok bool) {
	s, found := node.Annotations[karpv1.AnnotationAgentHold]
	if !found {
		return hold{}, false
	}
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		a.log.Warn("ignoring an unreadable agent hold annotation", logging.Node(node.Name),
			zap.String("annotation", karpv1.AnnotationAgentHold), zap.Error(err))
		return hold{}, false
	}
	return h, true
}

func writeHold(node *corev1.Node, h hold) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding annotation %s: %w", karpv1.AnnotationAgentHold, err)
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[karpv1.AnnotationAgentHold] = string(b)
	return nil
}

// bootID is the node's current boot ID: Config.BootID's, else (unreadable)
// the one the kubelet reported on node.
func (a *Agent) bootID(node *corev1.Node) string {
	if a.cfg.BootID != nil {
		if id, err := a.cfg.BootID(); err == nil && id != "" {
			return id
		} else if err != nil {
			a.log.Debug("reading the boot id; using the node's", zap.Error(err))
		}
	}
	return node.Status.NodeInfo.BootID
}

// readBootID reads DefaultBootIDPath.
func readBootID() (string, error) {
	b, err := os.ReadFile(DefaultBootIDPath)
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// reqTaints are the taints req puts on the node (drain's).
func reqTaints(req drain.Request) []corev1.Taint {
	ts := drain.Taints(req.Reason)
	if req.Advisory {
		return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == karpv1.TaintDisruptedKey })
	}
	return ts
}

func taintIndex(ts []corev1.Taint, key string, effect corev1.TaintEffect) int {
	return slices.IndexFunc(ts, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// claim taints and cordons the node for n (and, excludeLB, labels it
// node.kubernetes.io/exclude-from-external-load-balancers, as Karpenter
// does with its taint), recording in the same update what it added and
// that n holds it. errNotJoiners: n drains, the coordinator drains, and
// the node has no NodePool (nothing is changed); errNoticeEnded: n ended
// first.
func (a *Agent) claim(ctx context.Context, n imds.Notice, req drain.Request, excludeLB bool) error {
	a.holdMu.Lock()
	defer a.holdMu.Unlock()
	if a.noticeEnded(n.ID) {
		return errNoticeEnded
	}
	var cordoned *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cordoned = nil
		node, err := a.kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if a.cfg.CoordinatorDrains && !req.Advisory && node.Labels[karpv1.LabelNodePool] == "" {
			return errNotJoiners
		}
		h, _ := a.readHold(node)
		before := h
		if boot := a.bootID(node); h.BootID != boot {
			// Taken before a reboot (and not yet taken off): what it
			// added is still the agent's, the notices are not.
			h.BootID, h.Notices = boot, nil
		}
		if !slices.ContainsFunc(h.Notices, func(x heldNotice) bool { return x.ID == n.ID }) {
			h.Notices = append(h.Notices, heldNotice{ID: n.ID, Kind: n.Kind, EventID: n.EventID, HandedOver: a.isHandedOver(n.ID)})
		}
		changed := false
		for _, t := range reqTaints(req) {
			switch i := taintIndex(node.Spec.Taints, t.Key, t.Effect); {
			case i < 0:
				node.Spec.Taints = append(node.Spec.Taints, t)
				h.Taints = append(h.Taints, heldTaint{Key: t.Key, Effect: t.Effect})
				changed = true
			case !req.Advisory && node.Spec.Taints[i].Value != t.Value:
				// A drain's reason outranks a taint-only one (spot after
				// rebalance), as drain's.
				node.Spec.Taints[i].Value = t.Value
				changed = true
			}
		}
		if !node.Spec.Unschedulable {
			node.Spec.Unschedulable = true
			h.Cordoned = true
			changed = true
		}
		if excludeLB && node.Labels[drain.LabelExcludeFromLB] == "" {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[drain.LabelExcludeFromLB] = excludeFromLBValue
			h.ExcludeFromLB = true
			changed = true
		}
		if !changed && sameHold(before, h) {
			return nil
		}
		if err := writeHold(node, h); err != nil {
			return err
		}
		updated, err := a.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err == nil && changed {
			cordoned = updated
		}
		return err
	})
	if err != nil {
		if errors.Is(err, errNotJoiners) {
			return err
		}
		return fmt.Errorf("cordoning node %s: %w", a.cfg.NodeName, err)
	}
	if cordoned != nil {
		a.log.Info("node tainted and cordoned", logging.Node(a.cfg.NodeName), zap.String("reason", req.Reason),
			zap.Bool("exclude-from-load-balancers", excludeLB))
		if a.cfg.Drain.Recorder != nil {
			events.Publish(a.cfg.Drain.Recorder, events.NodeCordoned(cordoned, req.Reason, req.Message))
		}
		a.setCondition(ctx, corev1.ConditionTrue, "Cordoned", req.Message)
	}
	return nil
}

func sameHold(x, y hold) bool {
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(bx) == string(by)
}

// release drops the notices ended says are over (on the node as read)
// from the hold and, when none is left, takes off what the agent added
// (reason: the condition's); nothing on a node being deleted (it is going
// away: pods must not land on it). It reports whether it took the hold
// off.
func (a *Agent) release(ctx context.Context, ended func(*corev1.Node, heldNotice) bool, reason, why string) (bool, error) {
	a.holdMu.Lock()
	defer a.holdMu.Unlock()
	return a.releaseLocked(ctx, ended, reason, why)
}

func (a *Agent) releaseLocked(ctx context.Context, ended func(*corev1.Node, heldNotice) bool, reason, why string) (bool, error) {
	var undone *hold
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		undone = nil
		node, err := a.kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		h, ok := a.readHold(node)
		if !ok {
			return nil
		}
		left := slices.DeleteFunc(slices.Clone(h.Notices), func(x heldNotice) bool { return ended(node, x) })
		switch {
		case len(left) == len(h.Notices) && len(left) > 0:
			return nil
		case len(left) > 0:
			h.Notices = left
			if err := writeHold(node, h); err != nil {
				return err
			}
		case node.DeletionTimestamp != nil:
			return nil
		default:
			node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
				return slices.Contains(h.Taints, heldTaint{Key: t.Key, Effect: t.Effect})
			})
			if h.Cordoned {
				node.Spec.Unschedulable = false
			}
			if h.ExcludeFromLB && node.Labels[drain.LabelExcludeFromLB] == excludeFromLBValue {
				delete(node.Labels, drain.LabelExcludeFromLB)
			}
			delete(node.Annotations, karpv1.AnnotationAgentHold)
		}
		if _, err := a.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if len(left) == 0 {
			undone = &h
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking the agent's hold off node %s: %w", a.cfg.NodeName, err)
	}
	if undone == nil {
		return false, nil
	}
	a.log.Info("took the agent's cordon off the node", logging.Node(a.cfg.NodeName), zap.String("why", why),
		zap.Bool("uncordoned", undone.Cordoned), zap.Any("taints-removed", undone.Taints), zap.Bool("label-removed", undone.ExcludeFromLB))
	a.setCondition(ctx, corev1.ConditionFalse, reason, why)
	return true, nil
}

// recoverHold looks at the hold an earlier agent process left: taken
// before the node rebooted, it is taken off (a notice still in IMDS is
// seen again and takes the node anew); otherwise the watcher is told of
// its notices, so a scheduled event canceled while no agent ran still
// ends it.
func (a *Agent) recoverHold(ctx context.Context) error {
	a.holdMu.Lock()
	defer a.holdMu.Unlock()
	node, err := a.kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", a.cfg.NodeName, err)
	}
	h, ok := a.readHold(node)
	if !ok {
		return nil
	}
	if boot := a.bootID(node); h.BootID != "" && boot != "" && h.BootID != boot {
		_, err := a.releaseLocked(ctx, func(node *corev1.Node, x heldNotice) bool { return !keptFor(node, x, false) }, ReasonRebooted,
			fmt.Sprintf("the node rebooted (boot %s, cordoned in boot %s)", boot, h.BootID))
		return err
	}
	ns := make([]imds.Notice, 0, len(h.Notices))
	for _, x := range h.Notices {
		ns = append(ns, imds.Notice{ID: x.ID, Kind: x.Kind, EventID: x.EventID, InstanceID: a.watcher.InstanceID()})
	}
	a.watcher.Expect(ns...)
	return nil
}

// setCondition sets the node's joiner.io/Interruption condition (best
// effort: a failure is logged).
func (a *Agent) setCondition(ctx context.Context, status corev1.ConditionStatus, reason, msg string) {
	now := metav1.Now()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := a.kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := corev1.NodeCondition{Type: drain.ConditionType, Status: status, Reason: reason, Message: truncate(msg, 1024),
			LastHeartbeatTime: now, LastTransitionTime: now}
		i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == drain.ConditionType })
		switch {
		case i < 0:
			node.Status.Conditions = append(node.Status.Conditions, c)
		default:
			if node.Status.Conditions[i].Status == status {
				c.LastTransitionTime = node.Status.Conditions[i].LastTransitionTime
			}
			node.Status.Conditions[i] = c
		}
		_, err = a.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		a.log.Warn("setting node condition", logging.Node(a.cfg.NodeName), zap.Error(err))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
