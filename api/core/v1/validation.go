package v1

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits on list and map sizes, the same as Karpenter's CRD schema.
const (
	MaxRequirements   = 100
	MaxBudgets        = 50
	MaxBudgetReasons  = 50
	MaxTemplateLabels = 100
	MaxRequirementKey = 316
	MinMinValues      = 1
	MaxMinValues      = 50
	MinWeight         = 1
	MaxWeight         = 100
)

// The patterns of Karpenter's CRDs, as written there (an OpenAPI pattern
// matches anywhere in the value, as Go's MatchString does, so the same text
// gives the same verdict).
const (
	DurationOrNeverPattern = `^(([0-9]+(s|m|h))+|Never)$`
	DurationPattern        = `^([0-9]+(s|m|h))+$`
	BudgetDurationPattern  = `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	BudgetNodesPattern     = `^((100|[0-9]{1,2})%|[0-9]+)$`
	SchedulePattern        = `^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	GroupPattern           = `^[^/]*$`
	QualifiedNamePattern   = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	LabelValuePattern      = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	MaxLabelValue          = 63
)

var (
	durationOrNeverRE = regexp.MustCompile(DurationOrNeverPattern)
	durationRE        = regexp.MustCompile(DurationPattern)
	budgetDurationRE  = regexp.MustCompile(BudgetDurationPattern)
	budgetNodesRE     = regexp.MustCompile(BudgetNodesPattern)
	scheduleRE        = regexp.MustCompile(SchedulePattern)
	groupRE           = regexp.MustCompile(GroupPattern)
	qualifiedNameRE   = regexp.MustCompile(QualifiedNamePattern)
	labelValueRE      = regexp.MustCompile(LabelValuePattern)
)

// Operators lists the requirement operators Karpenter v1 accepts.
var Operators = []NodeSelectorOperator{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt, OpGte, OpLte}

// ConsolidationPolicies lists the accepted consolidation policies.
var ConsolidationPolicies = []ConsolidationPolicy{ConsolidationPolicyWhenEmpty, ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidationPolicyBalanced}

// DisruptionReasons lists the reasons a budget may name.
var DisruptionReasons = []DisruptionReason{DisruptionReasonUnderutilized, DisruptionReasonEmpty, DisruptionReasonDrifted}

