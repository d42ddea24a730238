package nodeclass_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// Ports of Karpenter's "NodeClass Subnet Status Controller" and "NodeClass
// Security Group Status Controller" suites (subnet_test.go and
// securitygroup_test.go): status.subnets (most free addresses first, then
// by ID, each with its zone and zone ID) and status.securityGroups (by
// ID), SubnetsReady and SecurityGroupsReady, as the selector terms and
// the region change.

// selectorRegion is the default sim with four subnets (two in us-east-1a)
// and three security groups, named and tagged as Karpenter's fake EC2
// names its own.
func selectorRegion(ws *worldSetup) {
	ws.cfg.Subnets = nil
	for i, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1a"} {
		n := string(rune('1' + i))
		ws.cfg.Subnets = append(ws.cfg.Subnets, sim.Subnet{ID: "subnet-0test" + n, Zone: z, AvailableIPs: 100,
			Tags: map[string]string{sim.DiscoveryTag: "test", "Name": "test-subnet-" + n}})
	}
	ws.cfg.SecurityGroups = nil
	for i := range 3 {
		n := string(rune('1' + i))
		ws.cfg.SecurityGroups = append(ws.cfg.SecurityGroups, sim.SecGroup{ID: "sg-0test" + n, Name: "securityGroup-test" + n,
			Tags: map[string]string{sim.DiscoveryTag: "test", "Name": "test-security-group-" + n}})
	}
}

// selectorStep is one apply-and-reconcile of a selector table: the terms
// applied (nil: unchanged), a change to the region first, and the status
// wanted after the pass.
type selectorStep[T any] struct {
	terms  []T
	region func(*sim.Config)
	want   []string // status entries as listed by the table
	ready  bool     // the part's condition True (else False, with Karpenter's reason and message)
}

func TestSubnetStatusAsKarpenter(t *testing.T) {
	all := []string{"subnet-0test1/us-east-1a/use1-az1", "subnet-0test2/us-east-1b/use1-az2", "subnet-0test3/us-east-1c/use1-az3",
		"subnet-0test4/us-east-1a/use1-az1"}
	byName := []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}, {Tags: map[string]string{"Name": "test-subnet-2"}}}
	byID := []awsv1.SubnetSelectorTerm{{ID: "subnet-0test1"}}
	invalid := []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
	for _, tc := range []struct {
		karpenter string // Karpenter's case
		steps     []selectorStep[awsv1.SubnetSelectorTerm]
	}{
		{"Should update EC2NodeClass status for Subnets", []selectorStep[awsv1.SubnetSelectorTerm]{{want: all, ready: true}}},
		{"Should have the correct ordering for the Subnets", []selectorStep[awsv1.SubnetSelectorTerm]{{
			region: func(c *sim.Config) {
				c.Subnets = c.Subnets[:3]
				c.Subnets[0].AvailableIPs, c.Subnets[1].AvailableIPs, c.Subnets[2].AvailableIPs = 20, 100, 50
			},
			want:  []string{"subnet-0test2/us-east-1b/use1-az2", "subnet-0test3/us-east-1c/use1-az3", "subnet-0test1/us-east-1a/use1-az1"},
			ready: true}}},
		{"Should resolve a valid selectors for Subnet by tags", []selectorStep[awsv1.SubnetSelectorTerm]{{terms: byName,
			want: []string{"subnet-0test1/us-east-1a/use1-az1", "subnet-0test2/us-east-1b/use1-az2"}, ready: true}}},
		{"Should resolve a valid selectors for Subnet by ids", []selectorStep[awsv1.SubnetSelectorTerm]{{terms: byID,
			want: []string{"subnet-0test1/us-east-1a/use1-az1"}, ready: true}}},
		{"Should update Subnet status when the Subnet selector gets updated by tags", []selectorStep[awsv1.SubnetSelectorTerm]{
			{want: all, ready: true},
			{terms: byName, want: []string{"subnet-0test1/us-east-1a/use1-az1", "subnet-0test2/us-east-1b/use1-az2"}, ready: true}}},
		{"Should update Subnet status when the Subnet selector gets updated by ids", []selectorStep[awsv1.SubnetSelectorTerm]{
			{want: all, ready: true},
			{terms: byID, want: []string{"subnet-0test1/us-east-1a/use1-az1"}, ready: true}}},
		{"Should not resolve a invalid selectors for Subnet", []selectorStep[awsv1.SubnetSelectorTerm]{{terms: invalid}}},
		{"Should not resolve a invalid selectors for an updated subnet selector", []selectorStep[awsv1.SubnetSelectorTerm]{
			{want: all, ready: true},
			{terms: invalid}}},
		// Joiner: the region changes under an unchanged class (a subnet
		// tagged later): the next refresh sees it, as Karpenter's requeue
		// after a minute does.
		{"(Joiner) a subnet tagged later is found by the next refresh", []selectorStep[awsv1.SubnetSelectorTerm]{
			{terms: byName, want: []string{"subnet-0test1/us-east-1a/use1-az1", "subnet-0test2/us-east-1b/use1-az2"}, ready: true},
			{region: func(c *sim.Config) { c.Subnets[2].Tags["Name"] = "test-subnet-2" },
				want: []string{"subnet-0test1/us-east-1a/use1-az1", "subnet-0test2/us-east-1b/use1-az2", "subnet-0test3/us-east-1c/use1-az3"}, ready: true}}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			runSelectorSteps(t, tc.steps, awsv1.ConditionSubnetsReady, "SubnetsNotFound", "SubnetSelector did not match any Subnets",
				func(nc *awsv1.EC2NodeClass, terms []awsv1.SubnetSelectorTerm) { nc.Spec.SubnetSelectorTerms = terms },
				func(nc *awsv1.EC2NodeClass) []string {
					var got []string
					for _, s := range nc.Status.Subnets {
						got = append(got, s.ID+"/"+s.Zone+"/"+s.ZoneID)
					}
					return got
				})
		})
	}
}

