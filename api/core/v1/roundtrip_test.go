package v1

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/test/yamltest"
)

func TestRoundTripNodePool(t *testing.T) {
	np, out := yamltest.RoundTrip[NodePool](t, "testdata/nodepool.yaml")
	for _, line := range []string{"expireAfter: 720h\n", "terminationGracePeriod: 48h\n", "consolidateAfter: 1m30s\n", "duration: 8h\n", "duration: 1h30m\n"} {
		if !strings.Contains(string(out), line) {
			t.Errorf("encoded NodePool lacks %q (duration text must be kept)", line)
		}
	}
	if err := np.Validate(); err != nil {
		t.Errorf("the example NodePool must be valid: %v", err)
	}
}

func TestRoundTripNodeClaim(t *testing.T) {
	nc, out := yamltest.RoundTrip[NodeClaim](t, "testdata/nodeclaim.yaml")
	if len(nc.Status.Conditions) != 5 || nc.Status.Conditions[3].Type != ConditionReady {
		t.Fatalf("conditions not decoded: %+v", nc.Status.Conditions)
	}
	for _, line := range []string{"expireAfter: 720h\n", "terminationGracePeriod: 1h\n"} {
		if !strings.Contains(string(out), line) {
			t.Errorf("encoded NodeClaim lacks %q", line)
		}
	}
	if err := nc.Validate(); err != nil {
		t.Errorf("the example NodeClaim must be valid: %v", err)
	}
}

func TestDurationNeverRoundTrips(t *testing.T) {
	in := []byte("disruption:\n  consolidateAfter: Never\ntemplate:\n  spec:\n    expireAfter: Never\n    nodeClassRef: null\n    requirements: null\n")
	var s NodePoolSpec
	if err := yaml.Unmarshal(in, &s); err != nil {
		t.Fatal(err)
	}
	if !s.Disruption.ConsolidateAfter.IsNever() || !s.Template.Spec.ExpireAfter.IsNever() {
		t.Fatalf("Never not decoded: %+v", s)
	}
	out, _ := yaml.Marshal(&s)
	if !strings.Contains(string(out), "consolidateAfter: Never") || !strings.Contains(string(out), "expireAfter: Never") {
		t.Errorf("Never not kept:\n%s", out)
	}
}
