package v1

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits on list and map sizes, the same as Karpenter's CRD schema.
const (
	MaxRequirements   = 100
	MaxBudgets        = 50
	MaxTemplateLabels = 100
	MinMinValues      = 1
	MaxMinValues      = 50
	MinWeight         = 1
	MaxWeight         = 100
)

// Patterns of the duration fields (also in the CRD schema).
var (
	durationOrNeverRE = regexp.MustCompile(`^(([0-9]+(s|m|h))+|Never)$`)
	durationRE        = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)
	budgetDurationRE  = regexp.MustCompile(`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`)
	budgetNodesRE     = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	groupRE           = regexp.MustCompile(`^[^/]*$`)
	digitsRE          = regexp.MustCompile(`^[0-9]+$`)
)

// ScheduleMacros are the cron descriptors a budget schedule may use.
var ScheduleMacros = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// Operators lists the requirement operators Karpenter v1 accepts.
var Operators = []NodeSelectorOperator{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt, OpGte, OpLte}

// ConsolidationPolicies lists the accepted consolidation policies.
var ConsolidationPolicies = []ConsolidationPolicy{ConsolidationPolicyWhenEmpty, ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidationPolicyBalanced}

// DisruptionReasons lists the reasons a budget may name.
var DisruptionReasons = []DisruptionReason{DisruptionReasonUnderutilized, DisruptionReasonEmpty, DisruptionReasonDrifted}

// TaintEffects lists the accepted taint effects.
var TaintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// Labels under kubernetes.io that templates and requirements may use.
var allowedKubernetesIOLabels = map[string]bool{
	"beta.kubernetes.io/instance-type":         true,
	"failure-domain.beta.kubernetes.io/region": true,
	"beta.kubernetes.io/os":                    true,
	"beta.kubernetes.io/arch":                  true,
	"failure-domain.beta.kubernetes.io/zone":   true,
	LabelZone:                                  true,
	LabelRegion:                                true,
	LabelArch:                                  true,
	LabelOS:                                    true,
	LabelWindowsBuild:                          true,
	LabelInstanceType:                          true,
}

// AWSProviderLabels are the karpenter.k8s.aws labels templates and
// requirements may use (the AWS provider's well-known labels and the node
// class label). Joiner serves the AWS provider only, so core validation knows
// them; api/aws/v1 keeps the named constants.
var AWSProviderLabels = map[string]bool{
	"karpenter.k8s.aws/ec2nodeclass":                             true,
	"karpenter.k8s.aws/instance-encryption-in-transit-supported": true,
	"karpenter.k8s.aws/instance-category":                        true,
	"karpenter.k8s.aws/instance-hypervisor":                      true,
	"karpenter.k8s.aws/instance-family":                          true,
	"karpenter.k8s.aws/instance-generation":                      true,
	"karpenter.k8s.aws/instance-local-nvme":                      true,
	"karpenter.k8s.aws/instance-size":                            true,
	"karpenter.k8s.aws/instance-cpu":                             true,
	"karpenter.k8s.aws/instance-cpu-manufacturer":                true,
	"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   true,
	"karpenter.k8s.aws/instance-memory":                          true,
	"karpenter.k8s.aws/instance-ebs-bandwidth":                   true,
	"karpenter.k8s.aws/instance-network-bandwidth":               true,
	"karpenter.k8s.aws/instance-gpu-name":                        true,
	"karpenter.k8s.aws/instance-gpu-manufacturer":                true,
	"karpenter.k8s.aws/instance-gpu-count":                       true,
	"karpenter.k8s.aws/instance-gpu-memory":                      true,
	"karpenter.k8s.aws/instance-accelerator-name":                true,
	"karpenter.k8s.aws/instance-accelerator-manufacturer":        true,
	"karpenter.k8s.aws/instance-accelerator-count":               true,
}