// TaintEffects lists the accepted taint effects.
var TaintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// crdDomain is the label domain as Karpenter's CEL rules compute it,
// key.find("^([^/]+)"): the text before the first "/", all of the key
// without one, "" when the key starts with "/".
func crdDomain(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// CRDLabelRestriction returns the message of the first restricted-label
// rule of Karpenter's CRDs that key breaks, or "". The rules are those on
// NodePool template labels and requirement keys (nodePool) or on NodeClaim
// requirement keys: the karpenter.sh domain but for capacity-type and
// nodepool, karpenter.sh/nodepool (NodePools only), kubernetes.io/hostname,
// and the karpenter.k8s.aws domain but for AWSProviderLabels.
func CRDLabelRestriction(key string, nodePool bool) string {
	d := crdDomain(key)
	switch {
	case key != LabelCapacityType && key != LabelNodePool && strings.HasSuffix(d, Group):
		return `label domain "karpenter.sh" is restricted`
	case nodePool && key == LabelNodePool:
		return `label "karpenter.sh/nodepool" is restricted`
	case key == LabelHostname:
		return `label "kubernetes.io/hostname" is restricted`
	case !AWSProviderLabels[key] && strings.HasSuffix(d, AWSGroup):
		return `label domain "karpenter.k8s.aws" is restricted`
	}
	return ""
}

// labelDomain is the domain Karpenter's runtime validation uses: the text
// before the first "/", or "" when there is none.
func labelDomain(key string) string {
	if d, _, ok := strings.Cut(key, "/"); ok {
		return d
	}
	return ""
}

// RuntimeLabelRestriction returns why Karpenter's runtime validation of a
// NodePool (IsRestrictedLabel) rejects key, or "": keys of a
// RestrictedLabelDomains domain or subdomain that are not WellKnownLabels,
// and RestrictedLabels.
func RuntimeLabelRestriction(key string) string {
	if WellKnownLabels[key] {
		return ""
	}
	d := labelDomain(key)
	for _, r := range RestrictedLabelDomains {
		if d == r || strings.HasSuffix(d, "."+r) {
			return "label domain " + strconv.Quote(r) + " is restricted to its well-known labels"
		}
	}
	if slices.Contains(RestrictedLabels, key) {
		return "label " + strconv.Quote(key) + " is restricted"
	}
	return ""
}

// RestrictedLabel returns why a NodePool may not use key as a template
// label or requirement key (the CRD's rules, then the runtime ones), or "".
func RestrictedLabel(key string) string {
	if why := CRDLabelRestriction(key, true); why != "" {
		return why
	}
	return RuntimeLabelRestriction(key)
}

// Validate checks the NodePool as Karpenter v1.14 does: the rules of its
// CRD, which the API server applies on create (Joiner's CRD is the same),
// and those of its runtime validation, which marks a NodePool the API
// server admitted not ready (label and requirement keys must be qualified
// names of an allowed domain, label and requirement values valid label
// values, taint keys and values qualified names without a duplicate key and
// effect, an In on capacity-type or instance-tenancy must name a known
// value). Update-only rules are in ValidateUpdate. It returns a
// *ValidationError (errors.Is(err, ErrInvalid)) listing every problem, one
// per line, each naming the field path and the value.
func (in *NodePool) Validate() error {
	errs := &ValidationError{}
	s := &in.Spec
	validateTemplateMetadata("spec.template.metadata", &s.Template.ObjectMeta, errs)
	t := &s.Template.Spec
	fields := claimFields{t.Taints, t.StartupTaints, t.Requirements, t.NodeClassRef, t.TerminationGracePeriod, t.ExpireAfter}
	fields.validate("spec.template.spec", true, errs)
	validateDisruption("spec.disruption", &s.Disruption, errs)
	if s.Weight != nil && (*s.Weight < MinWeight || *s.Weight > MaxWeight) {
		errs.Add("spec.weight", "must be between %d and %d, got %d", MinWeight, MaxWeight, *s.Weight)
	}
	if s.Replicas != nil {
		if *s.Replicas < 0 {
			errs.Add("spec.replicas", "must be non-negative, got %d", *s.Replicas)
		}
		if s.Weight != nil {
			errs.Add("spec.weight", "'weight' is not supported on static NodePools (spec.replicas is set), got %d", *s.Weight)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Limits)) {
			if k != "nodes" {
				errs.Add(Key("spec.limits", string(k)), "only 'limits.nodes' is supported on static NodePools (spec.replicas is set), got %s", Quote(string(k)))
			}
		}
	}
	return errs.OrNil()
}

// ValidateUpdate checks an update of old to the NodePool: Validate, and the
// CRD's update rules: a pool cannot switch between static (replicas set)
// and dynamic, nor change its nodeClassRef's group or kind.
func (in *NodePool) ValidateUpdate(old *NodePool) error {
	errs := &ValidationError{}
	errs.Merge("spec", in.Validate())
	if (in.Spec.Replicas == nil) != (old.Spec.Replicas == nil) {
		errs.Add("spec.replicas", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes, got %s after %s", quotePtr(in.Spec.Replicas), quotePtr(old.Spec.Replicas))
	}
	if r, o := in.Spec.Template.Spec.NodeClassRef, old.Spec.Template.Spec.NodeClassRef; r != nil && o != nil {
		if r.Group != o.Group {
			errs.Add("spec.template.spec.nodeClassRef.group", "nodeClassRef.group is immutable, got %s after %s", Quote(r.Group), Quote(o.Group))
		}
		if r.Kind != o.Kind {
			errs.Add("spec.template.spec.nodeClassRef.kind", "nodeClassRef.kind is immutable, got %s after %s", Quote(r.Kind), Quote(o.Kind))
		}
	}
	return errs.OrNil()
}

func quotePtr(v *int64) string {
	if v == nil {
		return "unset"
	}
	return strconv.FormatInt(*v, 10)
}

// Validate checks the NodeClaim spec against the rules of Karpenter's CRD
// (Karpenter has no runtime validation of NodeClaims: it writes them
// itself); see NodePool.Validate for the error shape.
func (in *NodeClaim) Validate() error {
	errs := &ValidationError{}
	s := &in.Spec
	fields := claimFields{s.Taints, s.StartupTaints, s.Requirements, s.NodeClassRef, s.TerminationGracePeriod, s.ExpireAfter}
	fields.validate("spec", false, errs)
	return errs.OrNil()
}

// ValidateUpdate checks an update of old to the NodeClaim: Validate, and
// the CRD's rule that the spec is immutable.
func (in *NodeClaim) ValidateUpdate(old *NodeClaim) error {
	errs := &ValidationError{}
	errs.Merge("spec", in.Validate())
	a, errA := json.Marshal(&in.Spec)
	b, errB := json.Marshal(&old.Spec)
	if errA != nil || errB != nil || string(a) != string(b) {
		errs.Add("spec", "spec is immutable, got %s after %s", a, b)
	}
	return errs.OrNil()
}

func validateTemplateMetadata(path string, m *ObjectMeta, errs *ValidationError) {
	if len(m.Labels) > MaxTemplateLabels {
		errs.Add(path+".labels", "at most %d labels, got %d", MaxTemplateLabels, len(m.Labels))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		p := Key(path+".labels", k)
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs.Add(p, "invalid label key %s: %s", Quote(k), strings.Join(msgs, "; "))
		}
		if why := RestrictedLabel(k); why != "" {
			errs.Add(p, "%s, got %s", why, Quote(k))
		}
		if v := m.Labels[k]; len(v) > MaxLabelValue || !labelValueRE.MatchString(v) {
			errs.Add(p, "invalid label value %s: %s", Quote(v), strings.Join(validation.IsValidLabelValue(v), "; "))
		}
	}
}