func TestSecurityGroupStatusAsKarpenter(t *testing.T) {
	all := []string{"sg-0test1/securityGroup-test1", "sg-0test2/securityGroup-test2", "sg-0test3/securityGroup-test3"}
	byName := []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"Name": "test-security-group-1"}},
		{Tags: map[string]string{"Name": "test-security-group-2"}}}
	byID := []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0test1"}}
	invalid := []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
	for _, tc := range []struct {
		karpenter string
		steps     []selectorStep[awsv1.SecurityGroupSelectorTerm]
	}{
		{"Should update EC2NodeClass status for Security Groups", []selectorStep[awsv1.SecurityGroupSelectorTerm]{{want: all, ready: true}}},
		{"Should resolve a valid selectors for Security Groups by tags", []selectorStep[awsv1.SecurityGroupSelectorTerm]{{terms: byName,
			want: []string{"sg-0test1/securityGroup-test1", "sg-0test2/securityGroup-test2"}, ready: true}}},
		{"Should resolve a valid selectors for Security Groups by ids", []selectorStep[awsv1.SecurityGroupSelectorTerm]{{terms: byID,
			want: []string{"sg-0test1/securityGroup-test1"}, ready: true}}},
		{"Should update Security Groups status when the Security Groups selector gets updated by tags", []selectorStep[awsv1.SecurityGroupSelectorTerm]{
			{want: all, ready: true},
			{terms: byName, want: []string{"sg-0test1/securityGroup-test1", "sg-0test2/securityGroup-test2"}, ready: true}}},
		{"Should update Security Groups status when the Security Groups selector gets updated by ids", []selectorStep[awsv1.SecurityGroupSelectorTerm]{
			{want: all, ready: true},
			{terms: byID, want: []string{"sg-0test1/securityGroup-test1"}, ready: true}}},
		{"Should not resolve a invalid selectors for Security Groups", []selectorStep[awsv1.SecurityGroupSelectorTerm]{{terms: invalid}}},
		{"Should not resolve a invalid selectors for an updated Security Groups selector", []selectorStep[awsv1.SecurityGroupSelectorTerm]{
			{want: all, ready: true},
			{terms: invalid}}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			runSelectorSteps(t, tc.steps, awsv1.ConditionSecurityGroupsReady, "SecurityGroupsNotFound",
				"SecurityGroupSelector did not match any SecurityGroups",
				func(nc *awsv1.EC2NodeClass, terms []awsv1.SecurityGroupSelectorTerm) {
					nc.Spec.SecurityGroupSelectorTerms = terms
				},
				func(nc *awsv1.EC2NodeClass) []string {
					var got []string
					for _, g := range nc.Status.SecurityGroups {
						got = append(got, g.ID+"/"+g.Name)
					}
					return got
				})
		})
	}
}

// runSelectorSteps applies each step to class "default" of a selector
// region and checks its status and condition (and Ready) after a pass.
func runSelectorSteps[T any](t *testing.T, steps []selectorStep[T], typ, reason, message string,
	set func(*awsv1.EC2NodeClass, []T), list func(*awsv1.EC2NodeClass) []string) {
	t.Helper()
	w := newWorld(t, selectorRegion)
	nc := ec2NodeClass("default")
	for i, st := range steps {
		if st.terms != nil {
			set(nc, st.terms)
		}
		if st.region != nil {
			w.sim.Configure(st.region)
		}
		w.apply(nc)
		w.step(5 * time.Minute) // past the provider's resolution cache: the region may have changed
		got := w.class("default")
		c := w.condition("default", typ)
		if !slices.Equal(list(got), st.want) {
			t.Errorf("step %d: status\n  %s\nwant\n  %s", i, strings.Join(list(got), "\n  "), strings.Join(st.want, "\n  "))
		}
		switch {
		case st.ready && (c.Status != metav1.ConditionTrue || !w.isTrue("default", awsv1.ConditionReady)):
			t.Errorf("step %d: %s %+v, Ready %+v; want both True", i, typ, c, w.condition("default", awsv1.ConditionReady))
		case !st.ready && (c.Status != metav1.ConditionFalse || c.Reason != reason || c.Message != message ||
			w.condition("default", awsv1.ConditionReady).Status != metav1.ConditionFalse || w.published("default")):
			t.Errorf("step %d: %s %+v, Ready %+v; want False (%s: %s), the class not Ready nor published",
				i, typ, c, w.condition("default", awsv1.ConditionReady), reason, message)
		}
	}
}
