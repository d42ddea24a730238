package v1

// Karpenter's defaults (the CRD defaults the API server applies on create).
const (
	DefaultExpireAfter         = "720h"
	DefaultConsolidateAfter    = "0s"
	DefaultConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
	DefaultBudgetNodes         = "10%"
)

func mustDuration(s string) Duration {
	d, err := ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// SetDefaults fills what Karpenter's CRD defaults: expireAfter 720h,
// consolidateAfter 0s, consolidationPolicy WhenEmptyOrUnderutilized, budgets
// [{nodes: "10%"}] (and nodes "10%" in a budget that omits it). Set fields
// are left alone.
func (in *NodePool) SetDefaults() {
	t := &in.Spec.Template.Spec
	if t.ExpireAfter.IsZero() {
		t.ExpireAfter = mustDuration(DefaultExpireAfter)
	}
	d := &in.Spec.Disruption
	if d.ConsolidateAfter.IsZero() {
		d.ConsolidateAfter = mustDuration(DefaultConsolidateAfter)
	}
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = DefaultConsolidationPolicy
	}
	if d.Budgets == nil {
		d.Budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}
	for i := range d.Budgets {
		if d.Budgets[i].Nodes == "" {
			d.Budgets[i].Nodes = DefaultBudgetNodes
		}
	}
}

// SetDefaults fills what Karpenter's CRD defaults: expireAfter 720h.
func (in *NodeClaim) SetDefaults() {
	if in.Spec.ExpireAfter.IsZero() {
		in.Spec.ExpireAfter = mustDuration(DefaultExpireAfter)
	}
}
