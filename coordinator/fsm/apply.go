package fsm

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// tables is the replicated state. Slices inside values are replaced, never
// mutated in place, so clone may copy the maps shallowly.
type tables struct {
	intents       map[string]LaunchIntent
	instances     map[string]Instance
	interruptions map[string]InterruptionReport
	terminations  map[string]TerminationIntent
	// podIntent indexes live intents by nominated pod (derived, not persisted).
	podIntent map[string]string
	index     uint64
}

func newTables() *tables {
	return &tables{
		intents:       map[string]LaunchIntent{},
		instances:     map[string]Instance{},
		interruptions: map[string]InterruptionReport{},
		terminations:  map[string]TerminationIntent{},
		podIntent:     map[string]string{},
	}
}

func (t *tables) clone() *tables {
	return &tables{
		intents:       cloneMap(t.intents),
		instances:     cloneMap(t.instances),
		interruptions: cloneMap(t.interruptions),
		terminations:  cloneMap(t.terminations),
		podIntent:     cloneMap(t.podIntent),
		index:         t.index,
	}
}

func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// reindexPods rebuilds podIntent from the live intents whose instance never
// had a termination intent (cancelled ones included: nominations released
// by TerminationIntent are not given back).
func (t *tables) reindexPods() {
	t.podIntent = map[string]string{}
	terminating := map[string]bool{}
	for _, ti := range t.terminations {
		terminating[ti.InstanceID] = true
	}
	ids := make([]string, 0, len(t.intents))
	for id := range t.intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		in := t.intents[id]
		if !in.State.Live() || (in.InstanceID != "" && terminating[in.InstanceID]) {
			continue
		}
		for _, p := range in.Pods {
			t.podIntent[p] = id
		}
	}
}

// releasePods drops the nominations of the intent that launched inst: a
// node being terminated is no home for its pods.
func (t *tables) releasePods(inst Instance) {
	in, ok := t.intents[inst.IntentID]
	if !ok {
		return
	}
	for _, p := range in.Pods {
		if t.podIntent[p] == in.ID {
			delete(t.podIntent, p)
		}
	}
}

// putIntent stores an intent and keeps the pod index in step.
func (t *tables) putIntent(in LaunchIntent, index uint64) {
	in.ModifyIndex = index
	t.intents[in.ID] = in
	if !in.State.Live() {
		for _, p := range in.Pods {
			if t.podIntent[p] == in.ID {
				delete(t.podIntent, p)
			}
		}
	}
	t.index = index
}

func init() {
	registerCommand(PlanCommitType, applyPlanCommit)
	registerCommand(LaunchAttemptStartType, applyAttemptStart)
	registerCommand(LaunchResultType, applyLaunchResult)
	registerCommand(IntentCancelType, applyIntentCancel)
	registerCommand(InstanceStatusType, applyInstanceStatus)
	registerCommand(InterruptionReportType, applyInterruptionReport)
	registerCommand(InterruptionHandledType, applyInterruptionHandled)
	registerCommand(TerminationIntentType, applyTerminationIntent)
	registerCommand(TerminationResultType, applyTerminationResult)
	registerCommand(TerminationCancelType, applyTerminationCancel)
}

