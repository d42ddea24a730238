package v1

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/test/yamltest"
)

func loadNodePool(t *testing.T) *NodePool {
	t.Helper()
	return yamltest.Load[NodePool](t, "testdata/nodepool.yaml")
}

func loadNodeClaim(t *testing.T) *NodeClaim {
	t.Helper()
	return yamltest.Load[NodeClaim](t, "testdata/nodeclaim.yaml")
}

func p[T any](v T) *T { return &v }

func dur(s string) *Duration { return p(yamltest.Must(ParseDuration(s))) }

// assertInvalid checks that err is a validation error with a line for field
// that mentions value.
func assertInvalid(t *testing.T, err error, field, value string) {
	t.Helper()
	if err == nil {
		t.Fatalf("valid, want an error at %s", field)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	for _, fe := range FieldErrors(err) {
		if fe.Field == field && strings.Contains(fe.Detail, value) {
			line := field + ": " + fe.Detail
			if !strings.Contains(err.Error(), line) {
				t.Errorf("Error() lacks the line %q", line)
			}
			return
		}
	}
	t.Errorf("no error at %s mentioning %q; got:\n%v", field, value, err)
}

func TestNodePoolInvalid(t *testing.T) {
	req := func(np *NodePool, i int) *NodeSelectorRequirementWithMinValues {
		return &np.Spec.Template.Spec.Requirements[i]
	}
	cases := []struct {
		name   string
		mutate func(*NodePool)
		field  string
		value  string
	}{
		{"label node class", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels[LabelNodeClass] = "x" },
			"spec.template.metadata.labels[karpenter.k8s.aws/ec2nodeclass]", `label domain "karpenter.k8s.aws" is restricted to its well-known labels, got "karpenter.k8s.aws/ec2nodeclass"`},
		{"label hostname", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels[LabelHostname] = "x" },
			"spec.template.metadata.labels[kubernetes.io/hostname]", `"kubernetes.io/hostname" is restricted`},
		{"label subdomain karpenter.sh", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["sub.karpenter.sh/x"] = "x" },
			"spec.template.metadata.labels[sub.karpenter.sh/x]", `"karpenter.sh" is restricted, got "sub.karpenter.sh/x"`},
		{"label domain karpenter.sh", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["karpenter.sh/custom"] = "x" },
			"spec.template.metadata.labels[karpenter.sh/custom]", `"karpenter.sh" is restricted, got "karpenter.sh/custom"`},
		{"label nodepool", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels[LabelNodePool] = "x" },
			"spec.template.metadata.labels[karpenter.sh/nodepool]", `label "karpenter.sh/nodepool" is restricted`},
		{"label domain karpenter.k8s.aws", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["karpenter.k8s.aws/custom"] = "x" },
			"spec.template.metadata.labels[karpenter.k8s.aws/custom]", `"karpenter.k8s.aws" is restricted, got "karpenter.k8s.aws/custom"`},
		{"label key syntax", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["bad key!"] = "x" },
			"spec.template.metadata.labels[bad key!]", `invalid label key "bad key!"`},
		{"label value syntax", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = "-bad-" },
			"spec.template.metadata.labels[team]", `invalid label value "-bad-"`},
		{"label value too long", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = strings.Repeat("a", 64) },
			"spec.template.metadata.labels[team]", `invalid label value "aaaa`},
		{"requirement key restricted", func(np *NodePool) { req(np, 0).Key = "kubernetes.io/hostname" },
			"spec.template.spec.requirements[0].key", `"kubernetes.io/hostname" is restricted`},
		{"requirement key syntax", func(np *NodePool) { req(np, 0).Key = "a/b/c" },
			"spec.template.spec.requirements[0].key", `invalid label key "a/b/c"`},
		{"requirement key empty", func(np *NodePool) { req(np, 0).Key = "" },
			"spec.template.spec.requirements[0].key", `required, got ""`},
		{"requirement operator", func(np *NodePool) { req(np, 0).Operator = "Like" },
			"spec.template.spec.requirements[0].operator", `got "Like"`},
		{"In without values", func(np *NodePool) { req(np, 9).Values = nil },
			"spec.template.spec.requirements[9].values", `operator 'In' must have a value defined, got []`},
		{"Gt two values", func(np *NodePool) { req(np, 3).Values = []string{"1", "2"} },
			"spec.template.spec.requirements[3].values", `Gt must have a single non-negative integer value, got ["1","2"]`},
		{"Lt not an integer", func(np *NodePool) { req(np, 6).Values = []string{"x1"} },
			"spec.template.spec.requirements[6].values", `Lt must have a single non-negative integer value, got ["x1"]`},
		{"Gte negative", func(np *NodePool) { req(np, 5).Values = []string{"-1"} },
			"spec.template.spec.requirements[5].values", `Gte must have a single non-negative integer value, got ["-1"]`},
		{"Lte no values", func(np *NodePool) { req(np, 4).Values = nil },
			"spec.template.spec.requirements[4].values", `Lte must have a single non-negative integer value, got []`},
		{"capacity type unknown", func(np *NodePool) { req(np, 9).Values = []string{"xspot"} },
			"spec.template.spec.requirements[9].values", `no valid values for karpenter.sh/capacity-type, expected one of on-demand, spot, reserved, got ["xspot"]`},
		{"capacity type too few known", func(np *NodePool) { req(np, 9).Values = []string{"spot", "x"}; req(np, 9).MinValues = p(2) },
			"spec.template.spec.requirements[9].values", `not enough valid values for karpenter.sh/capacity-type: minValues is 2`},
		{"tenancy unknown", func(np *NodePool) {
			*req(np, 9) = NodeSelectorRequirementWithMinValues{Key: LabelInstanceTenancy, Operator: OpIn, Values: []string{"shared"}}
		},
			"spec.template.spec.requirements[9].values", `no valid values for karpenter.k8s.aws/instance-tenancy`},
		{"requirement node class", func(np *NodePool) { req(np, 0).Key = LabelNodeClass },
			"spec.template.spec.requirements[0].key", `label domain "karpenter.k8s.aws" is restricted to its well-known labels, got "karpenter.k8s.aws/ec2nodeclass"`},
		{"requirement nodepool", func(np *NodePool) { req(np, 0).Key = LabelNodePool },
			"spec.template.spec.requirements[0].key", `label "karpenter.sh/nodepool" is restricted, got "karpenter.sh/nodepool"`},
		{"minValues zero", func(np *NodePool) { req(np, 0).MinValues = p(0) },
			"spec.template.spec.requirements[0].minValues", "between 1 and 50, got 0"},
		{"minValues too big", func(np *NodePool) { req(np, 2).MinValues = p(51) },
			"spec.template.spec.requirements[2].minValues", "between 1 and 50, got 51"},
		{"minValues above In values", func(np *NodePool) { req(np, 0).MinValues = p(4) },
			"spec.template.spec.requirements[0].minValues", `must have at least that many values specified in the 'values' field: 4, got 3: ["c","m","r"]`},
		{"requirement value syntax", func(np *NodePool) { req(np, 0).Values[1] = "m m" },
			"spec.template.spec.requirements[0].values[1]", `invalid label value "m m"`},
		{"too many requirements", func(np *NodePool) {
			for len(np.Spec.Template.Spec.Requirements) <= MaxRequirements {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, NodeSelectorRequirementWithMinValues{Key: "a", Operator: OpExists})
			}
		}, "spec.template.spec.requirements", "at most 100 requirements, got 101"},
		{"taint effect", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Effect = "NoWay" },
			"spec.template.spec.taints[0].effect", `got "NoWay"`},
		{"taint key syntax", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Key = "bad key" },
			"spec.template.spec.taints[0].key", `invalid taint key "bad key"`},
		{"taint key empty", func(np *NodePool) { np.Spec.Template.Spec.StartupTaints[0].Key = "" },
			"spec.template.spec.startupTaints[0].key", `required, got ""`},
		{"taint value syntax", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Value = "a b" },
			"spec.template.spec.taints[0].value", `invalid taint value "a b"`},
		{"taint key too long", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Key = "example.com/" + strings.Repeat("a", 64) },
			"spec.template.spec.taints[0].key", `name part must be no more than 63`},
		{"taint duplicate", func(np *NodePool) {
			np.Spec.Template.Spec.StartupTaints[0] = corev1.Taint{Key: "example.com/special-taint", Effect: corev1.TaintEffectNoSchedule}
		}, "spec.template.spec.startupTaints[0]", `duplicate taint key and effect "example.com/special-taint:NoSchedule"`},
		{"nodeClassRef missing", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef = nil },
			"spec.template.spec.nodeClassRef", "required"},
		{"nodeClassRef name empty", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "" },
			"spec.template.spec.nodeClassRef.name", `name may not be empty, got ""`},
		{"nodeClassRef kind empty", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Kind = "" },
			"spec.template.spec.nodeClassRef.kind", `kind may not be empty`},
		{"nodeClassRef group empty", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Group = "" },
			"spec.template.spec.nodeClassRef.group", `group may not be empty`},
		{"nodeClassRef group with version", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Group = "karpenter.k8s.aws/v1" },
			"spec.template.spec.nodeClassRef.group", `got "karpenter.k8s.aws/v1"`},
		{"weight zero", func(np *NodePool) { np.Spec.Weight = p(int32(0)) }, "spec.weight", "between 1 and 100, got 0"},
		{"weight too big", func(np *NodePool) { np.Spec.Weight = p(int32(101)) }, "spec.weight", "got 101"},
		{"budget nodes pattern", func(np *NodePool) { np.Spec.Disruption.Budgets[0].Nodes = "101%" },
			"spec.disruption.budgets[0].nodes", `got "101%"`},
		{"budget nodes words", func(np *NodePool) { np.Spec.Disruption.Budgets[2].Nodes = "five" },
			"spec.disruption.budgets[2].nodes", `got "five"`},
		{"budget nodes empty", func(np *NodePool) { np.Spec.Disruption.Budgets[2].Nodes = "" },
			"spec.disruption.budgets[2].nodes", `got ""`},
		{"budget schedule four fields", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = p("0 9 * *") },
			"spec.disruption.budgets[1].schedule", `got "0 9 * *"`},
		{"budget schedule macro", func(np *NodePool) { np.Spec.Disruption.Budgets[3].Schedule = p("@every 1h") },
			"spec.disruption.budgets[3].schedule", `got "@every 1h"`},
		{"budget reason twice", func(np *NodePool) { np.Spec.Disruption.Budgets[2].Reasons[1] = DisruptionReasonDrifted },
			"spec.disruption.budgets[2].reasons[1]", `duplicate reason "Drifted"`},
		{"budget schedule without duration", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Duration = nil },
			"spec.disruption.budgets[1].duration", `required when schedule is set (schedule "0 9 * * mon-fri")`},
		{"budget duration without schedule", func(np *NodePool) { np.Spec.Disruption.Budgets[0].Duration = dur("1h") },
			"spec.disruption.budgets[0].schedule", `required when duration is set (duration "1h")`},
		{"budget duration seconds", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Duration = dur("30s") },
			"spec.disruption.budgets[1].duration", `got "30s"`},
		{"budget reason", func(np *NodePool) { np.Spec.Disruption.Budgets[2].Reasons[1] = "Expired" },
			"spec.disruption.budgets[2].reasons[1]", `got "Expired"`},
		{"too many budgets", func(np *NodePool) {
			for len(np.Spec.Disruption.Budgets) <= MaxBudgets {
				np.Spec.Disruption.Budgets = append(np.Spec.Disruption.Budgets, Budget{Nodes: "1"})
			}
		}, "spec.disruption.budgets", "at most 50 budgets, got 51"},
		{"consolidation policy", func(np *NodePool) { np.Spec.Disruption.ConsolidationPolicy = "WhenUnderutilized" },
			"spec.disruption.consolidationPolicy", `got "WhenUnderutilized"`},
		{"consolidateAfter fractional", func(np *NodePool) { np.Spec.Disruption.ConsolidateAfter = *dur("1.5h") },
			"spec.disruption.consolidateAfter", `got "1.5h"`},
		{"expireAfter milliseconds", func(np *NodePool) { np.Spec.Template.Spec.ExpireAfter = *dur("100ms") },
			"spec.template.spec.expireAfter", `got "100ms"`},
		{"terminationGracePeriod Never", func(np *NodePool) { np.Spec.Template.Spec.TerminationGracePeriod = dur("Never") },
			"spec.template.spec.terminationGracePeriod", `("Never" is not allowed), got "Never"`},
		{"static pool with weight", func(np *NodePool) { np.Spec.Replicas = p(int64(3)) },
			"spec.weight", "static NodePool"},
		{"static pool cpu limit", func(np *NodePool) { np.Spec.Replicas = p(int64(3)); np.Spec.Weight = nil },
			"spec.limits[cpu]", `got "cpu"`},
		{"negative replicas", func(np *NodePool) { np.Spec.Replicas = p(int64(-1)); np.Spec.Weight = nil; np.Spec.Limits = nil },
			"spec.replicas", "got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := loadNodePool(t)
			tc.mutate(np)
			assertInvalid(t, np.Validate(), tc.field, tc.value)
		})
	}
	t.Logf("%d invalid NodePool cases", len(cases))
}

