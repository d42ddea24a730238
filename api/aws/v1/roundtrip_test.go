package v1

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func diffData(path string, a, b any, out []string) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return append(out, path+": want a map, got "+karpv1.Quote(b))
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
				out = append(out, path+"."+k+": added by the round trip: "+karpv1.Quote(y[k]))
			}
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return append(out, path+": want "+karpv1.Quote(a)+", got "+karpv1.Quote(b))
		}
		for i := range x {
			out = diffData(karpv1.Index(path, i), x[i], y[i], out)
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
		out = append(out, path+": want "+karpv1.Quote(a)+", got "+karpv1.Quote(b))
	}
	return out
}

func TestRoundTripEC2NodeClass(t *testing.T) {
	in, err := os.ReadFile("testdata/ec2nodeclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var nc EC2NodeClass
	if err := yaml.UnmarshalStrict(in, &nc); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := yaml.Marshal(&nc)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := yaml.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	for _, d := range diffData("", a, b, nil) {
		t.Error(d)
	}
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