func applyPlanCommit(t *tables, buf []byte, index uint64) any {
	var c PlanCommit
	decode(buf, &c, index)
	seen := map[string]string{}
	var fresh []NewIntent
	for _, ni := range c.Intents {
		if ni.ID == "" || len(ni.Pods) == 0 {
			return fmt.Errorf("%w: intent %q with %d pods", ErrInvalidCommand, ni.ID, len(ni.Pods))
		}
		if _, ok := t.intents[ni.ID]; ok {
			continue // re-commit of the same decision
		}
		for _, p := range ni.Pods {
			if owner, ok := seen[p]; ok {
				return fmt.Errorf("%w: pod %s in intents %s and %s", ErrPodNominated, p, owner, ni.ID)
			}
			seen[p] = ni.ID
		}
		fresh = append(fresh, ni)
	}
	// Re-planned pods leave the intents that held them.
	moved := map[string][]string{} // old intent -> pods
	for _, ni := range fresh {
		for _, p := range ni.Pods {
			if owner, ok := t.podIntent[p]; ok {
				moved[owner] = append(moved[owner], p)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(moved)) {
		old := t.intents[id]
		old.Pods = slices.DeleteFunc(slices.Clone(old.Pods), func(p string) bool { return slices.Contains(moved[id], p) })
		if len(old.Pods) == 0 && old.State == IntentPending {
			old.State, old.LastError = IntentCancelled, "every pod was planned again"
		}
		old.UpdatedAt = c.At
		for _, p := range moved[id] {
			delete(t.podIntent, p)
		}
		t.putIntent(old, index)
	}
	for _, ni := range fresh {
		pods := slices.Clone(ni.Pods)
		slices.Sort(pods)
		t.putIntent(LaunchIntent{
			ID: ni.ID, Spec: ni.Spec, Pods: pods, State: IntentPending,
			CreatedAt: c.At, UpdatedAt: c.At,
		}, index)
		for _, p := range pods {
			t.podIntent[p] = ni.ID
		}
	}
	return nil
}

func applyAttemptStart(t *tables, buf []byte, index uint64) any {
	var c LaunchAttemptStart
	decode(buf, &c, index)
	in, ok := t.intents[c.IntentID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownIntent, c.IntentID)
	}
	if c.Attempt != in.Attempt+1 || (in.State != IntentPending && in.State != IntentLaunching) {
		return fmt.Errorf("%w: intent %s is %s at attempt %d, got attempt %d",
			ErrAttemptOutOfOrder, in.ID, in.State, in.Attempt, c.Attempt)
	}
	in.Attempt = c.Attempt
	in.State = IntentLaunching
	in.UpdatedAt = c.At
	t.putIntent(in, index)
	return nil
}

func applyLaunchResult(t *tables, buf []byte, index uint64) any {
	var c LaunchResult
	decode(buf, &c, index)
	if (c.Launched == nil) == (c.Failed == nil) {
		return fmt.Errorf("%w: launch result for %s needs exactly one of launched, failed", ErrInvalidCommand, c.IntentID)
	}
	in, ok := t.intents[c.IntentID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownIntent, c.IntentID)
	}
	if c.Attempt != in.Attempt {
		return fmt.Errorf("%w: intent %s at attempt %d, result for %d", ErrStaleAttempt, in.ID, in.Attempt, c.Attempt)
	}
	if in.State == IntentLaunched && c.Launched != nil && c.Launched.InstanceID == in.InstanceID {
		return nil // the same result again (a retry after failover)
	}
	if in.State != IntentLaunching {
		return fmt.Errorf("%w: intent %s is %s", ErrStaleAttempt, in.ID, in.State)
	}
	in.UpdatedAt = c.At
	if l := c.Launched; l != nil {
		if l.InstanceID == "" {
			return fmt.Errorf("%w: launched result for %s without instance ID", ErrInvalidCommand, in.ID)
		}
		in.State = IntentLaunched
		in.InstanceID = l.InstanceID
		in.LastError = ""
		t.instances[l.InstanceID] = Instance{
			ID: l.InstanceID, IntentID: in.ID, Attempt: c.Attempt,
			InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType, Price: l.Price,
			State: InstanceLaunched, LaunchedAt: l.LaunchedAt, UpdatedAt: c.At, ModifyIndex: index,
		}
	} else {
		in.LastError = c.Failed.Reason
		if c.Failed.Retryable {
			in.State = IntentPending // next attempt is Attempt+1
		} else {
			in.State = IntentFailed
		}
	}
	t.putIntent(in, index)
	return nil
}

func applyIntentCancel(t *tables, buf []byte, index uint64) any {
	var c IntentCancel
	decode(buf, &c, index)
	in, ok := t.intents[c.IntentID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownIntent, c.IntentID)
	}
	if in.State == IntentCancelled {
		return nil
	}
	if in.State != IntentPending {
		return fmt.Errorf("%w: intent %s is %s", ErrNotPending, in.ID, in.State)
	}
	in.State = IntentCancelled
	in.LastError = c.Reason
	in.UpdatedAt = c.At
	t.putIntent(in, index)
	return nil
}

func applyInstanceStatus(t *tables, buf []byte, index uint64) any {
	var c InstanceStatus
	decode(buf, &c, index)
	inst, ok := t.instances[c.InstanceID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownInstance, c.InstanceID)
	}
	to, known := instanceOrder[c.State]
	if !known {
		return fmt.Errorf("%w: instance state %q", ErrInvalidCommand, c.State)
	}
	if inst.State == c.State {
		return nil
	}
	if inst.State.Terminal() || to < instanceOrder[inst.State] {
		return fmt.Errorf("%w: instance %s %s -> %s", ErrBackwardTransition, inst.ID, inst.State, c.State)
	}
	inst.State = c.State
	if c.NodeName != "" {
		inst.NodeName = c.NodeName
	}
	inst.UpdatedAt = c.At
	inst.ModifyIndex = index
	t.instances[inst.ID] = inst
	t.index = index
	return nil
}

