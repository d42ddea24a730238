package v1

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestNodePoolDefaults(t *testing.T) {
	var np NodePool
	np.SetDefaults()
	d := np.Spec.Disruption
	if got := np.Spec.Template.Spec.ExpireAfter.String(); got != "720h" {
		t.Errorf("expireAfter = %q, want 720h", got)
	}
	if got := d.ConsolidateAfter.String(); got != "0s" {
		t.Errorf("consolidateAfter = %q, want 0s", got)
	}
	if d.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy = %q", d.ConsolidationPolicy)
	}
	if len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" || d.Budgets[0].Schedule != nil {
		t.Errorf("budgets = %+v, want [{nodes: 10%%}]", d.Budgets)
	}
	out, _ := yaml.Marshal(np.Spec)
	for _, want := range []string{"expireAfter: 720h", "consolidateAfter: 0s", "- nodes: 10%"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("defaulted spec lacks %q:\n%s", want, out)
		}
	}
}

func TestNodePoolDefaultsKeepSetFields(t *testing.T) {
	np := NodePool{}
	np.Spec.Template.Spec.ExpireAfter = NeverDuration()
	np.Spec.Disruption.ConsolidateAfter = *dur("5m")
	np.Spec.Disruption.ConsolidationPolicy = ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.Budgets = []Budget{{Nodes: "0"}, {Schedule: p("@daily"), Duration: dur("1h")}}
	np.SetDefaults()
	if !np.Spec.Template.Spec.ExpireAfter.IsNever() || np.Spec.Disruption.ConsolidateAfter.String() != "5m" ||
		np.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmpty {
		t.Errorf("set fields changed: %+v", np.Spec)
	}
	if b := np.Spec.Disruption.Budgets; len(b) != 2 || b[0].Nodes != "0" || b[1].Nodes != "10%" {
		t.Errorf("budgets = %+v, want nodes 0 kept and the missing nodes defaulted to 10%%", b)
	}
	empty := NodePool{}
	empty.Spec.Disruption.Budgets = []Budget{}
	empty.SetDefaults()
	if len(empty.Spec.Disruption.Budgets) != 0 {
		t.Errorf("an explicit empty budget list is kept (the CRD default applies only when absent), got %+v", empty.Spec.Disruption.Budgets)
	}
}

func TestNodeClaimDefaults(t *testing.T) {
	var nc NodeClaim
	nc.SetDefaults()
	if nc.Spec.ExpireAfter.String() != "720h" {
		t.Errorf("expireAfter = %q", nc.Spec.ExpireAfter.String())
	}
}
