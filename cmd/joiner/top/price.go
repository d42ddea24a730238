package top

import (
	"fmt"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Price sources.
const (
	// SourceOnDemand is a list price from the embedded on-demand tables
	// (also used for reserved capacity, which is billed at that rate).
	SourceOnDemand = "on-demand"
	// SourceSpotModel is a spot price modelled from the on-demand one
	// (catalog.SpotModel), not a measured market price.
	SourceSpotModel = "spot-model"
	// SourceUnknown: no price is known; the node is left out of the totals.
	SourceUnknown = "unknown"
)

// Price is what one node costs per hour, as far as Joiner can tell.
type Price struct {
	PerHour float64 `json:"perHour"`
	// Known is false when the instance type has no label, or is not in the
	// catalogue or the price table.
	Known    bool   `json:"known"`
	Source   string `json:"source"`
	Currency string `json:"currency,omitempty"`
	// Note says where the figure comes from (one line per price table) or
	// why there is none; the view lists each distinct note once.
	Note string `json:"-"`
}

// Pricer prices a node from its labels.
type Pricer interface {
	Price(instanceType, capacityType, region, zone string) Price
}

// CataloguePricer prices nodes from Joiner's embedded catalogue: on-demand
// list prices per region (regions without a table are priced like
// catalog.PriceRegion) and, for spot, catalog.DefaultSpotModel applied to
// the region's on-demand price. eks-node-viewer prices nodes the same way,
// from instance type, capacity type and zone labels.
type CataloguePricer struct{}

// Price implements Pricer.
func (CataloguePricer) Price(instanceType, capacityType, region, zone string) Price {
	if instanceType == "" {
		return Price{Source: SourceUnknown, Note: "a node without a " + karpv1.LabelInstanceType + " label has no price"}
	}
	table, exact := catalog.PricesFor(region)
	od, ok := table.Price(instanceType)
	if !ok {
		return Price{Source: SourceUnknown, Note: fmt.Sprintf("%s is not in the embedded %s price table", instanceType, table.Region)}
	}
	note := fmt.Sprintf("on-demand: embedded %s list prices of %s", table.Region, table.Generated.Format("2006-01-02"))
	if !exact && region != "" {
		note = fmt.Sprintf("on-demand: no embedded prices for %s, priced as %s (list of %s)", region, table.Region, table.Generated.Format("2006-01-02"))
	}
	p := Price{PerHour: od, Known: true, Source: SourceOnDemand, Currency: table.Currency, Note: note}
	if capacityType != karpv1.CapacityTypeSpot {
		return p
	}
	e, ok := catalog.Lookup(instanceType)
	if !ok {
		// Priced but not described: no category for the model.
		e = catalog.Entry{Name: instanceType}
	}
	e.OnDemandPrice = od
	p.PerHour = catalog.DefaultSpotModel.Price(e, zone)
	p.Source = SourceSpotModel
	return p
}

// regionOf is the node's region label, else its zone without the trailing
// letter (us-east-1a -> us-east-1), else "".
func regionOf(labels map[string]string) string {
	if r := labels[karpv1.LabelRegion]; r != "" {
		return r
	}
	z := labels[karpv1.LabelZone]
	if n := len(z); n > 1 && z[n-1] >= 'a' && z[n-1] <= 'z' && z[n-2] >= '0' && z[n-2] <= '9' {
		return z[:n-1]
	}
	return ""
}

// capacityTypeOf is Karpenter's capacity-type label, else EKS managed node
// groups' (ON_DEMAND, SPOT, CAPACITY_BLOCK), lower-cased to Karpenter's
// words; "" when neither is set.
func capacityTypeOf(labels map[string]string) string {
	if c := labels[karpv1.LabelCapacityType]; c != "" {
		return c
	}
	switch strings.ToUpper(labels[labelEKSCapacityType]) {
	case "SPOT":
		return karpv1.CapacityTypeSpot
	case "ON_DEMAND":
		return karpv1.CapacityTypeOnDemand
	case "CAPACITY_BLOCK":
		return karpv1.CapacityTypeReserved
	}
	return ""
}

// labelEKSCapacityType is set on the nodes of EKS managed node groups.
const labelEKSCapacityType = "eks.amazonaws.com/capacityType"

// instanceTypeOf is the instance-type label, else its beta predecessor.
func instanceTypeOf(labels map[string]string) string {
	if t := labels[karpv1.LabelInstanceType]; t != "" {
		return t
	}
	return labels["beta.kubernetes.io/instance-type"]
}
