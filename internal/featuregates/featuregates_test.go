package featuregates

import (
	"slices"
	"testing"
)

// Karpenter's ParseFeatureGates: defaults, overrides, spaces, unknown
// names ignored, malformed input refused.
func TestParse(t *testing.T) {
	def := Defaults()
	cases := []struct {
		in      string
		want    Gates
		unknown []string
		err     bool
	}{
		{in: "", want: def},
		{in: Default, want: def},
		{in: "StaticCapacity=true", want: Gates{ReservedCapacity: true, StaticCapacity: true}},
		{in: " StaticCapacity = true , ReservedCapacity=false ", want: Gates{StaticCapacity: true}},
		{in: "NodeRepair=true,SpotToSpotConsolidation=1,NodeOverlay=T,CapacityBuffer=true", want: Gates{NodeRepair: true, ReservedCapacity: true,
			SpotToSpotConsolidation: true, NodeOverlay: true, CapacityBuffer: true}},
		{in: "BalancedConsolidation=true,StaticCapacity=true", want: Gates{ReservedCapacity: true, StaticCapacity: true}, unknown: []string{"BalancedConsolidation"}},
		{in: "StaticCapacity", err: true},
		{in: "StaticCapacity=yes", err: true},
	}
	for _, c := range cases {
		g, unknown, err := Parse(c.in)
		if c.err {
			if err == nil {
				t.Errorf("Parse(%q): no error", c.in)
			}
			continue
		}
		if err != nil || g != c.want || !slices.Equal(unknown, c.unknown) {
			t.Errorf("Parse(%q) = %+v, %v, %v; want %+v, %v", c.in, g, unknown, err, c.want, c.unknown)
		}
	}
	if def.StaticCapacity || !def.ReservedCapacity {
		t.Errorf("defaults %+v", def)
	}
}

// TestUnsupported: the gates Joiner does not implement, set true, are
// named (the chart's refusal: nodeRepair, nodeOverlay, capacityBuffer);
// off, or the gates it acts on, are not.
func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{in: Default},
		{in: "NodeRepair=false,NodeOverlay=false,CapacityBuffer=false,StaticCapacity=true,SpotToSpotConsolidation=true"},
		{in: "NodeRepair=true", want: []string{"NodeRepair"}},
		{in: "CapacityBuffer=true,NodeOverlay=true,NodeRepair=true", want: []string{"NodeRepair", "NodeOverlay", "CapacityBuffer"}},
	} {
		g, _, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if got := g.Unsupported(); !slices.Equal(got, c.want) {
			t.Errorf("Parse(%q).Unsupported() = %v, want %v", c.in, got, c.want)
		}
	}
}
