package v1

import (
	"errors"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("spec: {template: {spec: {requirements: [{key: a, operator: Gt, values: [x]}], expireAfter: Never}}, disruption: {budgets: [{schedule: '@daily'}]}}"))
	f.Add([]byte("spec: {nodeClassRef: null, requirements: [{operator: In, minValues: 0}], terminationGracePeriod: Never}"))
}

// checkValidationError asserts the contract callers rely on.
func checkValidationError(t *testing.T, err error) {
	if err == nil {
		return
	}
	if !errors.Is(err, ErrInvalid) || len(FieldErrors(err)) == 0 || err.Error() == "" {
		t.Fatalf("validation returned a malformed error: %#v", err)
	}
}

func FuzzDecodeValidateNodePool(f *testing.F) {
	addSeeds(f, "testdata/nodepool.yaml")
	f.Fuzz(func(t *testing.T, b []byte) {
		var np NodePool
		if err := yaml.Unmarshal(b, &np); err != nil {
			return
		}
		checkValidationError(t, np.Validate())
		np.SetDefaults()
		checkValidationError(t, np.Validate())
		if _, err := yaml.Marshal(&np); err != nil {
			t.Fatalf("encoding a decoded NodePool: %v", err)
		}
	})
}

func FuzzDecodeValidateNodeClaim(f *testing.F) {
	addSeeds(f, "testdata/nodeclaim.yaml")
	f.Fuzz(func(t *testing.T, b []byte) {
		var nc NodeClaim
		if err := yaml.Unmarshal(b, &nc); err != nil {
			return
		}
		checkValidationError(t, nc.Validate())
		nc.SetDefaults()
		checkValidationError(t, nc.Validate())
		if _, err := yaml.Marshal(&nc); err != nil {
			t.Fatalf("encoding a decoded NodeClaim: %v", err)
		}
	})
}
