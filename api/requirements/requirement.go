// Package requirements is the set algebra over node selector requirements
// that Karpenter-style scheduling needs: each requirement is a set of label
// values, possibly a complement (NotIn, Exists), possibly bounded
// (Gt/Lt/Gte/Lte), possibly satisfied by the label being absent (NotIn,
// DoesNotExist). Sets intersect, and a set of requirements is compatible
// with another when no key intersects to nothing.
//
// The package is pure and allocation-conscious: values are kept sorted, and
// no operation mutates its operands.
package requirements

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Operators understood by New (the Kubernetes ones plus Karpenter v1's Gte
// and Lte).
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
	OpGt           = "Gt"
	OpLt           = "Lt"
	OpGte          = "Gte"
	OpLte          = "Lte"
)

// Requirement is the set of values one label key may take.
//
// The set is values (complement=false) or everything except values
// (complement=true), further restricted to integers strictly between gt and
// lt when those bounds are set. absentOK says whether a node without the
// label satisfies the requirement.
type Requirement struct {
	Key        string
	complement bool
	values     []string // sorted, unique
	gt, lt     *int64   // exclusive bounds
	absentOK   bool
	// MinValues is the minimum number of distinct values of Key the
	// candidate instance types of a claim must keep (nil: no minimum).
	MinValues *int
}

// New builds a requirement from an operator and values. It returns an error
// naming the operator or value when they are invalid (In without values, Gt
// with a non-integer, an unknown operator).
func New(key, op string, values ...string) (*Requirement, error) {
	r := &Requirement{Key: key}
	switch op {
	case OpIn:
		if len(values) == 0 {
			return nil, fmt.Errorf("requirement %s: operator In needs at least one value", key)
		}
		r.values = sortedUnique(values)
	case OpNotIn:
		r.complement, r.absentOK = true, true
		r.values = sortedUnique(values)
	case OpExists:
		r.complement = true
	case OpDoesNotExist:
		r.absentOK = true
	case OpGt, OpLt, OpGte, OpLte:
		if len(values) != 1 {
			return nil, fmt.Errorf("requirement %s: operator %s needs exactly one value, got %d", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("requirement %s: operator %s needs an integer, got %q", key, op, values[0])
		}
		r.complement = true
		switch op {
		case OpGt:
			r.gt = &n
		case OpGte:
			n--
			r.gt = &n
		case OpLt:
			r.lt = &n
		case OpLte:
			n++
			r.lt = &n
		}
	default:
		return nil, fmt.Errorf("requirement %s: unknown operator %q", key, op)
	}
	return r, nil
}

// MustNew is New that panics; for tests and constants.
func MustNew(key, op string, values ...string) *Requirement {
	r, err := New(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

func sortedUnique(v []string) []string {
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}

// Has reports whether value is in the set (the label is present with it).
func (r *Requirement) Has(value string) bool {
	if !r.inBounds(value) {
		return false
	}
	_, found := slices.BinarySearch(r.values, value)
	return found != r.complement
}

// AbsentOK reports whether a node without the label satisfies r.
func (r *Requirement) AbsentOK() bool { return r.absentOK }

// Matches reports whether a node whose label is (value, present) satisfies r.
func (r *Requirement) Matches(value string, present bool) bool {
	if !present {
		return r.absentOK
	}
	return r.Has(value)
}

func (r *Requirement) inBounds(value string) bool {
	if r.gt == nil && r.lt == nil {
		return true
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	return (r.gt == nil || n > *r.gt) && (r.lt == nil || n < *r.lt)
}

// Len is the number of values in the set; complements count as
// math.MaxInt64 minus the excluded values (bounded complements count the
// integers in range).
func (r *Requirement) Len() int64 {
	if !r.complement {
		return int64(len(r.values))
	}
	if r.gt != nil && r.lt != nil {
		n := *r.lt - *r.gt - 1
		for _, v := range r.values {
			if r.inBounds(v) {
				n--
			}
		}
		return max(n, 0)
	}
	return math.MaxInt64 - int64(len(r.values))
}

// Empty reports whether nothing satisfies r: no value and absence not allowed.
func (r *Requirement) Empty() bool { return !r.absentOK && r.Len() == 0 }

// Values returns the values of a non-complement set (nil for complements).
// The slice is shared: do not modify it.
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return r.values
}

// Any returns some value in the set, preferring the smallest, and false when
// the set has no values. Like Karpenter's, a value of a set given by what
// it excludes (Exists, NotIn, Gt, Lt) is a whole number: the smallest in
// bounds that is not excluded (Karpenter picks one at random).
func (r *Requirement) Any() (string, bool) {
	if !r.complement {
		if len(r.values) == 0 {
			return "", false
		}
		return r.values[0], true
	}
	if r.gt != nil || r.lt != nil {
		lo := int64(0)
		if r.gt != nil {
			lo = *r.gt + 1
		}
		for n := lo; r.lt == nil || n < *r.lt; n++ {
			if v := strconv.FormatInt(n, 10); r.Has(v) {
				return v, true
			}
			if n-lo > int64(len(r.values))+1 {
				break
			}
		}
		return "", false
	}
	for i := 0; ; i++ {
		if v := strconv.Itoa(i); r.Has(v) {
			return v, true
		}
	}
}

// Intersect returns the set of values in both r and o (r.Key is kept).
// MinValues is the larger of the two.
func (r *Requirement) Intersect(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, absentOK: r.absentOK && o.absentOK}
	out.gt = maxPtr(r.gt, o.gt)
	out.lt = minPtr(r.lt, o.lt)
	out.MinValues = maxPtr(r.MinValues, o.MinValues)
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = mergeUnique(r.values, o.values)
	case r.complement:
		out.values = filter(o.values, func(v string) bool { return r.Has(v) })
	case o.complement:
		out.values = filter(r.values, func(v string) bool { return o.Has(v) })
	default:
		out.values = filter(r.values, func(v string) bool {
			_, ok := slices.BinarySearch(o.values, v)
			return ok
		})
	}
	if !out.complement {
		out.values = filter(out.values, out.inBounds)
		out.gt, out.lt = nil, nil
	} else if out.gt != nil && out.lt != nil && *out.lt-*out.gt <= 1 {
		out.complement, out.values, out.gt, out.lt = false, nil, nil, nil
	}
	return out
}

// Intersects reports whether r and o share a value or both allow absence.
func (r *Requirement) Intersects(o *Requirement) bool {
	if r.absentOK && o.absentOK {
		return true
	}
	// fast paths avoiding an allocation
	switch {
	case !r.complement && !o.complement:
		for _, v := range r.values {
			if o.Has(v) && r.inBounds(v) {
				return true
			}
		}
		return false
	case !r.complement:
		for _, v := range r.values {
			if o.Has(v) && r.inBounds(v) {
				return true
			}
		}
		return false
	case !o.complement:
		return o.Intersects(r)
	}
	return r.Intersect(o).Len() > 0
}

// Operator returns the operator that best describes the set, for output.
func (r *Requirement) Operator() string {
	switch {
	case !r.complement && len(r.values) == 0:
		return OpDoesNotExist
	case !r.complement:
		return OpIn
	case len(r.values) == 0 && r.gt == nil && r.lt == nil:
		return OpExists
	case r.gt != nil || r.lt != nil:
		if r.gt != nil {
			return OpGt
		}
		return OpLt
	}
	return OpNotIn
}

// NodeSelectorRequirements renders r as one or more node selector
// requirements whose conjunction is r.
func (r *Requirement) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	key := r.Key
	switch {
	case !r.complement && len(r.values) == 0 && r.absentOK:
		return append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist})
	case !r.complement && len(r.values) == 0:
		// nothing satisfies it: a contradiction Kubernetes can express
		return append(out,
			corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists},
			corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist})
	case !r.complement:
		return append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(r.values)})
	}
	if r.gt != nil {
		out = append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(*r.gt, 10)}})
	}
	if r.lt != nil {
		out = append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(*r.lt, 10)}})
	}
	if len(r.values) > 0 {
		out = append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: slices.Clone(r.values)})
	}
	if !r.absentOK && r.gt == nil && r.lt == nil {
		out = append(out, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists})
	}
	return out
}