func applyInterruptionReport(t *tables, buf []byte, index uint64) any {
	var c InterruptionReportCmd
	decode(buf, &c, index)
	r := c.Report
	if r.ID == "" || r.InstanceID == "" {
		return fmt.Errorf("%w: interruption report needs id and instanceID, got %q, %q", ErrInvalidCommand, r.ID, r.InstanceID)
	}
	if old, ok := t.interruptions[r.ID]; ok {
		// A retry: keep the first receipt and the handled mark.
		r.ReceivedAt, r.Handled, r.HandledAt = old.ReceivedAt, old.Handled, old.HandledAt
		if r == withIndex(old, r.ModifyIndex) {
			return nil
		}
	}
	r.ModifyIndex = index
	t.interruptions[r.ID] = r
	t.index = index
	return nil
}

func withIndex(r InterruptionReport, i uint64) InterruptionReport {
	r.ModifyIndex = i
	return r
}

func applyInterruptionHandled(t *tables, buf []byte, index uint64) any {
	var c InterruptionHandled
	decode(buf, &c, index)
	r, ok := t.interruptions[c.ReportID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownReport, c.ReportID)
	}
	if r.Handled {
		return nil
	}
	r.Handled, r.HandledAt, r.ModifyIndex = true, c.At, index
	t.interruptions[r.ID] = r
	t.index = index
	return nil
}

func applyTerminationIntent(t *tables, buf []byte, index uint64) any {
	var c TerminationIntentCmd
	decode(buf, &c, index)
	if c.ID == "" {
		return fmt.Errorf("%w: termination intent without id", ErrInvalidCommand)
	}
	if prev, ok := t.terminations[c.ID]; ok && prev.State != TerminationCancelled {
		return nil
	}
	inst, ok := t.instances[c.InstanceID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownInstance, c.InstanceID)
	}
	ti := TerminationIntent{
		ID: c.ID, InstanceID: c.InstanceID, Reason: c.Reason, State: TerminationPending,
		CreatedAt: c.At, ModifyIndex: index,
	}
	if !inst.State.Terminal() && inst.State != InstanceTerminating {
		ti.PriorState = inst.State
		inst.State, inst.UpdatedAt, inst.ModifyIndex = InstanceTerminating, c.At, index
		t.instances[inst.ID] = inst
	}
	t.terminations[c.ID] = ti
	t.releasePods(inst)
	t.index = index
	return nil
}

func applyTerminationCancel(t *tables, buf []byte, index uint64) any {
	var c TerminationCancel
	decode(buf, &c, index)
	ti, ok := t.terminations[c.ID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTermination, c.ID)
	}
	switch ti.State {
	case TerminationCancelled:
		return nil
	case TerminationDone:
		return fmt.Errorf("%w: %s is %s", ErrTerminationNotPending, c.ID, ti.State)
	}
	ti.State, ti.DoneAt, ti.ModifyIndex = TerminationCancelled, c.At, index
	t.terminations[c.ID] = ti
	if inst, ok := t.instances[ti.InstanceID]; ok && inst.State == InstanceTerminating && ti.PriorState != "" {
		// Another pending intent for the same instance keeps it terminating.
		other := false
		for _, o := range t.terminations {
			if o.InstanceID == inst.ID && o.State == TerminationPending {
				other = true
			}
		}
		if !other {
			inst.State, inst.UpdatedAt, inst.ModifyIndex = ti.PriorState, c.At, index
			t.instances[inst.ID] = inst
		}
	}
	t.index = index
	return nil
}

func applyTerminationResult(t *tables, buf []byte, index uint64) any {
	var c TerminationResult
	decode(buf, &c, index)
	ti, ok := t.terminations[c.ID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTermination, c.ID)
	}
	if ti.State == TerminationDone {
		return nil
	}
	ti.State, ti.DoneAt, ti.ModifyIndex = TerminationDone, c.At, index
	t.terminations[ti.ID] = ti
	if inst, ok := t.instances[ti.InstanceID]; ok && !inst.State.Terminal() {
		inst.State, inst.UpdatedAt, inst.ModifyIndex = InstanceTerminated, c.At, index
		t.instances[inst.ID] = inst
	}
	t.index = index
	return nil
}
