package nodeclass_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// Port of Karpenter's "NodeClass Placement Group Reconciler" suite
// (placementgroup_test.go): the placementGroupSelector's group, by name or
// id among the available ones (DescribePlacementGroups with
// state=available), PlacementGroupReady (True without a selector), and
// the group the published class launches into.

func placementRegion(ws *worldSetup) {
	ws.cfg.PlacementGroups = []sim.PlacementGroup{
		{ID: "pg-0cluster123", Name: "my-cluster-pg", Strategy: "cluster", State: "available"},
		{ID: "pg-0partition456", Name: "my-partition-pg", Strategy: "partition", PartitionCount: 7, State: "available"},
		{ID: "pg-0spread789", Name: "my-spread-pg", Strategy: "spread", SpreadLevel: "rack", State: "available"},
		{ID: "pg-0pending000", Name: "my-pending-pg", Strategy: "cluster", State: "pending"},
	}
}

func TestPlacementGroupStatusAsKarpenter(t *testing.T) {
	byName := func(n string) *awsv1.PlacementGroupSelector { return &awsv1.PlacementGroupSelector{Name: &n} }
	byID := func(id string) *awsv1.PlacementGroupSelector { return &awsv1.PlacementGroupSelector{ID: &id} }
	type step struct {
		sel    *awsv1.PlacementGroupSelector
		want   *cloud.PlacementGroup // the published class's group (nil: none)
		reason string                // PlacementGroupReady's reason when False ("": True)
	}
	clusterPG := &cloud.PlacementGroup{ID: "pg-0cluster123", Name: "my-cluster-pg", Strategy: "cluster"}
	spreadPG := &cloud.PlacementGroup{ID: "pg-0spread789", Name: "my-spread-pg", Strategy: "spread", SpreadLevel: "rack"}
	for _, tc := range []struct {
		karpenter string
		steps     []step
	}{
		{"should have PlacementGroupReady condition set to true when no placement group selector is specified", []step{{}}},
		{"should resolve a cluster placement group by name", []step{{sel: byName("my-cluster-pg"), want: clusterPG}}},
		{"should resolve a placement group by ID", []step{{sel: byID("pg-0cluster123"), want: clusterPG}}},
		{"should resolve a partition placement group with partition count", []step{{sel: byName("my-partition-pg"),
			want: &cloud.PlacementGroup{ID: "pg-0partition456", Name: "my-partition-pg", Strategy: "partition", PartitionCount: 7}}}},
		{"should resolve a spread placement group with spread level", []step{{sel: byName("my-spread-pg"), want: spreadPG}}},
		// EC2 answers InvalidPlacementGroup.Unknown for a name it does not
		// know (Karpenter's fake EC2 answers no group): not found either way.
		{"should set condition false when placement group is not found", []step{{sel: byName("nonexistent-pg"), reason: "PlacementGroupNotFound"}}},
		{"should set condition false when placement group is not in available state", []step{{sel: byName("my-pending-pg"), reason: "PlacementGroupNotFound"}}},
		{"should clear in-memory state and condition when placement group selector is removed", []step{
			{sel: byName("my-cluster-pg"), want: clusterPG}, {}}},
		{"should update in-memory state when placement group selector changes", []step{
			{sel: byName("my-cluster-pg"), want: clusterPG}, {sel: byName("my-spread-pg"), want: spreadPG}}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := newWorld(t, placementRegion)
			nc := ec2NodeClass("default")
			for i, st := range tc.steps {
				nc.Spec.PlacementGroupSelector = st.sel
				w.apply(nc)
				w.step(time.Second)
				c := w.condition("default", cloud.ConditionPlacementGroupReady)
				if st.reason == "" {
					pub := w.catalog.Classes()["default"]
					if c.Status != metav1.ConditionTrue || pub == nil {
						t.Fatalf("step %d: PlacementGroupReady %+v, published %v; want True and published", i, c, pub != nil)
					}
					got := pub.Resolved.PlacementGroup
					if (got == nil) != (st.want == nil) || (got != nil && *got != *st.want) {
						t.Errorf("step %d: placement group %+v, want %+v", i, got, st.want)
					}
					continue
				}
				if c.Status != metav1.ConditionFalse || c.Reason != st.reason || !strings.Contains(c.Message, *st.sel.Name) ||
					w.published("default") || w.condition("default", awsv1.ConditionReady).Status != metav1.ConditionFalse {
					t.Errorf("step %d: PlacementGroupReady %+v, Ready %+v, published %v; want False (%s) naming %s, not published",
						i, c, w.condition("default", awsv1.ConditionReady), w.published("default"), st.reason, *st.sel.Name)
				}
				if want := `Placement group "` + *st.sel.Name + `" not found`; c.Message != want {
					t.Errorf("step %d: message %q, want Karpenter's %q", i, c.Message, want)
				}
			}
		})
	}
}

// TestPlacementGroupDescribeFails: DescribePlacementGroups failing makes
// PlacementGroupReady False (PlacementGroupResolutionFailed, "Failed to
// resolve placement group"), as Karpenter's reconciler sets it, unless
// the class resolved before: then the last group is kept (Joiner keeps a
// part EC2 could not be asked for).
func TestPlacementGroupDescribeFails(t *testing.T) {
	w := newWorld(t, placementRegion)
	nc := ec2NodeClass("default")
	name := "my-cluster-pg"
	nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: &name}
	w.faults.fail("DescribePlacementGroups", "RequestLimitExceeded", 0)
	w.apply(nc)
	w.reconcile()
	c := w.condition("default", cloud.ConditionPlacementGroupReady)
	if c.Status != metav1.ConditionFalse || c.Reason != "PlacementGroupResolutionFailed" || c.Message != "Failed to resolve placement group" {
		t.Errorf("PlacementGroupReady %+v, want False PlacementGroupResolutionFailed", c)
	}
	w.faults.clear("DescribePlacementGroups")
	w.step(time.Minute) // Retry
	if !w.isTrue("default", cloud.ConditionPlacementGroupReady) || !w.published("default") {
		t.Fatalf("after the retry: %+v", w.condition("default", cloud.ConditionPlacementGroupReady))
	}
	w.faults.fail("DescribePlacementGroups", "RequestLimitExceeded", 0)
	w.step(5 * time.Minute) // Refresh, past the provider's cache
	if !w.isTrue("default", cloud.ConditionPlacementGroupReady) || !w.published("default") {
		t.Errorf("a throttled refresh took the group away: %+v", w.condition("default", cloud.ConditionPlacementGroupReady))
	}
}
