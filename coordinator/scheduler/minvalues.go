package scheduler

import (
	"iter"
	"strconv"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// TypeValues yields the values an instance type gives key when minValues
// are counted (Karpenter's InstanceTypes.SatisfiesMinValues, which reads
// each type's requirements): its label, or, for a key its offerings decide
// (zone, capacity type, capacity reservation labels), the values of its
// available offerings, however far a claim's requirements narrow them.
// A value may be yielded more than once.
func TypeValues(it *catalog.InstanceType, key string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !offeringKeys[key] {
			if v, ok := it.Labels[key]; ok {
				yield(v)
			}
			return
		}
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			if v, ok := offeringValue(o, key); ok && !yield(v) {
				return
			}
		}
	}
}

// offeringValue is the value of an offering key on an offering; spot and
// on-demand offerings have no reservation labels.
func offeringValue(o catalog.Offering, key string) (string, bool) {
	switch key {
	case karpv1.LabelZone:
		return o.Zone, true
	case karpv1.LabelCapacityType:
		return o.CapacityType, true
	}
	if o.CapacityType != karpv1.CapacityTypeReserved {
		return "", false
	}
	switch key {
	case karpv1.LabelCapacityReservationID:
		return o.ReservationID, true
	case karpv1.LabelCapacityReservationType:
		return o.ReservationType, true
	case karpv1.LabelCapacityReservationInterruptible:
		return strconv.FormatBool(o.Interruptible), true
	}
	return "", false
}