// labelDomain is the part of key before the first "/" (all of it if none),
// as Karpenter's CEL rules compute it.
func labelDomain(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// RestrictedLabel returns why key may not be used as a NodePool template
// label (requirement=false) or requirement key (requirement=true), or "" when
// it may. The rules are Karpenter's: the kubernetes.io, k8s.io, karpenter.sh
// and karpenter.k8s.aws domains are restricted except for well-known labels,
// node.kubernetes.io, node-restriction.kubernetes.io and kops.k8s.io.
func RestrictedLabel(key string, requirement bool) string {
	d := labelDomain(key)
	switch {
	case key == LabelHostname:
		return `label "kubernetes.io/hostname" is restricted`
	case key == LabelNodePool && !requirement:
		return `label "karpenter.sh/nodepool" is restricted`
	case strings.HasSuffix(d, "kubernetes.io"):
		if allowedKubernetesIOLabels[key] && (requirement || key != LabelInstanceType) ||
			strings.HasSuffix(d, "node.kubernetes.io") || strings.HasSuffix(d, "node-restriction.kubernetes.io") {
			return ""
		}
		return `label domain "kubernetes.io" is restricted`
	case strings.HasSuffix(d, "k8s.io"):
		if strings.HasSuffix(d, "kops.k8s.io") {
			return ""
		}
		return `label domain "k8s.io" is restricted`
	case strings.HasSuffix(d, "karpenter.sh"):
		if key == LabelCapacityType || key == LabelNodePool {
			return ""
		}
		return `label domain "karpenter.sh" is restricted`
	case strings.HasSuffix(d, "karpenter.k8s.aws"):
		if AWSProviderLabels[key] {
			return ""
		}
		return `label domain "karpenter.k8s.aws" is restricted`
	}
	return ""
}

// Validate checks the NodePool the way Karpenter's CRD schema and CEL rules
// do. It returns a *ValidationError (errors.Is(err, ErrInvalid)) listing
// every problem, one per line, each naming the field path and the value.
func (in *NodePool) Validate() error {
	errs := &ValidationError{}
	s := &in.Spec
	validateTemplateMetadata("spec.template.metadata", &s.Template.ObjectMeta, errs)
	t := &s.Template.Spec
	validateClaimFields("spec.template.spec", t.Taints, t.StartupTaints, t.Requirements, t.NodeClassRef, t.TerminationGracePeriod, t.ExpireAfter, errs)
	validateDisruption("spec.disruption", &s.Disruption, errs)
	if s.Weight != nil && (*s.Weight < MinWeight || *s.Weight > MaxWeight) {
		errs.Add("spec.weight", "must be between %d and %d, got %d", MinWeight, MaxWeight, *s.Weight)
	}
	if s.Replicas != nil {
		if *s.Replicas < 0 {
			errs.Add("spec.replicas", "must be non-negative, got %d", *s.Replicas)
		}
		if s.Weight != nil {
			errs.Add("spec.weight", "not supported on a static NodePool (spec.replicas is set), got %d", *s.Weight)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Limits)) {
			if k != "nodes" {
				errs.Add(Key("spec.limits", string(k)), "only nodes may be limited on a static NodePool (spec.replicas is set), got %s", Quote(string(k)))
			}
		}
	}
	return errs.OrNil()
}

// Validate checks the NodeClaim spec the way Karpenter's CRD schema and CEL
// rules do; see NodePool.Validate for the error shape.
func (in *NodeClaim) Validate() error {
	errs := &ValidationError{}
	s := &in.Spec
	validateClaimFields("spec", s.Taints, s.StartupTaints, s.Requirements, s.NodeClassRef, s.TerminationGracePeriod, s.ExpireAfter, errs)
	for _, k := range slices.Sorted(maps.Keys(s.Resources.Requests)) {
		if q := s.Resources.Requests[k]; q.Sign() < 0 {
			errs.Add(Key("spec.resources.requests", string(k)), "must be non-negative, got %s", Quote(q.String()))
		}
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
		} else if why := RestrictedLabel(k, false); why != "" {
			errs.Add(p, "%s, got %s", why, Quote(k))
		}
		if msgs := validation.IsValidLabelValue(m.Labels[k]); len(msgs) > 0 {
			errs.Add(p, "invalid label value %s: %s", Quote(m.Labels[k]), strings.Join(msgs, "; "))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		if msgs := validation.IsQualifiedName(strings.ToLower(k)); len(msgs) > 0 {
			errs.Add(Key(path+".annotations", k), "invalid annotation key %s: %s", Quote(k), strings.Join(msgs, "; "))
		}
	}
}

