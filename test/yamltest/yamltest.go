// Package yamltest loads test objects from YAML files and compares YAML
// documents as data. Test code only. It imports no package of the module,
// so the API packages' own tests may use it.
package yamltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Load decodes the YAML file at path strictly (an unknown field fails t).
func Load[T any](t testing.TB, path string) *T {
	t.Helper()
	b := read(t, path)
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return &v
}

// Documents decodes every document of the YAML (or JSON) stream at path.
func Documents[T any](t testing.TB, path string) []*T {
	t.Helper()
	b := read(t, path)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*T
	for {
		v := new(T)
		err := dec.Decode(v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode document %d of %s: %v", len(out)+1, path, err)
		}
		out = append(out, v)
	}
}

// RoundTrip decodes the YAML file at path strictly, encodes the object
// again and fails t where the two documents differ as data (see SameYAML).
// It returns the object and its encoding.
func RoundTrip[T any](t testing.TB, path string) (*T, []byte) {
	t.Helper()
	in := read(t, path)
	v := Load[T](t, path)
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	SameYAML(t, in, out)
	return v, out
}

// SameYAML compares two YAML documents as data and reports each difference;
// quantities written differently ("1000" and "1k") count as equal.
func SameYAML(t testing.TB, want, got []byte) {
	t.Helper()
	var a, b any
	if err := yaml.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	diffs := DiffData("", a, b, nil)
	for _, d := range diffs {
		t.Error(d)
	}
	if len(diffs) > 0 {
		t.Logf("encoded:\n%s", got)
	}
}

// DiffData appends to out a line for each place where the decoded documents
// a and b differ, naming its path.
func DiffData(path string, a, b any, out []string) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return append(out, path+": want a map, got "+quote(b))
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				out = append(out, path+"."+k+": missing after the round trip")
				continue
			}
			out = DiffData(path+"."+k, v, w, out)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				out = append(out, path+"."+k+": added by the round trip: "+quote(y[k]))
			}
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return append(out, path+": want "+quote(a)+", got "+quote(b))
		}
		for i := range x {
			out = DiffData(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
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
		out = append(out, path+": want "+quote(a)+", got "+quote(b))
	}
	return out
}

// quote renders decoded YAML data: strings quoted, the rest as JSON.
func quote(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// Must returns v, and panics on err (for fixtures built from literals).
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
