package requirements

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRequirementMatches(t *testing.T) {
	tests := []struct {
		name    string
		req     *Requirement
		value   string
		present bool
		want    bool
	}{
		{"in hit", MustNew("k", OpIn, "a", "b"), "a", true, true},
		{"in miss", MustNew("k", OpIn, "a", "b"), "c", true, false},
		{"in absent", MustNew("k", OpIn, "a"), "", false, false},
		{"notin hit", MustNew("k", OpNotIn, "a"), "a", true, false},
		{"notin other", MustNew("k", OpNotIn, "a"), "b", true, true},
		{"notin absent", MustNew("k", OpNotIn, "a"), "", false, true},
		{"exists present", MustNew("k", OpExists), "x", true, true},
		{"exists absent", MustNew("k", OpExists), "", false, false},
		{"dne present", MustNew("k", OpDoesNotExist), "x", true, false},
		{"dne absent", MustNew("k", OpDoesNotExist), "", false, true},
		{"gt above", MustNew("k", OpGt, "4"), "5", true, true},
		{"gt equal", MustNew("k", OpGt, "4"), "4", true, false},
		{"gt non-int", MustNew("k", OpGt, "4"), "x", true, false},
		{"gt absent", MustNew("k", OpGt, "4"), "", false, false},
		{"gte equal", MustNew("k", OpGte, "4"), "4", true, true},
		{"gte below", MustNew("k", OpGte, "4"), "3", true, false},
		{"lt below", MustNew("k", OpLt, "4"), "3", true, true},
		{"lt equal", MustNew("k", OpLt, "4"), "4", true, false},
		{"lte equal", MustNew("k", OpLte, "4"), "4", true, true},
		{"lte above", MustNew("k", OpLte, "4"), "5", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.req.Matches(tt.value, tt.present); got != tt.want {
				t.Fatalf("%s matches (%q, %v) = %v, want %v", tt.req, tt.value, tt.present, got, tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		op   string
		vals []string
	}{
		{OpIn, nil}, {OpGt, []string{"x"}}, {OpLt, []string{"1", "2"}}, {"Near", []string{"a"}},
	} {
		if _, err := New("k", c.op, c.vals...); err == nil {
			t.Errorf("New(%s, %v) succeeded, want error", c.op, c.vals)
		}
	}
}

func TestIntersect(t *testing.T) {
	tests := []struct {
		name     string
		a, b     *Requirement
		has      []string
		hasNot   []string
		absentOK bool
		empty    bool
	}{
		{"in in", MustNew("k", OpIn, "a", "b"), MustNew("k", OpIn, "b", "c"), []string{"b"}, []string{"a", "c"}, false, false},
		{"in in disjoint", MustNew("k", OpIn, "a"), MustNew("k", OpIn, "c"), nil, []string{"a", "c"}, false, true},
		{"in notin", MustNew("k", OpIn, "a", "b"), MustNew("k", OpNotIn, "a"), []string{"b"}, []string{"a"}, false, false},
		{"notin notin", MustNew("k", OpNotIn, "a"), MustNew("k", OpNotIn, "b"), []string{"c"}, []string{"a", "b"}, true, false},
		{"exists notin", MustNew("k", OpExists), MustNew("k", OpNotIn, "a"), []string{"b"}, []string{"a"}, false, false},
		{"dne in", MustNew("k", OpDoesNotExist), MustNew("k", OpIn, "a"), nil, []string{"a"}, false, true},
		{"dne notin", MustNew("k", OpDoesNotExist), MustNew("k", OpNotIn, "a"), nil, []string{"a", "b"}, true, false},
		{"dne exists", MustNew("k", OpDoesNotExist), MustNew("k", OpExists), nil, []string{"a"}, false, true},
		{"gt lt", MustNew("k", OpGt, "2"), MustNew("k", OpLt, "5"), []string{"3", "4"}, []string{"2", "5", "x"}, false, false},
		{"gt lt empty", MustNew("k", OpGt, "2"), MustNew("k", OpLt, "3"), nil, []string{"2", "3"}, false, true},
		{"gte lte point", MustNew("k", OpGte, "3"), MustNew("k", OpLte, "3"), []string{"3"}, []string{"2", "4"}, false, false},
		{"gt in", MustNew("k", OpGt, "2"), MustNew("k", OpIn, "1", "3", "x"), []string{"3"}, []string{"1", "x"}, false, false},
		{"gt notin", MustNew("k", OpGt, "2"), MustNew("k", OpNotIn, "4"), []string{"3", "5"}, []string{"4", "2"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []*Requirement{tt.a.Intersect(tt.b), tt.b.Intersect(tt.a)} {
				for _, v := range tt.has {
					if !r.Has(v) {
						t.Errorf("%s: want %q in it", r, v)
					}
				}
				for _, v := range tt.hasNot {
					if r.Has(v) {
						t.Errorf("%s: want %q not in it", r, v)
					}
				}
				if r.AbsentOK() != tt.absentOK {
					t.Errorf("%s: absentOK %v, want %v", r, r.AbsentOK(), tt.absentOK)
				}
				if r.Empty() != tt.empty {
					t.Errorf("%s: empty %v, want %v", r, r.Empty(), tt.empty)
				}
			}
			if got := tt.a.Intersects(tt.b); got == tt.empty {
				t.Errorf("Intersects = %v, want %v", got, !tt.empty)
			}
		})
	}
}

func TestRequirementsCompatibleAndMatch(t *testing.T) {
	pool := NewRequirements(MustNew("zone", OpIn, "a", "b"), MustNew("arch", OpIn, "amd64"))
	pod := NewRequirements(MustNew("zone", OpIn, "b", "c"))
	if err := pool.Compatible(pod); err != nil {
		t.Fatalf("compatible: %v", err)
	}
	bad := NewRequirements(MustNew("arch", OpIn, "arm64"))
	err := pool.Compatible(bad)
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("arm64 vs amd64 = %v, want ErrIncompatible", err)
	}
	merged := pool.Intersect(pod)
	if z := merged.Get("zone"); z == nil || len(z.Values()) != 1 || z.Values()[0] != "b" {
		t.Fatalf("merged zone = %v, want [b]", z)
	}
	if err := merged.Match(map[string]string{"zone": "b", "arch": "amd64"}); err != nil {
		t.Fatalf("match: %v", err)
	}
	if err := merged.Match(map[string]string{"zone": "a", "arch": "amd64"}); err == nil {
		t.Fatal("zone a matched a set that only holds b")
	}
	if err := merged.Match(map[string]string{"zone": "b"}); err == nil {
		t.Fatal("missing arch label matched")
	}
}

func TestFromNodeSelectorRoundTrip(t *testing.T) {
	in := []corev1.NodeSelectorRequirement{
		{Key: "a", Operator: corev1.NodeSelectorOpIn, Values: []string{"y", "x"}},
		{Key: "b", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"z"}},
		{Key: "c", Operator: corev1.NodeSelectorOpGt, Values: []string{"3"}},
		{Key: "d", Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: "e", Operator: corev1.NodeSelectorOpExists},
	}
	rs, err := FromNodeSelector(in)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromNodeSelector(rs.NodeSelectorRequirements())
	if err != nil {
		t.Fatal(err)
	}
	labels := []map[string]string{
		{"a": "x", "c": "4", "e": "1"},
		{"a": "x", "b": "z", "c": "4", "e": "1"},
		{"a": "q", "c": "4", "e": "1"},
		{"a": "y", "c": "3", "e": "1"},
		{"a": "y", "c": "9", "d": "1", "e": "1"},
		{"a": "y", "c": "9"},
	}
	for _, l := range labels {
		if rs.Matches(l) != back.Matches(l) {
			t.Errorf("round trip changed the verdict on %v: %s vs %s", l, rs, back)
		}
	}
	if !rs.Matches(labels[0]) || rs.Matches(labels[1]) || rs.Matches(labels[2]) || rs.Matches(labels[3]) || rs.Matches(labels[4]) || rs.Matches(labels[5]) {
		t.Errorf("unexpected verdicts for %s", rs)
	}
}

func TestMinValues(t *testing.T) {
	mv := 3
	r := MustNew("family", OpExists)
	r.MinValues = &mv
	rs := NewRequirements(r)
	sets := func(vals ...string) func(func(map[string]string) bool) {
		return func(yield func(map[string]string) bool) {
			for _, v := range vals {
				if !yield(map[string]string{"family": v}) {
					return
				}
			}
		}
	}
	if err := rs.MinValuesError(sets("m5", "c5", "r5", "m5")); err != nil {
		t.Fatalf("3 families: %v", err)
	}
	if err := rs.MinValuesError(sets("m5", "c5", "m5")); err == nil {
		t.Fatal("2 families passed minValues 3")
	}
}