func validateClaimFields(path string, taints, startupTaints []corev1.Taint, reqs []NodeSelectorRequirementWithMinValues,
	ref *NodeClassReference, tgp *Duration, expireAfter Duration, errs *ValidationError) {
	ValidateTaints(path+".taints", taints, errs)
	ValidateTaints(path+".startupTaints", startupTaints, errs)
	ValidateRequirements(path+".requirements", reqs, errs)
	validateNodeClassRef(path+".nodeClassRef", ref, errs)
	if tgp != nil && !tgp.IsZero() && !durationRE.MatchString(tgp.String()) {
		errs.Add(path+".terminationGracePeriod", "must be a duration of hours, minutes and seconds such as \"48h\" (\"Never\" is not allowed), got %s", Quote(tgp.String()))
	}
	if !expireAfter.IsZero() && !durationOrNeverRE.MatchString(expireAfter.String()) {
		errs.Add(path+".expireAfter", "must be a duration of hours, minutes and seconds such as \"720h\" or \"Never\", got %s", Quote(expireAfter.String()))
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

// ValidateTaints checks taint keys, values and effects.
func ValidateTaints(path string, taints []corev1.Taint, errs *ValidationError) {
	for i, t := range taints {
		p := Index(path, i)
		if t.Key == "" {
			errs.Add(p+".key", "required, got \"\"")
		} else if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			errs.Add(p+".key", "invalid taint key %s: %s", Quote(t.Key), strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs.Add(p+".value", "invalid taint value %s: %s", Quote(t.Value), strings.Join(msgs, "; "))
		}
		if !contains(TaintEffects, t.Effect) {
			errs.Add(p+".effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute, got %s", Quote(string(t.Effect)))
		}
	}
}

// ValidateRequirements checks requirements the way Karpenter's CRD does:
// known operators, In has values, Gt/Lt/Gte/Lte have exactly one
// non-negative integer, Exists/DoesNotExist have none, minValues 1..50 and
// not more than the values of an In, keys and values well formed and not in
// a restricted label domain, at most 100 requirements.
func ValidateRequirements(path string, reqs []NodeSelectorRequirementWithMinValues, errs *ValidationError) {
	if len(reqs) > MaxRequirements {
		errs.Add(path, "at most %d requirements, got %d", MaxRequirements, len(reqs))
	}
	for i, r := range reqs {
		p := Index(path, i)
		switch {
		case r.Key == "":
			errs.Add(p+".key", "required, got \"\"")
		case len(validation.IsQualifiedName(r.Key)) > 0:
			errs.Add(p+".key", "invalid label key %s: %s", Quote(r.Key), strings.Join(validation.IsQualifiedName(r.Key), "; "))
		default:
			if why := RestrictedLabel(r.Key, true); why != "" {
				errs.Add(p+".key", "%s, got %s", why, Quote(r.Key))
			}
		}
		for j, v := range r.Values {
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				errs.Add(Index(p+".values", j), "invalid label value %s: %s", Quote(v), strings.Join(msgs, "; "))
			}
		}
		vals := r.Values
		if vals == nil {
			vals = []string{}
		}
		switch r.Operator {
		case OpIn:
			if len(r.Values) == 0 {
				errs.Add(p+".values", "In requires at least one value, got []")
			}
		case OpNotIn:
		case OpExists, OpDoesNotExist:
			if len(r.Values) != 0 {
				errs.Add(p+".values", "%s takes no values, got %s", r.Operator, Quote(vals))
			}
		case OpGt, OpLt, OpGte, OpLte:
			ok := len(r.Values) == 1
			if ok {
				n, err := strconv.ParseInt(r.Values[0], 10, 64)
				ok = err == nil && n >= 0 && digitsRE.MatchString(r.Values[0])
			}
			if !ok {
				errs.Add(p+".values", "%s requires exactly one non-negative integer, got %s", r.Operator, Quote(vals))
			}
		default:
			errs.Add(p+".operator", "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte, got %s", Quote(string(r.Operator)))
		}
		if r.MinValues != nil {
			mv := *r.MinValues
			switch {
			case mv < MinMinValues || mv > MaxMinValues:
				errs.Add(p+".minValues", "must be between %d and %d, got %d", MinMinValues, MaxMinValues, mv)
			case r.Operator == OpIn && len(r.Values) < mv:
				errs.Add(p+".minValues", "requires at least %d values with operator In, got %d: %s", mv, len(r.Values), Quote(vals))
			}
		}
	}
}

func validateDisruption(path string, d *Disruption, errs *ValidationError) {
	if !d.ConsolidateAfter.IsZero() && !durationOrNeverRE.MatchString(d.ConsolidateAfter.String()) {
		errs.Add(path+".consolidateAfter", "must be a duration of hours, minutes and seconds such as \"30s\" or \"Never\", got %s", Quote(d.ConsolidateAfter.String()))
	}
	if d.ConsolidationPolicy != "" && !contains(ConsolidationPolicies, d.ConsolidationPolicy) {
		errs.Add(path+".consolidationPolicy", "must be one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced, got %s", Quote(string(d.ConsolidationPolicy)))
	}
	if len(d.Budgets) > MaxBudgets {
		errs.Add(path+".budgets", "at most %d budgets, got %d", MaxBudgets, len(d.Budgets))
	}
	for i, b := range d.Budgets {
		p := Index(path+".budgets", i)
		if b.Nodes == "" {
			errs.Add(p+".nodes", "required: a count such as \"5\" or a percentage such as \"10%%\", got \"\"")
		} else if !budgetNodesRE.MatchString(b.Nodes) {
			errs.Add(p+".nodes", "must be a count such as \"5\" or a percentage from 0%% to 100%%, got %s", Quote(b.Nodes))
		}
		for j, r := range b.Reasons {
			if !contains(DisruptionReasons, r) {
				errs.Add(Index(p+".reasons", j), "must be one of Underutilized, Empty, Drifted, got %s", Quote(string(r)))
			}
		}
		hasSchedule, hasDuration := b.Schedule != nil, b.Duration != nil
		if hasSchedule != hasDuration {
			if hasSchedule {
				errs.Add(p+".duration", "required when schedule is set (schedule %s)", Quote(*b.Schedule))
			} else {
				errs.Add(p+".schedule", "required when duration is set (duration %s)", Quote(b.Duration.String()))
			}
		}
		if hasSchedule {
			if err := ValidateSchedule(*b.Schedule); err != nil {
				errs.Add(p+".schedule", "%v, got %s", err, Quote(*b.Schedule))
			}
		}
		if hasDuration && !budgetDurationRE.MatchString(b.Duration.String()) {
			errs.Add(p+".duration", "must be hours and/or minutes such as \"8h\" or \"1h30m\", got %s", Quote(b.Duration.String()))
		}
	}
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ValidateSchedule checks a budget schedule: five cron fields (minute hour
// day-of-month month day-of-week, UTC) or one of ScheduleMacros. Time zones
// and @every are not accepted, as in Karpenter.
func ValidateSchedule(s string) error {
	if strings.HasPrefix(s, "@") {
		if !contains(ScheduleMacros, s) {
			return fmt.Errorf("must be a 5-field cron expression or one of %s", strings.Join(ScheduleMacros, ", "))
		}
		return nil
	}
	if f := strings.Fields(s); len(f) != 5 {
		return fmt.Errorf("must be a 5-field cron expression (minute hour day-of-month month day-of-week) or a macro such as @daily, found %d fields", len(f))
	}
	if strings.Contains(s, "TZ=") {
		return fmt.Errorf("time zones are not supported")
	}
	if _, err := cronParser.Parse(s); err != nil {
		return fmt.Errorf("invalid cron expression: %v", err)
	}
	return nil
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
