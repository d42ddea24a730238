package catalog

import "math"

// SpotModel turns an on-demand price into a modelled spot price, until live
// spot prices replace it:
//
//	spot = round6(onDemand × ratio(category) × (1 + ZoneStep × zoneIndex))
//
// where ratio is Ratios[category] (else DefaultRatio) and zoneIndex is the
// zone's last letter minus 'a' (us-east-1a → 0, us-east-1c → 2), so zones
// differ slightly and deterministically. The zero value means
// DefaultSpotModel.
type SpotModel struct {
	// Ratios maps an instance category (karpenter.k8s.aws/instance-category)
	// to spot price / on-demand price.
	Ratios map[string]float64
	// DefaultRatio applies to categories not in Ratios.
	DefaultRatio float64
	// ZoneStep raises the ratio per zone letter after 'a'.
	ZoneStep float64
}

// DefaultSpotModel: spot costs 30-50 % of on-demand depending on the
// category (general purpose 40 %, compute 38 %, memory 35 %, burstable 32 %,
// GPU/accelerated 45-50 %), 2 % more per zone letter after 'a'. These are
// round figures in the range of typical us-east-1 spot discounts, not
// measured prices.
var DefaultSpotModel = SpotModel{
	Ratios: map[string]float64{
		"a": 0.45, "c": 0.38, "d": 0.35, "g": 0.45, "gr": 0.45, "i": 0.33, "im": 0.33,
		"inf": 0.40, "is": 0.33, "m": 0.40, "p": 0.50, "r": 0.35, "t": 0.32, "trn": 0.45,
		"x": 0.30, "z": 0.42,
	},
	DefaultRatio: 0.40,
	ZoneStep:     0.02,
}

func (m SpotModel) isZero() bool {
	return m.Ratios == nil && m.DefaultRatio == 0 && m.ZoneStep == 0
}

// Price is the modelled spot price of e in zone.
func (m SpotModel) Price(e Entry, zone string) float64 {
	if m.isZero() {
		m = DefaultSpotModel
	}
	ratio, ok := m.Ratios[e.Category]
	if !ok {
		ratio = m.DefaultRatio
	}
	idx := 0
	if n := len(zone); n > 0 && zone[n-1] >= 'a' && zone[n-1] <= 'z' {
		idx = int(zone[n-1] - 'a')
	}
	return round6(e.OnDemandPrice * ratio * (1 + m.ZoneStep*float64(idx)))
}

func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }
