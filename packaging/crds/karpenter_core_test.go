package crds

// Karpenter v1.14.1 core: pkg/apis/v1/nodepool_validation_cel_test.go and
// nodeclaim_validation_cel_test.go, case by case.

import (
	"fmt"
	"strings"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// coreWellKnownLabels are the well-known labels of Karpenter core alone
// (the core suites loop over them; the AWS provider adds its own).
var coreWellKnownLabels = []string{
	karpv1.LabelNodePool, karpv1.LabelZone, karpv1.LabelRegion, karpv1.LabelInstanceType,
	karpv1.LabelArch, karpv1.LabelOS, karpv1.LabelCapacityType, karpv1.LabelWindowsBuild,
}

// longName is 250 lowercase alphanumerics, as the "too long" cases use.
var longName = strings.Repeat("a1", 125)

// corePool is the NodePool of the core suite's BeforeEach, as Karpenter's
// client writes it: zero durations are "Never".
func corePool(edits ...edit) obj {
	return build(obj{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": obj{},
		"spec": obj{
			"disruption": obj{"consolidateAfter": "Never"},
			"template": obj{"spec": obj{
				"expireAfter":  "Never",
				"nodeClassRef": obj{"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
				"requirements": list(req(karpv1.LabelCapacityType, "Exists")),
			}},
		},
	}, edits)
}

func poolReqs(rs ...any) edit      { return set("spec.template.spec.requirements", append([]any{}, rs...)) }
func poolTaints(ts ...any) edit    { return set("spec.template.spec.taints", ts) }
func poolLabels(kv ...string) edit { return set("spec.template.metadata.labels", tags(kv...)) }
func poolBudgets(bs ...any) edit   { return set("spec.disruption.budgets", bs) }

// each builds one object per value.
func each[T any](values []T, f func(T) obj) []obj {
	out := make([]obj, len(values))
	for i, v := range values {
		out[i] = f(v)
	}
	return out
}

func badGtLt(base func(...edit) obj, path string, ops ...string) []obj {
	var out []obj
	for _, op := range ops {
		for _, values := range [][]string{nil, {"1", "2"}, {"a"}, {"-1"}} {
			out = append(out, base(set(path, list(req(karpv1.LabelZone, op, values...)))))
		}
	}
	return out
}

// requirementCases are the requirement cases the NodePool and NodeClaim
// suites share, for the requirements at path of the object base builds.
// The suites name the subdomain case differently (subdomains) and allow
// different well-known labels (wellKnown).
func requirementCases(r string, base func(...edit) obj, path, subdomains string, wellKnown []string) []kcase {
	reqs := func(rs ...any) obj { return base(set(path, append([]any{}, rs...))) }
	return []kcase{
		admits(r+"should allow supported ops", reqs(
			req(karpv1.LabelZone, "In", "test"), req(karpv1.LabelZone, "Gt", "1"), req(karpv1.LabelZone, "Lt", "1"),
			req(karpv1.LabelZone, "NotIn"), req(karpv1.LabelZone, "Exists"))),
		rejects(r+"should fail for unsupported ops", reqs(req(karpv1.LabelZone, "unknown", "test"))),
		rejects(r+"should fail for restricted domains", each(karpv1.RestrictedLabelDomains,
			func(d string) obj { return reqs(req(d+"/test", "In", "test")) })...),
		rejects(r+"should fail for restricted labels", each(karpv1.RestrictedLabels,
			func(l string) obj { return reqs(req(l+"/test", "In", "test")) })...),
		admits(r+"should allow kubernetes domains", each([]string{"kubernetes.io", "k8s.io"},
			func(d string) obj { return reqs(req(d+"/test", "In", "test")) })...),
		admits(r+subdomains, each([]string{"kubernetes.io", "k8s.io"},
			func(d string) obj { return reqs(req("subdomain."+d+"/test", "In", "test")) })...),
		admits(r+"should allow well known label exceptions", each(wellKnown,
			func(l string) obj { return reqs(req(l, "In", "test")) })...),
		admits(r+"should allow non-empty set after removing overlapped value", reqs(
			req(karpv1.LabelZone, "In", "test", "foo"), req(karpv1.LabelZone, "NotIn", "test", "bar"))),
		admits(r+"should allow empty requirements", reqs()),
		rejects(r+"should fail with invalid GT or LT values", badGtLt(base, path, "Gt", "Lt")...),
		rejects(r+"should fail with invalid GTE or LTE values", badGtLt(base, path, "Gte", "Lte")...),
		rejects(r+"should error when minValues is negative", reqs(reqMin(-1, karpv1.LabelInstanceType, "In", "insance-type-1"))),
		rejects(r+"should error when minValues is zero", reqs(reqMin(0, karpv1.LabelInstanceType, "In", "insance-type-1"))),
		rejects(r+"should error when minValues is more than 50", reqs(reqMin(51, karpv1.LabelInstanceType, "Exists"))),
		admits(r+"should allow more than 50 values if minValues is not specified.", reqs(req(karpv1.LabelInstanceType, "In", manyValues(90)...))),
		rejects(r+"should error when minValues is greater than the number of unique values specified within In operator",
			reqs(reqMin(2, karpv1.LabelInstanceType, "In", "insance-type-1"))),
	}
}

func manyValues(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("instance%d", i)
	}
	return out
}

// The values of Karpenter's duration cases: durations (and Never) and
// what is not one; a terminationGracePeriod cannot be Never.
var (
	durations       = []struct{ name, v string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}, {"never", "Never"}}
	badDurations    = []struct{ name, v string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"partial match", "FooNever"}}
	gracePeriods    = []struct{ name, v string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}}
	badGracePeriods = []struct{ name, v string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"never", "Never"}, {"partial match", "FooNever"}}
)

// durationCases are Karpenter's cases of the duration field name at path of
// the object build makes: its valid values admitted, its invalid ones
// rejected.
func durationCases(group, name, path string, build func(...edit) obj, valid, invalid []struct{ name, v string }) []kcase {
	var out []kcase
	for _, e := range valid {
		out = append(out, admits(group+"should succeed on a valid "+name+"/"+e.name, build(set(path, e.v))))
	}
	for _, e := range invalid {
		out = append(out, rejects(group+"should fail on an invalid "+name+"/"+e.name, build(set(path, e.v))))
	}
	return out
}

func coreNodePoolCases() []kcase {
	const d = "Disruption/"
	var cases []kcase
	add := func(c ...kcase) { cases = append(cases, c...) }

	add(admits(d+"should succeed on a disabled expireAfter", corePool(set("spec.template.spec.expireAfter", "Never"))))
	add(durationCases(d, "expireAfter", "spec.template.spec.expireAfter", corePool, durations, badDurations)...)
	add(admits(d+"should succeed on a disabled consolidateAfter", corePool(set("spec.disruption.consolidateAfter", "Never"))))
	add(durationCases(d, "consolidateAfter", "spec.disruption.consolidateAfter", corePool, durations, badDurations)...)
	policy := func(after, p string) obj {
		return corePool(set("spec.disruption.consolidateAfter", after), set("spec.disruption.consolidationPolicy", p))
	}
	add(
		admits(d+"should succeed when setting consolidateAfter with consolidationPolicy=WhenEmpty", policy("30s", "WhenEmpty")),
		admits(d+"should succeed when setting consolidateAfter with consolidationPolicy=WhenUnderutilized", policy("30s", "WhenEmptyOrUnderutilized")),
		admits(d+"should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenUnderutilized", policy("Never", "WhenEmptyOrUnderutilized")),
		admits(d+"should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenEmpty", policy("Never", "WhenEmpty")),
	)
	for _, p := range []string{"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"} {
		add(admits(d+"should succeed on a valid consolidationPolicy/"+p, corePool(set("spec.disruption.consolidationPolicy", p))))
	}
	for _, e := range []struct{ name, v string }{
		{"quoted 1", "1"}, {"quoted 2", "2"}, {"quoted 3", "3"}, {"level 0", "0"}, {"level 4", "4"}, {"level 10", "10"},
		{"lowercase balanced", "balanced"}, {"lowercase whenempty", "whenempty"}, {"empty string", ""},
		{"WhenUnderutilized", "WhenUnderutilized"}, {"arbitrary string", "foo"},
	} {
		c := rejects(d+"should fail on an invalid consolidationPolicy/"+e.name, corePool(set("spec.disruption.consolidationPolicy", e.v)))
		if e.v == "" {
			c = c.goAdmits("Go sees an empty consolidationPolicy as unset and defaults it")
		}
		add(c)
	}
	for _, p := range []string{"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"} {
		add(admits(d+"should pass RuntimeValidate for valid consolidationPolicy/"+p, corePool(set("spec.disruption.consolidationPolicy", p))))
	}
	add(
		rejects(d+"should fail when creating a budget with an invalid cron", corePool(poolBudgets(budget("10", "*", "20m0s")))),
		rejects(d+"should fail when creating a schedule with less than 5 entries", corePool(poolBudgets(budget("10", "* * * * ", "20m0s")))),
		rejects(d+"should fail when creating a budget with a negative duration", corePool(poolBudgets(budget("10", "* * * * *", "-20m0s")))),
		rejects(d+"should fail when creating a budget with a seconds duration", corePool(poolBudgets(budget("10", "* * * * *", "30s")))),
		rejects(d+"should fail when creating a budget with a negative value int", corePool(poolBudgets(budget("-10", "", "")))),
		rejects(d+"should fail when creating a budget with a negative value percent", corePool(poolBudgets(budget("-10%", "", "")))),
		rejects(d+"should fail when creating a budget with a value percent with more than 3 digits", corePool(poolBudgets(budget("1000%", "", "")))),
		rejects(d+"should fail when creating a budget with a cron but no duration", corePool(poolBudgets(budget("10", "* * * * *", "")))),
		rejects(d+"should fail when creating a budget with a duration but no cron", corePool(poolBudgets(budget("10", "", "20m0s")))),
		admits(d+"should succeed when creating a budget with both duration and cron", corePool(poolBudgets(budget("10", "* * * * *", "20m0s")))),
		admits(d+"should succeed when creating a budget with hours and minutes in duration", corePool(poolBudgets(budget("10", "* * * * *", "2h20m0s")))),
		admits(d+"should succeed when creating a budget with neither duration nor cron", corePool(poolBudgets(budget("10", "", "")))),
		admits(d+"should succeed when creating a budget with special cased crons", corePool(poolBudgets(budget("10", "@annually", "20m0s")))),
		rejects(d+"should fail when creating two budgets where one has an invalid crontab",
			corePool(poolBudgets(budget("10", "@annually", "20m0s"), budget("10", "*", "20m0s")))),
		rejects(d+"should fail when creating multiple budgets where one doesn't have both schedule and duration",
			corePool(poolBudgets(budget("10", "", "20m0s"), budget("10", "* * * * *", "20m0s"), budget("10", "", "")))),
	)
	for _, e := range []struct{ name, v string }{
		{"should allow disruption reason Drifted", "Drifted"}, {"should allow disruption reason Underutilized", "Underutilized"},
		{"should allow disruption reason Empty", "Empty"},
	} {
		add(admits(d+"should succeed when creating a budget with valid reasons/"+e.name, corePool(poolBudgets(budget("10", "* * * * *", "20m0s", e.v)))))
	}
	for _, e := range []struct{ name, v string }{
		{"should not allow invalid reason", "invalid"}, {"should not allow expired disruption reason", "expired"},
		{"should not allow empty reason", ""},
	} {
		add(rejects(d+"should fail when creating a budget with invalid reasons/"+e.name, corePool(poolBudgets(budget("10", "* * * * *", "20m0s", e.v)))))
	}
	add(admits(d+"should allow setting multiple reasons", corePool(poolBudgets(budget("10", "* * * * *", "20m0s", "Drifted", "Empty")))))

	const tt = "Taints/"
	add(admits(tt+"should succeed for valid taints", corePool(poolTaints(
		taint("a", "b", "NoSchedule"), taint("c", "d", "NoExecute"), taint("e", "f", "PreferNoSchedule"),
		taint("Test", "f", "PreferNoSchedule"), taint("test.com/Test", "f", "PreferNoSchedule"),
		taint("test.com.com/test", "f", "PreferNoSchedule"), taint("key-only", "", "NoExecute")))))
	add(rejects(tt+"should fail for invalid taint keys", each([]string{"test.com.com}", "Test.com/test", "test/test/test", "test/", "/test"},
		func(k string) obj { return corePool(poolTaints(taint(k, "", "NoSchedule"))) })...))
	add(admits(tt+"should fail at runtime for taint keys that are too long",
		corePool(poolTaints(taint("test.com.test."+longName+"/test", "", "NoSchedule"))),
		corePool(poolTaints(taint("test.com.test/test-"+longName, "", "NoSchedule"))),
	).runtimeRejects("Karpenter's runtime validation bounds qualified names"))
	add(
		rejects(tt+"should fail for missing taint key", corePool(poolTaints(obj{"key": "", "effect": "NoSchedule"}))),
		rejects(tt+"should fail for invalid taint value", corePool(poolTaints(taint("invalid-value", "???", "NoSchedule")))),
		rejects(tt+"should fail for invalid taint effect", corePool(poolTaints(taint("invalid-effect", "", "???")))),
		admits(tt+"should not fail for same key with different effects", corePool(poolTaints(taint("a", "", "NoSchedule"), taint("a", "", "NoExecute")))),
	)

	const r = "Requirements/"
	add(admits(r+"should succeed for valid requirement keys", corePool(poolReqs(
		req("Test", "Exists"), req("test.com/Test", "Exists"), req("test.com.com/test", "Exists"), req("key-only", "Exists")))))
	add(rejects(r+"should fail for invalid requirement keys", each([]string{"test.com.com}", "Test.com/test", "test/test/test", "test/", "/test"},
		func(k string) obj { return corePool(poolReqs(req(k, "Exists"))) })...))
	add(admits(r+"should fail at runtime for requirement keys that are too long",
		corePool(poolReqs(req("test.com.test."+longName+"/test", "Exists"))),
		corePool(poolReqs(req("test.com.test/test-"+longName, "Exists"))),
	).runtimeRejects("Karpenter's runtime validation bounds qualified names"))
	add(rejects(r+"should fail for the karpenter.sh/nodepool label", corePool(poolReqs(req(karpv1.LabelNodePool, "In", "Wackyname")))))
	add(requirementCases(r, corePool, "spec.template.spec.requirements", "should allow kubernetes subdomains exceptions",
		without(toSet(coreWellKnownLabels), karpv1.LabelNodePool, karpv1.LabelCapacityType))...)

	const l = "Labels/"
	add(admits(l+"should allow unrecognized labels", corePool(poolLabels("foo", "Wackyname"))))
	add(rejects(l+"should fail for the karpenter.sh/nodepool label", corePool(poolLabels(karpv1.LabelNodePool, "Wackyname"))))
	add(admits(l+"should fail for invalid label keys", corePool(poolLabels("spaces are not allowed", "Wackyname"))).
		runtimeRejects("Karpenter's runtime validation wants label keys to be qualified names"))
	add(admits(l+"should fail at runtime for label keys that are too long",
		corePool(poolLabels("test.com.test."+longName+"/test", "Wackyname")),
		corePool(poolLabels("test.com.test/test-"+longName, "Wackyname")),
	).runtimeRejects("Karpenter's runtime validation bounds qualified names"))
	add(rejects(l+"should fail for invalid label values", corePool(poolLabels("Wackyname", "/ is not allowed"))))
	add(rejects(l+"should fail for restricted label domains", each(karpv1.RestrictedLabelDomains,
		func(d string) obj { return corePool(poolLabels(d+"/unknown", "Wackyname")) })...))
	add(admits(l+"should allow labels kOps require", corePool(poolLabels("kops.k8s.io/instancegroup", "karpenter-nodes", "kops.k8s.io/gpu", "1"))))
	for _, e := range []struct{ name, format string }{
		{"should allow labels in kubernetes domains", "%s"},
		{"should allow labels prefixed with the kubernetes domain", "%s/key"},
		{"should allow subdomain labels in restricted domains exceptions list", "subdomain.%s"},
		{"should allow subdomain labels prefixed with the kubernetes domain", "subdomain.%s/key"},
	} {
		add(admits(l+e.name, each([]string{"kubernetes.io", "k8s.io"},
			func(d string) obj { return corePool(poolLabels(fmt.Sprintf(e.format, d), "test-value")) })...))
	}

	const g = "TerminationGracePeriod/"
	add(durationCases(g, "terminationGracePeriod", "spec.template.spec.terminationGracePeriod", corePool, gracePeriods, badGracePeriods)...)

	// Karpenter's two mutation cases create the object a second time, which
	// fails as AlreadyExists; ported as the updates they mean.
	const n = "NodeClassRef/"
	add(
		rejects(n+"should fail to mutate group", corePool()).updatedBy(set("spec.template.spec.nodeClassRef.group", "karpenter.test.mutated.sh")),
		rejects(n+"should fail to mutate kind", corePool()).updatedBy(set("spec.template.spec.nodeClassRef.kind", "TestNodeClass2")),
		rejects(n+"should fail if group is unset", corePool(set("spec.template.spec.nodeClassRef.group", ""))),
		rejects(n+"should fail if kind is unset", corePool(set("spec.template.spec.nodeClassRef.kind", ""))),
		rejects(n+"should fail if name is unset", corePool(set("spec.template.spec.nodeClassRef.name", ""))),
	)

	const rp = "Replicas/"
	replicas := func(v int, edits ...edit) obj { return corePool(append(edits, set("spec.replicas", v))...) }
	add(
		admits(rp+"Valid Replicas Values/should succeed when replicas is set to a positive value", replicas(5)),
		admits(rp+"Valid Replicas Values/should succeed when replicas is set to zero", replicas(0)),
		admits(rp+"Valid Replicas Values/should succeed when replicas is set to a large value", replicas(1000)),
		rejects(rp+"Invalid Replicas Values/should fail when replicas is set to a negative value", replicas(-100)),
	)
	for _, e := range []struct {
		name string
		e    edit
	}{
		{"limits.cpu", set("spec.limits", obj{"cpu": "1k"})},
		{"limits.memory", set("spec.limits", obj{"memory": "2000Gi"})},
		{"limits.pods", set("spec.limits", obj{"pods": "10"})},
		{"limits.ephemeral-storage", set("spec.limits", obj{"ephemeral-storage": "10Gi"})},
		{"weight", set("spec.weight", 25)},
	} {
		add(rejects(rp+"should fail for incompatible fields/"+e.name, replicas(10, e.e)))
	}
	for _, e := range []struct {
		name string
		e    edit
	}{
		{"limits.nodes", set("spec.limits", obj{"nodes": "100"})},
		{"disruption with multiple budgets", set("spec.disruption", obj{
			"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
			"budgets": list(budget("20%", "0 9 * * mon-fri", "8h0m0s", "Drifted", "Empty"),
				budget("30%", "0 22 * * sat,sun", "4h0m0s", "Underutilized"), budget("5", "", "")),
		})},
		{"template labels", poolLabels("environment", "production")},
		{"template annotations", set("spec.template.metadata.annotations", tags("example.com/last-updated", "2024-01-01"))},
		{"taints", poolTaints(taint("gpu-workload", "enabled", "NoSchedule"))},
		{"startup taints", set("spec.template.spec.startupTaints", list(taint("example.com/initializing", "true", "NoSchedule")))},
		{"requirements", poolReqs(
			reqMin(3, karpv1.LabelInstanceType, "In", "m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "r5.large", "r5.xlarge"),
			req(karpv1.LabelZone, "In", "us-west-2a", "us-west-2b", "us-west-2c"),
			req(karpv1.LabelCapacityType, "In", "on-demand", "spot"),
			req(karpv1.LabelArch, "In", "amd64"),
			req("karpenter.k8s.aws/instance-memory", "Gt", "8192"),
			req("karpenter.k8s.aws/instance-cpu", "Lt", "64"))},
		{"expireAfter", set("spec.template.spec.expireAfter", "72h")},
		{"terminationGracePeriod", set("spec.template.spec.terminationGracePeriod", "5m0s")},
	} {
		add(admits(rp+"should succeed for compatible fields/"+e.name, replicas(10, e.e)))
	}
	const u = rp + "Update Scenarios/"
	add(
		admits(u+"should succeed when increasing replicas in a NodePool", replicas(3)).updatedBy(set("spec.replicas", 5)),
		rejects(u+"should fail when changing the NodePool from static to dynamic", replicas(3)).updatedBy(del("spec.replicas")),
		rejects(u+"should fail when changing the NodePool from dynamic to static", corePool()).updatedBy(set("spec.replicas", 3)),
		admits(u+"should succeed when changing the static NodePool nodes limit", replicas(3, set("spec.limits", obj{"nodes": "10"}))).
			updatedBy(set("spec.limits", obj{"nodes": "100"})),
	)
	return cases
}

func toSet(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}

// coreClaim is the NodeClaim of the core suite's BeforeEach, as Karpenter's
// client writes it.
func coreClaim(edits ...edit) obj {
	return build(obj{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": obj{},
		"spec": obj{
			"expireAfter":  "Never",
			"resources":    obj{},
			"nodeClassRef": obj{"group": "karpenter.test.sh", "kind": "TestNodeClaim", "name": "default"},
			"requirements": list(req(karpv1.LabelCapacityType, "Exists")),
		},
	}, edits)
}

func claimReqs(rs ...any) edit { return set("spec.requirements", append([]any{}, rs...)) }

func coreNodeClaimCases() []kcase {
	var cases []kcase
	add := func(c ...kcase) { cases = append(cases, c...) }
	const tt = "Taints/"
	add(
		admits(tt+"should succeed for valid taints", coreClaim(set("spec.taints", list(
			taint("a", "b", "NoSchedule"), taint("c", "d", "NoExecute"), taint("e", "f", "PreferNoSchedule"), taint("key-only", "", "NoExecute"))))),
		rejects(tt+"should fail for invalid taint keys", coreClaim(set("spec.taints", list(taint("???", "", ""))))),
		rejects(tt+"should fail for missing taint key", coreClaim(set("spec.taints", list(obj{"key": "", "effect": "NoSchedule"})))),
		rejects(tt+"should fail for invalid taint value", coreClaim(set("spec.taints", list(taint("invalid-value", "???", "NoSchedule"))))),
		rejects(tt+"should fail for invalid taint effect", coreClaim(set("spec.taints", list(taint("invalid-effect", "", "???"))))),
		admits(tt+"should not fail for same key with different effects", coreClaim(set("spec.taints", list(taint("a", "", "NoSchedule"), taint("a", "", "NoExecute"))))),
	)
	const n = "NodeClassRef/"
	add(
		admits(n+"should succeed for valid group", coreClaim(set("spec.nodeClassRef", obj{"kind": "TestNodeClass", "name": "nodeclass-test", "group": "karpenter.test.sh"}))),
		rejects(n+"should fail for invalid group", coreClaim(set("spec.nodeClassRef", obj{"kind": "TestNodeClass", "name": "nodeclass-test", "group": "karpenter.test.sh/v1"}))),
	)
	const r = "Requirements/"
	add(requirementCases(r, coreClaim, "spec.requirements", "should allow kubernetes subdomains",
		without(toSet(coreWellKnownLabels), karpv1.LabelNodePool))...)
	var many []any
	for i := range 101 {
		many = append(many, req(fmt.Sprintf("key-%d", i), "In", fmt.Sprintf("value-%d", i)))
	}
	add(rejects(r+"should error when requirements is greater than 100", coreClaim(claimReqs(many...))))
	const g = "TerminationGracePeriod/"
	add(durationCases(g, "terminationGracePeriod", "spec.terminationGracePeriod", coreClaim, gracePeriods, badGracePeriods)...)
	const x = "ExpireAfter/"
	add(durationCases(x, "expireAfter", "spec.expireAfter", coreClaim, durations, badDurations)...)
	return cases
}

func TestKarpenterNodePoolValidationCEL(t *testing.T) {
	runSuite(t, "core nodepool_validation_cel_test.go", 128, coreNodePoolCases())
}

func TestKarpenterNodeClaimValidationCEL(t *testing.T) {
	runSuite(t, "core nodeclaim_validation_cel_test.go", 37, coreNodeClaimCases())
}
