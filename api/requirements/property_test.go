package requirements

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// randomRequirement draws an operator and values over a small universe
// ("0".."9" plus "a", "b") so that intersections are often non-trivial.
func randomRequirement(rng *rand.Rand) *Requirement {
	universe := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b"}
	pick := func() []string {
		n := 1 + rng.IntN(3)
		out := make([]string, n)
		for i := range out {
			out[i] = universe[rng.IntN(len(universe))]
		}
		return out
	}
	switch rng.IntN(8) {
	case 0:
		return MustNew("k", OpIn, pick()...)
	case 1:
		return MustNew("k", OpNotIn, pick()...)
	case 2:
		return MustNew("k", OpExists)
	case 3:
		return MustNew("k", OpDoesNotExist)
	case 4:
		return MustNew("k", OpGt, strconv.Itoa(rng.IntN(10)))
	case 5:
		return MustNew("k", OpLt, strconv.Itoa(rng.IntN(10)))
	case 6:
		return MustNew("k", OpGte, strconv.Itoa(rng.IntN(10)))
	default:
		return MustNew("k", OpLte, strconv.Itoa(rng.IntN(10)))
	}
}

// TestIntersectProperties: a node label satisfies a ∩ b exactly when it
// satisfies a and b (present values and absence); Intersect is commutative
// in what it admits; Intersects agrees with the existence of a witness;
// rendering to node selector requirements and back admits the same labels.
func TestIntersectProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	probes := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "-1", "a", "b", "c"}
	for i := 0; i < 5000; i++ {
		a, b := randomRequirement(rng), randomRequirement(rng)
		ab, ba := a.Intersect(b), b.Intersect(a)
		witness := ab.AbsentOK()
		for _, v := range probes {
			want := a.Matches(v, true) && b.Matches(v, true)
			if ab.Matches(v, true) != want || ba.Matches(v, true) != want {
				t.Fatalf("%s ∩ %s = %s admits %q: %v, want %v", a, b, ab, v, ab.Matches(v, true), want)
			}
			witness = witness || want
		}
		if want := a.AbsentOK() && b.AbsentOK(); ab.Matches("", false) != want {
			t.Fatalf("%s ∩ %s = %s: absence %v, want %v", a, b, ab, ab.Matches("", false), want)
		}
		// with non-integer complements there are always more witnesses
		// than probes; Intersects may only say true when one exists or the
		// set is an unbounded complement
		if a.Intersects(b) && !witness && ab.Len() == 0 {
			t.Fatalf("%s intersects %s but nothing satisfies both", a, b)
		}
		if !a.Intersects(b) && witness {
			t.Fatalf("%s does not intersect %s but a witness exists", a, b)
		}
		back, err := FromNodeSelector(ab.NodeSelectorRequirements())
		if err != nil {
			t.Fatalf("%s: rendering back: %v", ab, err)
		}
		for _, v := range append(probes, "") {
			present := v != ""
			l := map[string]string{}
			if present {
				l["k"] = v
			}
			if got, want := back.Matches(l), ab.Matches(v, present); got != want {
				t.Fatalf("%s rendered as %v admits %q: %v, want %v", ab, ab.NodeSelectorRequirements(), v, got, want)
			}
		}
	}
}
