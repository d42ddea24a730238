package v1

import (
	"errors"
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func checkValidationError(t *testing.T, err error) {
	if err == nil {
		return
	}
	if !errors.Is(err, karpv1.ErrInvalid) || len(karpv1.FieldErrors(err)) == 0 || err.Error() == "" {
		t.Fatalf("validation returned a malformed error: %#v", err)
	}
}

func FuzzDecodeValidateEC2NodeClass(f *testing.F) {
	b, err := os.ReadFile("testdata/ec2nodeclass.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("spec: {amiSelectorTerms: [{alias: 'windows2019@'}, {alias: '@'}], blockDeviceMappings: [null, {ebs: {}}], kubelet: {evictionSoftGracePeriod: {a: Never}}}"))
	f.Add([]byte("spec: {amiSelectorTerms: [{alias: al2@latest}], amiFamily: AL2, metadataOptions: {}, role: r}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var nc EC2NodeClass
		if err := yaml.Unmarshal(b, &nc); err != nil {
			return
		}
		checkValidationError(t, nc.Validate())
		_ = nc.AMIFamily()
		nc.SetDefaults()
		checkValidationError(t, nc.Validate())
		if _, err := yaml.Marshal(&nc); err != nil {
			t.Fatalf("encoding a decoded EC2NodeClass: %v", err)
		}
	})
}
