package fsm

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
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
	// unhandled indexes unhandled reports by instance ID (derived, not
	// persisted; kept by putReport and deleteReport).
	unhandled map[string]map[string]bool
	index     uint64
}

func newTables() *tables {
	return &tables{
		intents:       map[string]LaunchIntent{},
		instances:     map[string]Instance{},
		interruptions: map[string]InterruptionReport{},
		terminations:  map[string]TerminationIntent{},
		podIntent:     map[string]string{},
		unhandled:     map[string]map[string]bool{},
	}
}

func (t *tables) clone() *tables {
	return &tables{
		intents:       cloneMap(t.intents),
		instances:     cloneMap(t.instances),
		interruptions: cloneMap(t.interruptions),
		terminations:  cloneMap(t.terminations),
		podIntent:     cloneMap(t.podIntent),
		unhandled:     cloneUnhandled(t.unhandled),
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

func cloneUnhandled(m map[string]map[string]bool) map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}

// reindexReports rebuilds the unhandled-report index.
func (t *tables) reindexReports() {
	t.unhandled = map[string]map[string]bool{}
	for _, r := range t.interruptions {
		t.index1(r)
	}
}

func (t *tables) index1(r InterruptionReport) {
	if r.Handled {
		return
	}
	if t.unhandled[r.InstanceID] == nil {
		t.unhandled[r.InstanceID] = map[string]bool{}
	}
	t.unhandled[r.InstanceID][r.ID] = true
}

func (t *tables) unindex(r InterruptionReport) {
	if ids := t.unhandled[r.InstanceID]; ids[r.ID] {
		if delete(ids, r.ID); len(ids) == 0 {
			delete(t.unhandled, r.InstanceID)
		}
	}
}

// putReport stores a report and keeps the unhandled index in step.
func (t *tables) putReport(r InterruptionReport) {
	if old, ok := t.interruptions[r.ID]; ok {
		t.unindex(old)
	}
	t.interruptions[r.ID] = r
	t.index1(r)
}

// deleteReport removes a report and keeps the unhandled index in step.
func (t *tables) deleteReport(id string) {
	if old, ok := t.interruptions[id]; ok {
		t.unindex(old)
		delete(t.interruptions, id)
	}
}

// oldestReport is the ID of the report with the lowest ModifyIndex (ties:
// lowest ID) among ids (all reports when nil) that match accepts; "" when
// none does.
func (t *tables) oldestReport(ids map[string]bool, match func(InterruptionReport) bool) string {
	var best InterruptionReport
	found := false
	consider := func(r InterruptionReport) {
		if match(r) && (!found || r.ModifyIndex < best.ModifyIndex || (r.ModifyIndex == best.ModifyIndex && r.ID < best.ID)) {
			best, found = r, true
		}
	}
	if ids != nil {
		for id := range ids {
			consider(t.interruptions[id])
		}
	} else {
		for _, r := range t.interruptions {
			consider(r)
		}
	}
	return best.ID
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

// moveInstance stores inst moved to state s at time at (raft index index).
func (t *tables) moveInstance(inst Instance, s InstanceState, at time.Time, index uint64) {
	inst.State, inst.UpdatedAt, inst.ModifyIndex = s, at, index
	t.instances[inst.ID] = inst
}

// decoded adapts the apply function of a command C: the payload is
// decoded first (an error wraps ErrInvalidCommand).
func decoded[C any](fn func(t *tables, c C, index uint64) any) applyFunc {
	return func(t *tables, buf []byte, index uint64) any {
		var c C
		if err := decode(buf, &c); err != nil {
			return err
		}
		return fn(t, c, index)
	}
}

func init() {
	registerCommand(PlanCommitType, decoded(applyPlanCommit))
	registerCommand(LaunchAttemptStartType, decoded(applyAttemptStart))
	registerCommand(LaunchResultType, decoded(applyLaunchResult))
	registerCommand(IntentCancelType, decoded(applyIntentCancel))
	registerCommand(InstanceStatusType, decoded(applyInstanceStatus))
	registerCommand(InterruptionReportType, decoded(applyInterruptionReport))
	registerCommand(InterruptionHandledType, decoded(applyInterruptionHandled))
	registerCommand(TerminationIntentType, decoded(applyTerminationIntent))
	registerCommand(TerminationResultType, decoded(applyTerminationResult))
	registerCommand(TerminationCancelType, decoded(applyTerminationCancel))
	registerCommand(PruneType, decoded(applyPrune))
}

func applyPlanCommit(t *tables, c PlanCommit, index uint64) any {
	seen := map[string]string{}
	ids := map[string]bool{}
	var fresh []NewIntent
	for _, ni := range c.Intents {
		// An intent without pods is a static pool's launch (spec.replicas):
		// it must still name its pool and NodeClaim.
		if ni.ID == "" || len(ni.Pods) == 0 && (ni.Spec.NodePool == "" || ni.Spec.NodeClaim == "") {
			return fmt.Errorf("%w: intent %q with %d pods", ErrInvalidCommand, ni.ID, len(ni.Pods))
		}
		if ids[ni.ID] {
			return fmt.Errorf("%w: intent %q twice in one plan", ErrInvalidCommand, ni.ID)
		}
		ids[ni.ID] = true
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

func applyAttemptStart(t *tables, c LaunchAttemptStart, index uint64) any {
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

func applyLaunchResult(t *tables, c LaunchResult, index uint64) any {
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
		in.LastError, in.NoCapacity = "", false
		t.instances[l.InstanceID] = Instance{
			ID: l.InstanceID, IntentID: in.ID, Attempt: c.Attempt,
			InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType, Price: l.Price,
			State: InstanceLaunched, LaunchedAt: l.LaunchedAt, UpdatedAt: c.At, ModifyIndex: index,
		}
	} else {
		in.LastError, in.NoCapacity = c.Failed.Reason, c.Failed.NoCapacity
		if c.Failed.Retryable {
			in.State = IntentPending // next attempt is Attempt+1
		} else {
			in.State = IntentFailed
		}
	}
	t.putIntent(in, index)
	return nil
}

func applyIntentCancel(t *tables, c IntentCancel, index uint64) any {
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

func applyInstanceStatus(t *tables, c InstanceStatus, index uint64) any {
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
	if c.NodeName != "" {
		inst.NodeName = c.NodeName
	}
	t.moveInstance(inst, c.State, c.At, index)
	t.index = index
	return nil
}

func applyInterruptionReport(t *tables, c InterruptionReportCmd, index uint64) any {
	r := c.Report
	if r.ID == "" || r.InstanceID == "" {
		return fmt.Errorf("%w: interruption report needs id and instanceID, got %q, %q", ErrInvalidCommand, r.ID, r.InstanceID)
	}
	for _, f := range []struct{ name, val string }{{"id", r.ID}, {"instanceID", r.InstanceID}, {"nodeName", r.NodeName}, {"kind", r.Kind}} {
		if err := checkReportField(f.val); err != nil {
			return fmt.Errorf("%w: interruption report %s: %w", ErrInvalidCommand, f.name, err)
		}
	}
	old, exists := t.interruptions[r.ID]
	if exists {
		// A retry: keep the first receipt and the handled mark.
		r.ReceivedAt, r.Handled, r.HandledAt = old.ReceivedAt, old.Handled, old.HandledAt
		if r == withIndex(old, r.ModifyIndex) {
			return nil
		}
	} else {
		// Only InterruptionHandled marks a report handled.
		r.Handled, r.HandledAt = false, time.Time{}
	}
	// Make room: an instance keeps its newest unhandled reports; the
	// table evicts its oldest handled report, and refuses when every
	// report is unhandled. Decided before any change: a refusal leaves
	// the state as it was.
	var evict string
	switch {
	case !r.Handled && (!exists || old.InstanceID != r.InstanceID) && len(t.unhandled[r.InstanceID]) >= MaxUnhandledReportsPerInstance:
		evict = t.oldestReport(t.unhandled[r.InstanceID], func(o InterruptionReport) bool { return o.ID != r.ID })
	case !exists && len(t.interruptions) >= MaxReports:
		if evict = t.oldestReport(nil, func(o InterruptionReport) bool { return o.Handled }); evict == "" {
			return fmt.Errorf("%w: %d unhandled reports stored, limit %d; report %s refused", ErrTooManyReports, len(t.interruptions), MaxReports, r.ID)
		}
	}
	if evict != "" {
		t.deleteReport(evict)
	}
	r.ModifyIndex = index
	t.putReport(r)
	t.index = index
	return nil
}

// checkReportField bounds a report's string field: at most MaxReportField
// bytes of printable ASCII other than the five characters JSON escapes, so
// a stored report takes no more room than the fields it was sent.
func checkReportField(s string) error {
	if len(s) > MaxReportField {
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxReportField)
	}
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || strings.IndexByte(`"\<>&`, c) >= 0 {
			return fmt.Errorf("byte %#x at %d: want printable ASCII other than \" \\ < > &", c, i)
		}
	}
	return nil
}

func withIndex(r InterruptionReport, i uint64) InterruptionReport {
	r.ModifyIndex = i
	return r
}

func applyInterruptionHandled(t *tables, c InterruptionHandled, index uint64) any {
	r, ok := t.interruptions[c.ReportID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownReport, c.ReportID)
	}
	if r.Handled {
		return nil
	}
	r.Handled, r.HandledAt, r.ModifyIndex = true, c.At, index
	t.putReport(r)
	t.index = index
	return nil
}

func applyTerminationIntent(t *tables, c TerminationIntentCmd, index uint64) any {
	if c.ID == "" {
		return fmt.Errorf("%w: termination intent without id", ErrInvalidCommand)
	}
	if prev, ok := t.terminations[c.ID]; ok && prev.State != TerminationCancelled {
		return nil
	}
	if c.InstanceID == "" {
		return fmt.Errorf("%w: termination intent %s without instanceID", ErrInvalidCommand, c.ID)
	}
	ti := TerminationIntent{
		ID: c.ID, InstanceID: c.InstanceID, Reason: c.Reason, State: TerminationPending,
		CreatedAt: c.At, ModifyIndex: index,
	}
	// An instance without a record is one Joiner did not launch: a node
	// Karpenter launched, adopted with its NodeClaim. Its termination is
	// recorded all the same (disruption commits one before it acts on any
	// node, and a new leader resumes from it); there is no instance state
	// to move and no nomination to release.
	if inst, ok := t.instances[c.InstanceID]; ok {
		if !inst.State.Terminal() && inst.State != InstanceTerminating {
			ti.PriorState = inst.State
			t.moveInstance(inst, InstanceTerminating, c.At, index)
		}
		t.releasePods(inst)
	}
	t.terminations[c.ID] = ti
	t.index = index
	return nil
}

func applyTerminationCancel(t *tables, c TerminationCancel, index uint64) any {
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
			t.moveInstance(inst, ti.PriorState, c.At, index)
		}
	}
	t.index = index
	return nil
}