// claimFields are the fields a NodeClaim spec and a NodePool's template
// spec share.
type claimFields struct {
	taints, startupTaints []corev1.Taint
	requirements          []NodeSelectorRequirementWithMinValues
	ref                   *NodeClassReference
	tgp                   *Duration
	expireAfter           Duration
}

// validate checks the fields; nodePool adds the NodePool rules (the CRD's
// and the runtime validation's).
func (f claimFields) validate(path string, nodePool bool, errs *ValidationError) {
	validateTaints(path+".taints", f.taints, nodePool, errs)
	validateTaints(path+".startupTaints", f.startupTaints, nodePool, errs)
	if nodePool {
		validateTaintDuplicates(path, f.taints, f.startupTaints, errs)
	}
	ValidateRequirements(path+".requirements", f.requirements, nodePool, errs)
	validateNodeClassRef(path+".nodeClassRef", f.ref, errs)
	if f.tgp != nil && !f.tgp.IsZero() && !durationRE.MatchString(f.tgp.String()) {
		errs.Add(path+".terminationGracePeriod", "must be a duration of hours, minutes and seconds such as \"48h\" (\"Never\" is not allowed), got %s", Quote(f.tgp.String()))
	}
	if !f.expireAfter.IsZero() && !durationOrNeverRE.MatchString(f.expireAfter.String()) {
		errs.Add(path+".expireAfter", "must be a duration of hours, minutes and seconds such as \"720h\" or \"Never\", got %s", Quote(f.expireAfter.String()))
	}
}

func validateNodeClassRef(path string, ref *NodeClassReference, errs *ValidationError) {
	if ref == nil {
		errs.Add(path, "required: group, kind and name of the node class")
		return
	}
	for _, f := range []struct{ name, v string }{{"group", ref.Group}, {"kind", ref.Kind}, {"name", ref.Name}} {
		if f.v == "" {
			errs.Add(path+"."+f.name, "%s may not be empty, got \"\"", f.name)
		}
	}
	if !groupRE.MatchString(ref.Group) {
		errs.Add(path+".group", "must be an API group without a version (no \"/\"), got %s", Quote(ref.Group))
	}
}

// validateTaints checks taint keys, values and effects: with the CRD's
// patterns, and for a NodePool also as Kubernetes qualified names (which
// bounds their length).
func validateTaints(path string, taints []corev1.Taint, nodePool bool, errs *ValidationError) {
	for i, t := range taints {
		p := Index(path, i)
		switch {
		case t.Key == "":
			errs.Add(p+".key", "required, got \"\"")
		case !qualifiedNameRE.MatchString(t.Key):
			errs.Add(p+".key", "invalid taint key %s: must be a qualified name (an optional DNS subdomain prefix and \"/\", then alphanumerics, '-', '_' or '.')", Quote(t.Key))
		case nodePool && len(validation.IsQualifiedName(t.Key)) > 0:
			errs.Add(p+".key", "invalid taint key %s: %s", Quote(t.Key), strings.Join(validation.IsQualifiedName(t.Key), "; "))
		}
		if t.Value != "" {
			if !qualifiedNameRE.MatchString(t.Value) {
				errs.Add(p+".value", "invalid taint value %s: must be a qualified name (alphanumerics, '-', '_' or '.', with an optional DNS subdomain prefix and \"/\")", Quote(t.Value))
			} else if msgs := validation.IsQualifiedName(t.Value); nodePool && len(msgs) > 0 {
				errs.Add(p+".value", "invalid taint value %s: %s", Quote(t.Value), strings.Join(msgs, "; "))
			}
		}
		if !slices.Contains(TaintEffects, t.Effect) {
			errs.Add(p+".effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute, got %s", Quote(string(t.Effect)))
		}
	}
}