// String renders r compactly, e.g. `zone In [a b]`, `cpu Gt 4 Lt 16`.
func (r *Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	switch {
	case !r.complement && len(r.values) == 0 && !r.absentOK:
		b.WriteString(" In []")
	case !r.complement && len(r.values) == 0:
		b.WriteString(" DoesNotExist")
	case !r.complement:
		fmt.Fprintf(&b, " In %v", r.values)
	default:
		if len(r.values) > 0 {
			fmt.Fprintf(&b, " NotIn %v", r.values)
		}
		if r.gt != nil {
			fmt.Fprintf(&b, " Gt %d", *r.gt)
		}
		if r.lt != nil {
			fmt.Fprintf(&b, " Lt %d", *r.lt)
		}
		if len(r.values) == 0 && r.gt == nil && r.lt == nil {
			b.WriteString(" Exists")
		}
	}
	if r.MinValues != nil {
		fmt.Fprintf(&b, " minValues %d", *r.MinValues)
	}
	return b.String()
}

func filter(v []string, keep func(string) bool) []string {
	var out []string
	for _, s := range v {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func mergeUnique(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]string, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// maxPtr is the larger of a and b; nil is no bound.
func maxPtr[T cmp.Ordered](a, b *T) *T {
	if a == nil {
		return b
	}
	if b == nil || *a >= *b {
		return a
	}
	return b
}

// minPtr is the smaller of a and b; nil is no bound.
func minPtr[T cmp.Ordered](a, b *T) *T {
	if a == nil {
		return b
	}
	if b == nil || *a <= *b {
		return a
	}
	return b
}
