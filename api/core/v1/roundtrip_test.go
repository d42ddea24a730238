package v1

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// sameYAML compares two YAML documents as data; quantities written
// differently ("1000" and "1k") count as equal.
func sameYAML(t *testing.T, want, got []byte) {
	t.Helper()
	var a, b any
	if err := yaml.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	diffs := diffData("", a, b, nil)
	for _, d := range diffs {
		t.Error(d)
	}
	if len(diffs) > 0 {
		t.Logf("encoded:\n%s", got)
	}
}

func diffData(path string, a, b any, out []string) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return append(out, path+": want a map, got "+Quote(b))
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				out = append(out, path+"."+k+": missing after the round trip")
				continue
			}
			out = diffData(path+"."+k, v, w, out)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				out = append(out, path+"."+k+": added by the round trip: "+Quote(y[k]))
			}
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return append(out, path+": want "+Quote(a)+", got "+Quote(b))
		}
		for i := range x {
			out = diffData(Index(path, i), x[i], y[i], out)
		}
		return out
	case string:
		if y, ok := b.(string); ok && x != y {
			qa, ea := resource.ParseQuantity(x)
			qb, eb := resource.ParseQuantity(y)
			if ea == nil && eb == nil && qa.Cmp(qb) == 0 {
				return out
			}
		}
	}
	if !reflect.DeepEqual(a, b) {
		out = append(out, path+": want "+Quote(a)+", got "+Quote(b))
	}
	return out
}

func TestRoundTripNodePool(t *testing.T) {
	in, err := os.ReadFile("testdata/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var np NodePool
	if err := yaml.UnmarshalStrict(in, &np); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := yaml.Marshal(&np)
	if err != nil {
		t.Fatal(err)
	}
	sameYAML(t, in, out)
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
	in, err := os.ReadFile("testdata/nodeclaim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var nc NodeClaim
	if err := yaml.UnmarshalStrict(in, &nc); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(nc.Status.Conditions) != 5 || nc.Status.Conditions[3].Type != ConditionReady {
		t.Fatalf("conditions not decoded: %+v", nc.Status.Conditions)
	}
	out, err := yaml.Marshal(&nc)
	if err != nil {
		t.Fatal(err)
	}
	sameYAML(t, in, out)
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