// validateTaintDuplicates rejects a key and effect that appear twice among
// a NodePool's taints and startup taints (Karpenter's runtime validation).
func validateTaintDuplicates(path string, taints, startupTaints []corev1.Taint, errs *ValidationError) {
	seen := map[[2]string]bool{}
	for _, list := range []struct {
		field  string
		taints []corev1.Taint
	}{{"taints", taints}, {"startupTaints", startupTaints}} {
		for i, t := range list.taints {
			k := [2]string{t.Key, string(t.Effect)}
			if seen[k] {
				errs.Add(Index(path+"."+list.field, i), "duplicate taint key and effect %s", Quote(t.Key+":"+string(t.Effect)))
			}
			seen[k] = true
		}
	}
}

// celInt is CEL's int(string): a base-10 int64 with an optional sign.
func celInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// ValidateRequirements checks requirements the way Karpenter's CRD does
// (at most 100; keys qualified names of at most 316 characters outside the
// restricted domains; In with at least one value, and at least minValues;
// Gt, Lt, Gte and Lte with one non-negative integer; minValues 1..50), and
// for a NodePool also as its runtime validation does (keys not
// karpenter.sh/nodepool nor restricted, values valid label values, an In on
// a label with WellKnownValues naming enough of them).
func ValidateRequirements(path string, reqs []NodeSelectorRequirementWithMinValues, nodePool bool, errs *ValidationError) {
	if len(reqs) > MaxRequirements {
		errs.Add(path, "at most %d requirements, got %d", MaxRequirements, len(reqs))
	}
	for i, r := range reqs {
		p := Index(path, i)
		validateRequirementKey(p+".key", r.Key, nodePool, errs)
		vals := r.Values
		if vals == nil {
			vals = []string{}
		}
		if nodePool {
			for j, v := range r.Values {
				if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
					errs.Add(Index(p+".values", j), "invalid label value %s: %s", Quote(v), strings.Join(msgs, "; "))
				}
			}
		}
		switch r.Operator {
		case OpIn:
			if len(r.Values) == 0 {
				errs.Add(p+".values", "requirements with operator 'In' must have a value defined, got []")
			} else if nodePool {
				validateWellKnownValues(p, r, errs)
			}
		case OpNotIn, OpExists, OpDoesNotExist:
		case OpGt, OpLt, OpGte, OpLte:
			ok := len(r.Values) == 1
			if ok {
				n, isInt := celInt(r.Values[0])
				ok = isInt && n >= 0
			}
			if !ok {
				errs.Add(p+".values", "requirements operator %s must have a single non-negative integer value, got %s", r.Operator, Quote(vals))
			}
		default:
			errs.Add(p+".operator", "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte, got %s", Quote(string(r.Operator)))
		}
		if r.MinValues != nil {
			mv := *r.MinValues
			switch {
			case mv < MinMinValues || mv > MaxMinValues:
				errs.Add(p+".minValues", "must be between %d and %d, got %d", MinMinValues, MaxMinValues, mv)
			case r.Operator == OpIn && len(r.Values) != 0 && len(r.Values) < mv:
				errs.Add(p+".minValues", "requirements with 'minValues' must have at least that many values specified in the 'values' field: %d, got %d: %s", mv, len(r.Values), Quote(vals))
			}
		}
	}
}

