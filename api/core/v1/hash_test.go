package v1

import (
	"testing"

	"github.com/joiner-dev/joiner/test/yamltest"
)

// TestNodePoolHashOfStoredObjects hashes NodePools as the API server
// stores them; the numbers are what Karpenter v1.14.1's NodePool.Hash
// returns for the same objects. Requirements, limits, weight and
// disruption settings are not part of the hash; map and slice order are
// not either.
func TestNodePoolHashOfStoredObjects(t *testing.T) {
	want := map[string]string{
		"minimal":                    "6821555240594823858",
		"minimal-other-requirements": "6821555240594823858",
		"full":                       "5176563856611143903",
		"full-reordered":             "5176563856611143903",
		"short-expiry-zero-grace":    "11503768687266624350",
		"expiry-spelled-differently": "5015502914593876895",
	}
	pools := yamltest.Documents[NodePool](t, "testdata/hash/nodepools.yaml")
	for _, np := range pools {
		w, ok := want[np.Name]
		if !ok {
			t.Fatalf("no expected hash for %s", np.Name)
		}
		if got := np.Hash(); got != w {
			t.Errorf("%s: hash = %s, want Karpenter's %s", np.Name, got, w)
		}
	}
	if len(pools) != len(want) {
		t.Fatalf("decoded %d nodepools, want %d", len(pools), len(want))
	}
}
