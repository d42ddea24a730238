package v1

import (
	"bytes"
	"os"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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
	b, err := os.ReadFile("testdata/hash/nodepools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	seen := 0
	for {
		var np NodePool
		if err := dec.Decode(&np); err != nil {
			break
		}
		w, ok := want[np.Name]
		if !ok {
			t.Fatalf("no expected hash for %s", np.Name)
		}
		seen++
		if got := np.Hash(); got != w {
			t.Errorf("%s: hash = %s, want Karpenter's %s", np.Name, got, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("decoded %d nodepools, want %d", seen, len(want))
	}
}