func validateRequirementKey(path, key string, nodePool bool, errs *ValidationError) {
	switch {
	case key == "":
		errs.Add(path, "required, got \"\"")
		return
	case len(key) > MaxRequirementKey:
		errs.Add(path, "at most %d characters, got %d: %s", MaxRequirementKey, len(key), Quote(key))
	case !qualifiedNameRE.MatchString(key):
		errs.Add(path, "invalid label key %s: must be a qualified name (an optional DNS subdomain prefix and \"/\", then alphanumerics, '-', '_' or '.')", Quote(key))
		return
	}
	if why := CRDLabelRestriction(key, nodePool); why != "" {
		errs.Add(path, "%s, got %s", why, Quote(key))
		return
	}
	if !nodePool {
		return
	}
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		errs.Add(path, "invalid label key %s: %s", Quote(key), strings.Join(msgs, "; "))
	}
	if n, ok := NormalizedLabels[key]; ok {
		key = n
	}
	if why := RuntimeLabelRestriction(key); why != "" {
		errs.Add(path, "%s, got %s", why, Quote(key))
	}
}

// validateWellKnownValues: an In on a label with WellKnownValues must name
// at least one of them, and at least minValues of them.
func validateWellKnownValues(path string, r NodeSelectorRequirementWithMinValues, errs *ValidationError) {
	key := r.Key
	if n, ok := NormalizedLabels[key]; ok {
		key = n
	}
	known, ok := WellKnownValues[key]
	if !ok {
		return
	}
	valid := 0
	for _, v := range r.Values {
		if slices.Contains(known, v) {
			valid++
		}
	}
	switch {
	case valid == 0:
		errs.Add(path+".values", "no valid values for %s, expected one of %s, got %s", key, strings.Join(known, ", "), Quote(r.Values))
	case r.MinValues != nil && valid < *r.MinValues:
		errs.Add(path+".values", "not enough valid values for %s: minValues is %d, expected values from %s, got %s", key, *r.MinValues, strings.Join(known, ", "), Quote(r.Values))
	}
}

func validateDisruption(path string, d *Disruption, errs *ValidationError) {
	if !d.ConsolidateAfter.IsZero() && !durationOrNeverRE.MatchString(d.ConsolidateAfter.String()) {
		errs.Add(path+".consolidateAfter", "must be a duration of hours, minutes and seconds such as \"30s\" or \"Never\", got %s", Quote(d.ConsolidateAfter.String()))
	}
	if d.ConsolidationPolicy != "" && !slices.Contains(ConsolidationPolicies, d.ConsolidationPolicy) {
		errs.Add(path+".consolidationPolicy", "must be one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced, got %s", Quote(string(d.ConsolidationPolicy)))
	}
	if len(d.Budgets) > MaxBudgets {
		errs.Add(path+".budgets", "at most %d budgets, got %d", MaxBudgets, len(d.Budgets))
	}
	for i, b := range d.Budgets {
		p := Index(path+".budgets", i)
		if !budgetNodesRE.MatchString(b.Nodes) {
			errs.Add(p+".nodes", "must be a count such as \"5\" or a percentage from 0%% to 100%%, got %s", Quote(b.Nodes))
		}
		if len(b.Reasons) > MaxBudgetReasons {
			errs.Add(p+".reasons", "at most %d reasons, got %d", MaxBudgetReasons, len(b.Reasons))
		}
		for j, r := range b.Reasons {
			if !slices.Contains(DisruptionReasons, r) {
				errs.Add(Index(p+".reasons", j), "must be one of Underutilized, Empty, Drifted, got %s", Quote(string(r)))
			} else if slices.Contains(b.Reasons[:j], r) {
				errs.Add(Index(p+".reasons", j), "duplicate reason %s", Quote(string(r)))
			}
		}
		hasSchedule, hasDuration := b.Schedule != nil, b.Duration != nil
		if hasSchedule != hasDuration {
			if hasSchedule {
				errs.Add(p+".duration", "'schedule' must be set with 'duration': required when schedule is set (schedule %s)", Quote(*b.Schedule))
			} else {
				errs.Add(p+".schedule", "'schedule' must be set with 'duration': required when duration is set (duration %s)", Quote(b.Duration.String()))
			}
		}
		if hasSchedule && !scheduleRE.MatchString(*b.Schedule) {
			errs.Add(p+".schedule", "must be a macro such as @daily or a cron expression of 5 fields (minute hour day-of-month month day-of-week), got %s", Quote(*b.Schedule))
		}
		if hasDuration && !budgetDurationRE.MatchString(b.Duration.String()) {
			errs.Add(p+".duration", "must be hours and/or minutes such as \"8h\" or \"1h30m\", got %s", Quote(b.Duration.String()))
		}
	}
}
