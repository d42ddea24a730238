package v1

import (
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/test/yamltest"
)

func TestRoundTripEC2NodeClass(t *testing.T) {
	nc, out := yamltest.RoundTrip[EC2NodeClass](t, "testdata/ec2nodeclass.yaml")
	for _, line := range []string{"memory.available: 1m\n", "nodefs.available: 1m30s\n", "nodefs.inodesFree: 2m\n", "volumeSize: 100Gi\n"} {
		if !strings.Contains(string(out), line) {
			t.Errorf("encoded EC2NodeClass lacks %q", line)
		}
	}
	if t.Failed() {
		t.Logf("encoded:\n%s", out)
	}
	if err := nc.Validate(); err != nil {
		t.Errorf("the example EC2NodeClass must be valid: %v", err)
	}
}
