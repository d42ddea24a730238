// Package featuregates reads Karpenter's --feature-gates (its
// FEATURE_GATES): the same gate names, defaults and syntax
// (Name=bool,Name=bool; unknown names are ignored, as in Karpenter).
package featuregates

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Gates are Karpenter v1.14's feature gates. Joiner acts on StaticCapacity,
// SpotToSpotConsolidation and ReservedCapacity; NodeRepair, NodeOverlay and
// CapacityBuffer are accepted off (Karpenter's defaults, so a Karpenter
// setting carries over) and refused on (Unsupported), as the Helm chart
// refuses them.
type Gates struct {
	NodeRepair bool
	// ReservedCapacity resolves EC2NodeClass capacity reservations and
	// offers their reserved capacity (on by default).
	ReservedCapacity bool
	// SpotToSpotConsolidation lets consolidation replace spot nodes by
	// cheaper spot nodes (off by default).
	SpotToSpotConsolidation bool
	NodeOverlay             bool
	// StaticCapacity runs the static capacity loop: NodePools with
	// spec.replicas keep that many nodes (alpha, off by default).
	StaticCapacity bool
	CapacityBuffer bool
}

// Default is Karpenter's default --feature-gates value.
const Default = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"

// Names are the gates Karpenter knows.
var Names = []string{"NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity", "CapacityBuffer"}

// Defaults are the gates when none is set.
func Defaults() Gates {
	return Gates{ReservedCapacity: true}
}

// Parse reads "Name=bool,..." over the defaults. It also returns the names
// it does not know (ignored, as Karpenter does); a pair without "=" or a
// value that is not a bool is an error.
func Parse(s string) (Gates, []string, error) {
	g := Defaults()
	var unknown []string
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return g, nil, fmt.Errorf("malformed pair %q, expect Name=bool", pair)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return g, nil, fmt.Errorf("invalid value of %s: %s, err: %w", k, v, err)
		}
		if field, known := g.fields()[k]; known {
			*field = b
		} else if !slices.Contains(unknown, k) {
			unknown = append(unknown, k)
		}
	}
	return g, unknown, nil
}

// unsupported are the gates Joiner does not implement: set true they are
// refused rather than silently ignored.
var unsupported = []string{"NodeRepair", "NodeOverlay", "CapacityBuffer"}

// Unsupported returns the gates set true that Joiner does not implement,
// in Names' order (none: nil).
func (g Gates) Unsupported() []string {
	var on []string
	fields := g.fields()
	for _, name := range unsupported {
		if *fields[name] {
			on = append(on, name)
		}
	}
	return on
}

// fields names each gate as Karpenter's --feature-gates spells it.
func (g *Gates) fields() map[string]*bool {
	return map[string]*bool{"NodeRepair": &g.NodeRepair, "ReservedCapacity": &g.ReservedCapacity,
		"SpotToSpotConsolidation": &g.SpotToSpotConsolidation, "NodeOverlay": &g.NodeOverlay,
		"StaticCapacity": &g.StaticCapacity, "CapacityBuffer": &g.CapacityBuffer}
}