func applyTerminationResult(t *tables, c TerminationResult, index uint64) any {
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
		t.moveInstance(inst, InstanceTerminated, c.At, index)
	}
	t.index = index
	return nil
}

// PruneStats counts what a Prune removes, by table.
type PruneStats struct {
	Reports      int `json:"reports"`
	Intents      int `json:"intents"`
	Instances    int `json:"instances"`
	Terminations int `json:"terminations"`
}

// Total is the number of records.
func (s PruneStats) Total() int { return s.Reports + s.Intents + s.Instances + s.Terminations }

// prunePlan is the IDs a Prune removes from each table.
type prunePlan struct {
	reports, intents, instances, terminations []string
}

func (p prunePlan) stats() PruneStats {
	return PruneStats{Reports: len(p.reports), Intents: len(p.intents), Instances: len(p.instances), Terminations: len(p.terminations)}
}

// planPrune decides what a Prune with this cutoff removes (see Prune). It
// reads the tables only; the result does not depend on map order.
func planPrune(t *tables, cutoff time.Time) prunePlan {
	var p prunePlan
	old := func(at time.Time) bool { return at.Before(cutoff) }
	for id, r := range t.interruptions {
		if r.Handled && old(r.HandledAt) {
			p.reports = append(p.reports, id)
		}
	}
	pendingTerm := map[string]bool{}
	for _, ti := range t.terminations {
		if ti.State == TerminationPending {
			pendingTerm[ti.InstanceID] = true
		}
	}
	// instanceDone: recorded, gone from the cloud for a while, and no
	// termination of it in flight.
	instanceDone := func(id string) bool {
		inst, ok := t.instances[id]
		return ok && inst.State.Terminal() && old(inst.UpdatedAt) && !pendingTerm[id]
	}
	// Candidate intents: finished a while ago, and the instance they name
	// (if still recorded) is done too.
	cand := map[string]bool{}
	named := map[string][]string{} // instance ID -> intents naming it
	for id, in := range t.intents {
		if in.InstanceID != "" {
			named[in.InstanceID] = append(named[in.InstanceID], id)
		}
		if in.State != IntentFailed && in.State != IntentCancelled && in.State != IntentLaunched {
			continue // pending or launching: in flight
		}
		if !old(in.UpdatedAt) {
			continue
		}
		if _, ok := t.instances[in.InstanceID]; in.InstanceID != "" && ok && !instanceDone(in.InstanceID) {
			continue
		}
		cand[id] = true
	}
	// An instance goes with its intent: only when every intent that names
	// it (by InstanceID or as its IntentID) goes too.
	instGone := map[string]bool{}
	for id, inst := range t.instances {
		if !instanceDone(id) {
			continue
		}
		if _, ok := t.intents[inst.IntentID]; ok && !cand[inst.IntentID] {
			continue
		}
		all := true
		for _, in := range named[id] {
			all = all && cand[in]
		}
		if all {
			instGone[id] = true
			p.instances = append(p.instances, id)
		}
	}
	intentKept := map[string]bool{} // instance IDs a remaining intent names
	for id, in := range t.intents {
		_, recorded := t.instances[in.InstanceID]
		if cand[id] && (in.InstanceID == "" || !recorded || instGone[in.InstanceID]) {
			p.intents = append(p.intents, id)
		} else if in.InstanceID != "" {
			intentKept[in.InstanceID] = true
		}
	}
	// A finished termination intent goes once nothing that remains names
	// its instance: reindexPods reads terminations to know which launch
	// intents' nominations were released.
	for id, ti := range t.terminations {
		if ti.State == TerminationPending || !old(ti.DoneAt) || intentKept[ti.InstanceID] {
			continue
		}
		if _, ok := t.instances[ti.InstanceID]; ok && !instGone[ti.InstanceID] {
			continue
		}
		p.terminations = append(p.terminations, id)
	}
	return p
}

func applyPrune(t *tables, c Prune, index uint64) any {
	if c.Cutoff.IsZero() {
		return fmt.Errorf("%w: prune without a cutoff", ErrInvalidCommand)
	}
	p := planPrune(t, c.Cutoff)
	if p.stats().Total() == 0 {
		return nil
	}
	for _, id := range p.reports {
		t.deleteReport(id)
	}
	for _, id := range p.intents {
		for _, pod := range t.intents[id].Pods {
			if t.podIntent[pod] == id {
				delete(t.podIntent, pod)
			}
		}
		delete(t.intents, id)
	}
	for _, id := range p.instances {
		delete(t.instances, id)
	}
	for _, id := range p.terminations {
		delete(t.terminations, id)
	}
	t.index = index
	return nil
}
