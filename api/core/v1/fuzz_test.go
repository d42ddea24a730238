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

// fuzzDecodeValidate: whatever decodes as a T validates to nil or a
// well-formed validation error, before and after defaulting, and encodes.
func fuzzDecodeValidate[T any, P interface {
	*T
	Validate() error
	SetDefaults()
}](f *testing.F, kind string) {
	f.Fuzz(func(t *testing.T, b []byte) {
		o := P(new(T))
		if err := yaml.Unmarshal(b, o); err != nil {
			return
		}
		checkValidationError(t, o.Validate())
		o.SetDefaults()
		checkValidationError(t, o.Validate())
		if _, err := yaml.Marshal(o); err != nil {
			t.Fatalf("encoding a decoded %s: %v", kind, err)
		}
	})
}

func FuzzDecodeValidateNodePool(f *testing.F) {
	addSeeds(f, "testdata/nodepool.yaml")
	fuzzDecodeValidate[NodePool](f, "NodePool")
}

func FuzzDecodeValidateNodeClaim(f *testing.F) {
	addSeeds(f, "testdata/nodeclaim.yaml")
	fuzzDecodeValidate[NodeClaim](f, "NodeClaim")
}
