// Package layout checks that imports run down the layers: only the
// binary's wiring reaches the AWS provider, no product package imports the
// test kit, and the coordinator does not import the agent.
package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/joiner-dev/joiner"

// deps maps every package of the module to the module packages it depends
// on (directly or not), test files excluded.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, d := range f[1:] {
			if strings.HasPrefix(d, module+"/") {
				m[f[0]] = append(m[f[0]], d)
			}
		}
		if _, ok := m[f[0]]; !ok {
			m[f[0]] = nil
		}
	}
	return m
}

func TestImportsRunDownTheLayers(t *testing.T) {
	for pkg, ds := range deps(t) {
		rel := strings.TrimPrefix(pkg, module+"/")
		for _, d := range ds {
			drel := strings.TrimPrefix(d, module+"/")
			switch {
			case strings.HasPrefix(rel, "coordinator/") && drel == "cloud/aws":
				t.Errorf("%s depends on cloud/aws: only cmd/joiner's wiring may pick the provider", rel)
			case !strings.HasPrefix(rel, "test/") && strings.HasPrefix(drel, "test/"):
				t.Errorf("product package %s depends on the test kit %s", rel, drel)
			case strings.HasPrefix(rel, "coordinator/") && strings.HasPrefix(drel, "agent"):
				t.Errorf("%s depends on the agent (%s): shared code belongs in drain/ or api/agent/v1", rel, drel)
			case strings.HasPrefix(rel, "api/") && !strings.HasPrefix(drel, "api/"):
				t.Errorf("%s (the API) depends on %s", rel, drel)
			}
		}
	}
	if len(deps(t)) < 20 {
		t.Fatal("go list found too few packages: the check did not run")
	}
}