func TestNodeClaimInvalid(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*NodeClaim)
		field  string
		value  string
	}{
		{"requirement Gt values", func(nc *NodeClaim) {
			nc.Spec.Requirements[0] = NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-cpu", Operator: OpGt, Values: []string{"a", "b"}}
		}, "spec.requirements[0].values", `Gt must have a single non-negative integer value, got ["a","b"]`},
		{"requirement restricted key", func(nc *NodeClaim) { nc.Spec.Requirements[1].Key = "karpenter.sh/other" },
			"spec.requirements[1].key", `"karpenter.sh" is restricted, got "karpenter.sh/other"`},
		{"nodeClassRef missing", func(nc *NodeClaim) { nc.Spec.NodeClassRef = nil }, "spec.nodeClassRef", "required"},
		{"taint effect", func(nc *NodeClaim) { nc.Spec.StartupTaints[0].Effect = "" }, "spec.startupTaints[0].effect", `got ""`},
		{"expireAfter syntax", func(nc *NodeClaim) { nc.Spec.ExpireAfter = *dur("1h0.5m") }, "spec.expireAfter", `got "1h0.5m"`},
		{"terminationGracePeriod Never", func(nc *NodeClaim) { nc.Spec.TerminationGracePeriod = dur("Never") },
			"spec.terminationGracePeriod", `got "Never"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := loadNodeClaim(t)
			tc.mutate(nc)
			assertInvalid(t, nc.Validate(), tc.field, tc.value)
		})
	}
}

func TestValidationReportsEveryError(t *testing.T) {
	np := loadNodePool(t)
	np.Spec.Weight = p(int32(0))
	np.Spec.Template.Spec.Requirements[3].Values = []string{"a", "b"}
	np.Spec.Disruption.Budgets[0].Nodes = "x"
	err := np.Validate()
	want := []string{
		`spec.template.spec.requirements[3].values: requirements operator Gt must have a single non-negative integer value, got ["a","b"]`,
		`spec.disruption.budgets[0].nodes: must be a count such as "5" or a percentage from 0% to 100%, got "x"`,
		`spec.weight: must be between 1 and 100, got 0`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestRestrictedLabels(t *testing.T) {
	// Since Karpenter v1.9 kubernetes.io and k8s.io are not restricted.
	for _, k := range []string{"node.kubernetes.io/instance-type", "node.kubernetes.io/custom", "kubernetes.io/custom", "k8s.io/x",
		"sub.k8s.io/x", "kops.k8s.io/instancegroup", "topology.kubernetes.io/zone", "kubernetes.io/arch", "karpenter.sh/capacity-type",
		"karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/placement-group-id",
		"topology.k8s.aws/zone-id", "example.com/team", "team", "beta.kubernetes.io/arch"} {
		if why := RestrictedLabel(k); why != "" {
			t.Errorf("%s: %s", k, why)
		}
	}
	for _, k := range []string{LabelNodePool, LabelHostname, "karpenter.sh/x", "sub.karpenter.sh/x", "xkarpenter.sh/x",
		"karpenter.k8s.aws/x", LabelNodeClass} {
		if RestrictedLabel(k) == "" {
			t.Errorf("%s: not restricted", k)
		}
	}
	// A NodeClaim's requirements may name the pool and the node class.
	for _, k := range []string{LabelNodePool, LabelNodeClass} {
		if why := CRDLabelRestriction(k, false); why != "" {
			t.Errorf("NodeClaim requirement %s: %s", k, why)
		}
	}
}

func TestSchedulePattern(t *testing.T) {
	for _, s := range []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "0 9 * * mon-fri",
		"*/15 0-6 1,15 jan-jun *", "0 0 9 * * mon", "TZ=UTC 0 9 * * *", "0 25 * * *"} {
		if !scheduleRE.MatchString(s) {
			t.Errorf("%q: rejected", s)
		}
	}
	for _, s := range []string{"*", "* * * * ", "0 9 * *", "@every 1h", "@wrongly"} {
		if scheduleRE.MatchString(s) {
			t.Errorf("%q: accepted", s)
		}
	}
}

func TestMinimalNodePoolValidAfterDefaults(t *testing.T) {
	var np NodePool
	in := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n"
	if err := yaml.UnmarshalStrict([]byte(in), &np); err != nil {
		t.Fatal(err)
	}
	np.SetDefaults()
	if err := np.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestNodePoolValidateUpdate(t *testing.T) {
	old := loadNodePool(t)
	old.SetDefaults()
	same := old.DeepCopy()
	if err := same.ValidateUpdate(old); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	toStatic := old.DeepCopy()
	toStatic.Spec.Replicas, toStatic.Spec.Weight, toStatic.Spec.Limits = p(int64(3)), nil, nil
	assertInvalid(t, toStatic.ValidateUpdate(old), "spec.replicas", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes, got 3 after unset")
	static := toStatic.DeepCopy()
	more := static.DeepCopy()
	more.Spec.Replicas = p(int64(5))
	if err := more.ValidateUpdate(static); err != nil {
		t.Errorf("replicas 3 -> 5: %v", err)
	}
	group := old.DeepCopy()
	group.Spec.Template.Spec.NodeClassRef.Group = "example.com"
	assertInvalid(t, group.ValidateUpdate(old), "spec.template.spec.nodeClassRef.group", `nodeClassRef.group is immutable, got "example.com" after "karpenter.k8s.aws"`)
	kind := old.DeepCopy()
	kind.Spec.Template.Spec.NodeClassRef.Kind = "Other"
	assertInvalid(t, kind.ValidateUpdate(old), "spec.template.spec.nodeClassRef.kind", `got "Other"`)
	name := old.DeepCopy()
	name.Spec.Template.Spec.NodeClassRef.Name = "other"
	if err := name.ValidateUpdate(old); err != nil {
		t.Errorf("nodeClassRef.name may change: %v", err)
	}
}

func TestNodeClaimValidateUpdate(t *testing.T) {
	old := loadNodeClaim(t)
	if err := old.DeepCopy().ValidateUpdate(old); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	changed := old.DeepCopy()
	changed.Spec.Taints = nil
	assertInvalid(t, changed.ValidateUpdate(old), "spec", "spec is immutable")
}

// Karpenter's CRD admits these; so does Validate.
func TestNodePoolValidLikeKarpenter(t *testing.T) {
	cases := map[string]func(*NodePool){
		"Exists with values":       func(np *NodePool) { np.Spec.Template.Spec.Requirements[2].Values = []string{"m5.large"} },
		"kubernetes.io label":      func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["kubernetes.io/team"] = "a" },
		"k8s.io requirement":       func(np *NodePool) { np.Spec.Template.Spec.Requirements[8].Key = "k8s.io/x" },
		"Gt with a sign":           func(np *NodePool) { np.Spec.Template.Spec.Requirements[3].Values = []string{"+2"} },
		"cron that does not parse": func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = p("0 0 * * tue-mon") },
		"same taint key, other effect": func(np *NodePool) {
			np.Spec.Template.Spec.StartupTaints[0] = corev1.Taint{Key: "example.com/special-taint", Effect: corev1.TaintEffectNoExecute}
		},
		"capacity type known and unknown": func(np *NodePool) { np.Spec.Template.Spec.Requirements[9].Values = []string{"spot", "x"} },
	}
	for name, mutate := range cases {
		np := loadNodePool(t)
		mutate(np)
		if err := np.Validate(); err != nil && name != "Gt with a sign" {
			t.Errorf("%s: %v", name, err)
		}
	}
	// "+2" passes the CRD (CEL int()), but Karpenter's runtime validation
	// wants every value to be a label value.
	np := loadNodePool(t)
	np.Spec.Template.Spec.Requirements[3].Values = []string{"+2"}
	assertInvalid(t, np.Validate(), "spec.template.spec.requirements[3].values[0]", `invalid label value "+2"`)
	nc := loadNodeClaim(t)
	nc.Spec.Requirements[0] = NodeSelectorRequirementWithMinValues{Key: "k", Operator: OpGt, Values: []string{"+2"}}
	if err := nc.Validate(); err != nil {
		t.Errorf("NodeClaim Gt +2: %v", err)
	}
}
