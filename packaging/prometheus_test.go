package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKarpenterAlertRules runs `promtool test rules` on the alert rules
// (packaging/prometheus/karpenter-alerts.yaml) against the series their
// test file records. promtool is the pinned one (tools/promtool, built by
// scripts/build-tools.sh into $JOINER_TOOLS_BIN or bin/); without it the
// test fails, except under -short, where it is skipped.
func TestKarpenterAlertRules(t *testing.T) {
	bin := os.Getenv("JOINER_TOOLS_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin")
	}
	promtool := filepath.Join(bin, "promtool")
	if _, err := os.Stat(promtool); err != nil {
		if testing.Short() {
			t.Skipf("-short and promtool not built (%v): run `bash scripts/build-tools.sh promtool`", err)
		}
		t.Fatalf("promtool not built (%v): run `make tools` or `bash scripts/build-tools.sh promtool`", err)
	}
	cmd := exec.Command(promtool, "test", "rules", "karpenter-alerts_test.yaml")
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
