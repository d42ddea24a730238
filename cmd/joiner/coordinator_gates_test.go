package main

import (
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/internal/featuregates"
)

// TestCoordinatorRefusesUnsupportedGates: `joiner coordinator
// --feature-gates NodeRepair=true` stops at start-up naming the flag and
// the gate (as the Helm chart refuses settings.featureGates.nodeRepair),
// instead of running without node repair; the gates Joiner acts on, the
// unsupported ones set false, and unknown names (ignored, as Karpenter)
// pass.
func TestCoordinatorRefusesUnsupportedGates(t *testing.T) {
	for _, c := range []struct {
		gates   string
		wantErr string
	}{
		{gates: featuregates.Default},
		{gates: "NodeRepair=false,StaticCapacity=true,SpotToSpotConsolidation=true,SomethingNew=true"},
		{gates: "NodeRepair=true", wantErr: `--feature-gates "NodeRepair=true": NodeRepair=true is not supported`},
		{gates: "NodeOverlay=true", wantErr: "NodeOverlay=true is not supported"},
		{gates: "CapacityBuffer=true,NodeRepair=true", wantErr: "NodeRepair=true is not supported: Joiner does not implement NodeRepair; CapacityBuffer=true is not supported"},
		{gates: "NodeRepair", wantErr: `--feature-gates "NodeRepair": malformed pair`},
	} {
		t.Run(c.gates, func(t *testing.T) {
			f := &coordinatorFlags{advertise: "coordinator-0.joiner:7000", clusterName: "sim", bootstrapExpect: 3, httpAddr: "127.0.0.1:8080"}
			f.leader.featureGates = c.gates
			err := f.validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("validate() = %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}
