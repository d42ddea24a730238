package requirements

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// ErrIncompatible is wrapped by the errors Compatible and Match return.
var ErrIncompatible = errors.New("incompatible requirements")

// Requirements is a conjunction of requirements, at most one per key. The
// zero value and nil are empty (everything matches). Requirements values are
// immutable once built: Add and Intersect return new sets.
type Requirements struct {
	reqs []*Requirement // sorted by key
}

// NewRequirements builds a set from requirements, intersecting those that
// share a key.
func NewRequirements(rs ...*Requirement) Requirements {
	var out Requirements
	for _, r := range rs {
		out = out.Add(r)
	}
	return out
}

// Len is the number of keys constrained.
func (rs Requirements) Len() int { return len(rs.reqs) }

// All returns the requirements sorted by key. The slice is shared.
func (rs Requirements) All() []*Requirement { return rs.reqs }

// Keys returns the constrained keys, sorted.
func (rs Requirements) Keys() []string {
	out := make([]string, len(rs.reqs))
	for i, r := range rs.reqs {
		out[i] = r.Key
	}
	return out
}

// Get returns the requirement for key, or nil when key is unconstrained.
func (rs Requirements) Get(key string) *Requirement {
	i, ok := slices.BinarySearchFunc(rs.reqs, key, func(r *Requirement, k string) int { return strings.Compare(r.Key, k) })
	if !ok {
		return nil
	}
	return rs.reqs[i]
}

// Add returns rs with r intersected in.
func (rs Requirements) Add(r *Requirement) Requirements {
	i, ok := slices.BinarySearchFunc(rs.reqs, r.Key, func(x *Requirement, k string) int { return strings.Compare(x.Key, k) })
	out := make([]*Requirement, len(rs.reqs), len(rs.reqs)+1)
	copy(out, rs.reqs)
	if ok {
		out[i] = out[i].Intersect(r)
	} else {
		out = slices.Insert(out, i, r)
	}
	return Requirements{reqs: out}
}

// Intersect returns the conjunction of rs and o.
func (rs Requirements) Intersect(o Requirements) Requirements {
	if len(o.reqs) == 0 {
		return rs
	}
	if len(rs.reqs) == 0 {
		return o
	}
	out := make([]*Requirement, 0, len(rs.reqs)+len(o.reqs))
	i, j := 0, 0
	for i < len(rs.reqs) || j < len(o.reqs) {
		switch {
		case j == len(o.reqs) || (i < len(rs.reqs) && rs.reqs[i].Key < o.reqs[j].Key):
			out = append(out, rs.reqs[i])
			i++
		case i == len(rs.reqs) || o.reqs[j].Key < rs.reqs[i].Key:
			out = append(out, o.reqs[j])
			j++
		default:
			out = append(out, rs.reqs[i].Intersect(o.reqs[j]))
			i++
			j++
		}
	}
	return Requirements{reqs: out}
}

// Compatible returns nil when rs and o can both hold: every key constrained
// by both intersects. Keys constrained by only one side are compatible (the
// other side does not care). The error names the first offending key.
func (rs Requirements) Compatible(o Requirements) error {
	i, j := 0, 0
	for i < len(rs.reqs) && j < len(o.reqs) {
		a, b := rs.reqs[i], o.reqs[j]
		switch {
		case a.Key < b.Key:
			i++
		case b.Key < a.Key:
			j++
		default:
			if !a.Intersects(b) {
				return fmt.Errorf("%w: key %s, %s not in %s", ErrIncompatible, a.Key, b, a)
			}
			i++
			j++
		}
	}
	return nil
}

// Satisfiable returns an error naming the first key no value satisfies.
func (rs Requirements) Satisfiable() error {
	for _, r := range rs.reqs {
		if r.Empty() {
			return fmt.Errorf("%w: key %s has no possible value", ErrIncompatible, r.Key)
		}
	}
	return nil
}

// Match returns nil when a node with these labels satisfies every
// requirement; otherwise an error naming the first failing key.
func (rs Requirements) Match(labels map[string]string) error {
	for _, r := range rs.reqs {
		v, ok := labels[r.Key]
		if !r.Matches(v, ok) {
			if !ok {
				return fmt.Errorf("%w: label %s missing, want %s", ErrIncompatible, r.Key, r)
			}
			return fmt.Errorf("%w: label %s=%s, want %s", ErrIncompatible, r.Key, v, r)
		}
	}
	return nil
}

// Matches is Match as a bool, without building an error.
func (rs Requirements) Matches(labels map[string]string) bool {
	for _, r := range rs.reqs {
		v, ok := labels[r.Key]
		if !r.Matches(v, ok) {
			return false
		}
	}
	return true
}

// NodeSelectorRequirements renders the set, sorted by key.
func (rs Requirements) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, r := range rs.reqs {
		out = append(out, r.NodeSelectorRequirements()...)
	}
	return out
}

// String renders the set as `a In [x], b Exists`.
func (rs Requirements) String() string {
	parts := make([]string, len(rs.reqs))
	for i, r := range rs.reqs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// FromLabels is one In requirement per label.
func FromLabels(labels map[string]string) Requirements {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*Requirement, len(keys))
	for i, k := range keys {
		out[i] = &Requirement{Key: k, values: []string{labels[k]}}
	}
	return Requirements{reqs: out}
}

// FromNodeSelector converts Kubernetes node selector requirements (one
// term's matchExpressions).
func FromNodeSelector(in []corev1.NodeSelectorRequirement) (Requirements, error) {
	return from("matchExpressions", in, func(r corev1.NodeSelectorRequirement) (string, string, []string, *int) {
		return r.Key, string(r.Operator), r.Values, nil
	})
}

// FromNodePool converts NodePool requirements, keeping minValues.
func FromNodePool(in []karpv1.NodeSelectorRequirementWithMinValues) (Requirements, error) {
	return from("requirements", in, func(r karpv1.NodeSelectorRequirementWithMinValues) (string, string, []string, *int) {
		return r.Key, string(r.Operator), r.Values, r.MinValues
	})
}

// from converts the requirements of a list (named field in errors); parts
// gives each one's key, operator, values and minValues.
func from[T any](field string, in []T, parts func(T) (key, op string, values []string, minValues *int)) (Requirements, error) {
	var out Requirements
	for i, r := range in {
		key, op, values, minValues := parts(r)
		req, err := New(key, op, values...)
		if err != nil {
			return Requirements{}, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		if minValues != nil {
			mv := *minValues
			req.MinValues = &mv
		}
		out = out.Add(req)
	}
	return out, nil
}

// MinValuesError checks that the label sets (one per remaining instance
// type) keep at least MinValues distinct values of each key that asks for
// it; it returns an error naming the first key that falls short.
func (rs Requirements) MinValuesError(labelSets func(yield func(map[string]string) bool)) error {
	for _, r := range rs.reqs {
		if r.MinValues == nil {
			continue
		}
		seen := map[string]struct{}{}
		for l := range labelSets {
			if v, ok := l[r.Key]; ok && r.Has(v) {
				seen[v] = struct{}{}
			}
		}
		if len(seen) < *r.MinValues {
			return fmt.Errorf("%w: key %s keeps %d distinct values, minValues is %d", ErrIncompatible, r.Key, len(seen), *r.MinValues)
		}
	}
	return nil
}
