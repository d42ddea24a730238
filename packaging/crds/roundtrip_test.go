package crds

// Defaults (Karpenter v1.14.1 core: pkg/apis/v1/nodepool_default_test.go,
// and the other defaults of the CRDs) and the round trip of objects with
// every field of v1.14 through the API server and the Go types.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// get returns the value at a dotted path ("spec.disruption.budgets"), or nil.
func get(o obj, path string) any {
	var v any = o
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// sameJSON compares two values as JSON data.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

// goDefaulted is o decoded into its Go type, defaulted by SetDefaults and
// encoded again.
func goDefaulted(t *testing.T, o obj) obj {
	t.Helper()
	return throughGo(t, o, true)
}

// throughGo is o decoded into its Go type (defaulted by SetDefaults when
// defaults is set) and encoded again.
func throughGo(t *testing.T, o obj, defaults bool) obj {
	t.Helper()
	v, err := decode(o)
	if err != nil {
		t.Fatal(err)
	}
	if defaults {
		v.SetDefaults()
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out obj
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type defaultCase struct {
	name string
	obj  obj
	// status, when set, is written through the status subresource after
	// the create.
	status obj
	// want maps dotted paths to the values the API server must store.
	want map[string]any
}

func defaultCases() []defaultCase {
	return []defaultCase{
		{
			// Karpenter's client writes a zero disruption as
			// {consolidateAfter: Never}; the case means no disruption at all.
			name: "CEL/Default/Defaults/TopLevel/should default the disruption stanza when undefined",
			obj:  corePool(del("spec.disruption")),
			want: map[string]any{"spec.disruption": obj{"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": list(obj{"nodes": "10%"})}},
		},
		{
			name: "NodePool expireAfter",
			obj:  corePool(del("spec.template.spec.expireAfter")),
			want: map[string]any{"spec.template.spec.expireAfter": "720h"},
		},
		{
			name: "NodePool disruption without policy and budgets",
			obj:  corePool(set("spec.disruption", obj{"consolidateAfter": "30s"})),
			want: map[string]any{"spec.disruption.consolidationPolicy": "WhenEmptyOrUnderutilized", "spec.disruption.budgets": list(obj{"nodes": "10%"})},
		},
		{
			name: "NodePool budget nodes",
			obj:  corePool(poolBudgets(obj{}, obj{"schedule": "@daily", "duration": "1h"})),
			want: map[string]any{"spec.disruption.budgets": list(obj{"nodes": "10%"}, obj{"nodes": "10%", "schedule": "@daily", "duration": "1h"})},
		},
		{
			name:   "NodePool status nodes",
			obj:    corePool(),
			status: obj{"resources": obj{"cpu": "4"}},
			want:   map[string]any{"status.nodes": int64(0)},
		},
		{
			name: "NodeClaim expireAfter",
			obj:  coreClaim(del("spec.expireAfter")),
			want: map[string]any{"spec.expireAfter": "720h"},
		},
		{
			name: "EC2NodeClass metadataOptions",
			obj:  nodeClass(),
			want: map[string]any{"spec.metadataOptions": obj{"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(1), "httpTokens": "required"}},
		},
		{
			name: "EC2NodeClass partial metadataOptions",
			obj:  nodeClass(specSet("metadataOptions", obj{"httpTokens": "optional", "httpPutResponseHopLimit": 2})),
			want: map[string]any{"spec.metadataOptions": obj{"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(2), "httpTokens": "optional"}},
		},
		{
			name: "EC2NodeClass capacity reservation status",
			obj:  nodeClass(),
			status: obj{"capacityReservations": list(obj{"availabilityZone": "us-east-1a", "id": "cr-1", "instanceMatchCriteria": "open",
				"instanceType": "m5.large", "ownerID": "123456789012"})},
			want: map[string]any{"status.capacityReservations": list(obj{"availabilityZone": "us-east-1a", "id": "cr-1", "instanceMatchCriteria": "open",
				"instanceType": "m5.large", "ownerID": "123456789012", "reservationType": "default", "state": "active"})},
		},
	}
}

// TestDefaults: the API server's defaults are the CRDs' (Karpenter's), and
// the Go SetDefaults gives the same spec.
func TestDefaults(t *testing.T) {
	env := apiserver.Env(t)
	dc := env.Dynamic()
	ctx := t.Context()
	for _, c := range defaultCases() {
		t.Run(c.name, func(t *testing.T) {
			o := named(c.obj, "d")
			stored, err := create(ctx, t, dc, o)
			if err != nil {
				t.Fatal(err)
			}
			defer remove(ctx, dc, stored)
			if c.status != nil {
				stored["status"] = c.status
				out, err := dc.Resource(gvr(stored)).UpdateStatus(ctx, toUnstructured(t, stored), metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				stored = out.Object
			}
			for path, want := range c.want {
				if got := get(stored, path); !sameJSON(got, want) {
					t.Errorf("%s = %s, want %s", path, jsonOf(obj{"v": got}), jsonOf(obj{"v": want}))
				}
			}
			if a, b := goDefaulted(t, o)["spec"], goDefaulted(t, stored)["spec"]; !sameJSON(a, b) {
				t.Errorf("Go defaults differ from the API server's:\n Go:  %s\n API: %s", jsonOf(obj{"spec": a}), jsonOf(obj{"spec": b}))
			}
		})
	}
}

func readFixtures(t *testing.T) []obj {
	t.Helper()
	files, err := filepath.Glob("testdata/roundtrip/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []obj
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var o obj
		if err := yaml.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, o)
	}
	return out
}

// TestRoundTrip: objects with every field of Karpenter v1.14's types are
// stored by the API server and read back unchanged (nothing pruned, nothing
// defaulted in), and the Go types decode and encode them unchanged.
func TestRoundTrip(t *testing.T) {
	env := apiserver.Env(t)
	dc := env.Dynamic()
	ctx := t.Context()
	for _, fx := range readFixtures(t) {
		name := fx["metadata"].(obj)["name"].(string)
		t.Run(fmt.Sprint(fx["kind"], "/", name), func(t *testing.T) {
			if err := goValidateObj(fx, nil); err != nil {
				t.Errorf("the fixture is not valid for Go: %v", err)
			}
			in := deepCopy(fx)
			delete(in, "status")
			stored, err := create(ctx, t, dc, in)
			if err != nil {
				t.Fatal(err)
			}
			defer remove(ctx, dc, stored)
			if st, ok := fx["status"]; ok {
				stored["status"] = st
				if _, err := dc.Resource(gvr(stored)).UpdateStatus(ctx, toUnstructured(t, stored), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := dc.Resource(gvr(stored)).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, part := range []string{"spec", "status"} {
				if want, have := fx[part], got.Object[part]; !sameJSON(want, have) {
					t.Errorf("%s changed by the API server:\n want %s\n got  %s", part, jsonOf(obj{part: want}), jsonOf(obj{part: have}))
				}
			}
			again := throughGo(t, got.Object, false)
			// The Go types write an empty object for an absent struct
			// (status: {}, template.metadata: {}), as Karpenter's do.
			for _, part := range []string{"spec", "status"} {
				if want, have := dropEmpty(fx[part]), dropEmpty(again[part]); !sameJSON(want, have) {
					t.Errorf("%s changed by the Go types:\n want %s\n got  %s", part, jsonOf(obj{part: want}), jsonOf(obj{part: have}))
				}
			}
		})
	}
}

// dropEmpty removes the empty objects of a JSON value (nil if it is one).
func dropEmpty(v any) any {
	switch x := v.(type) {
	case obj:
		out := obj{}
		for k, c := range x {
			if c = dropEmpty(c); c != nil {
				out[k] = c
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = dropEmpty(c)
		}
		return out
	}
	return v
}

// TestRoundTripFixturesHaveEveryField: every field of each CRD's spec and
// status schema is set in some fixture of its kind.
func TestRoundTripFixturesHaveEveryField(t *testing.T) {
	fixtures := readFixtures(t)
	for _, f := range []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"} {
		crd := load(t, f)
		b, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		var schemaDoc obj
		if err := json.Unmarshal(b, &schemaDoc); err != nil {
			t.Fatal(err)
		}
		all := map[string]bool{}
		props := schemaDoc["properties"].(obj)
		for _, part := range []string{"spec", "status"} {
			schemaPaths(props[part].(obj), part, all)
		}
		seen := map[string]bool{}
		for _, fx := range fixtures {
			if fx["kind"] != crd.Spec.Names.Kind {
				continue
			}
			for _, part := range []string{"spec", "status"} {
				if v, ok := fx[part]; ok {
					seenPaths(props[part].(obj), v, part, seen)
				}
			}
		}
		var missing []string
		for p := range all {
			if !seen[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: fields in no fixture:\n%s", crd.Spec.Names.Kind, strings.Join(missing, "\n"))
		} else {
			t.Logf("%s: %d fields, all in the fixtures", crd.Spec.Names.Kind, len(all))
		}
	}
}

// schemaPaths lists the paths of a schema's fields: "[]" for list items,
// "{}" for map values.
func schemaPaths(s obj, path string, out map[string]bool) {
	out[path] = true
	if p, ok := s["properties"].(obj); ok {
		for k, v := range p {
			schemaPaths(v.(obj), path+"."+k, out)
		}
	}
	if it, ok := s["items"].(obj); ok {
		schemaPaths(it, path+"[]", out)
	}
	if ap, ok := s["additionalProperties"].(obj); ok {
		schemaPaths(ap, path+"{}", out)
	}
}

// seenPaths lists the schema paths a value sets.
func seenPaths(s obj, v any, path string, out map[string]bool) {
	out[path] = true
	switch x := v.(type) {
	case obj:
		if p, ok := s["properties"].(obj); ok {
			for k, c := range x {
				if cs, ok := p[k].(obj); ok {
					seenPaths(cs, c, path+"."+k, out)
				}
			}
		}
		if ap, ok := s["additionalProperties"].(obj); ok {
			for _, c := range x {
				seenPaths(ap, c, path+"{}", out)
			}
		}
	case []any:
		if it, ok := s["items"].(obj); ok {
			for _, c := range x {
				seenPaths(it, c, path+"[]", out)
			}
		}
	}
}

// The CRDs' restricted-label rules list the same karpenter.k8s.aws labels
// as api/core/v1 (AWSProviderLabels), which the Go validation uses.
func TestAWSLabelListsMatchGo(t *testing.T) {
	want := without(karpv1.AWSProviderLabels)
	check := func(where, rule string) {
		var got []string
		for _, part := range strings.Split(rule, `"`) {
			if strings.HasPrefix(part, awsv1.Group+"/") && !slices.Contains(got, part) {
				got = append(got, part)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %v\nGo lists %v", where, got, want)
		}
	}
	for _, f := range []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml"} {
		b, err := json.Marshal(load(t, f).Spec.Versions[0].Schema.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		_ = json.Unmarshal(b, &doc)
		n := 0
		var walk func(v any, path string)
		walk = func(v any, path string) {
			switch x := v.(type) {
			case obj:
				if rules, ok := x["x-kubernetes-validations"].([]any); ok {
					for _, r := range rules {
						r := r.(obj)
						if r["message"] == `label domain "karpenter.k8s.aws" is restricted` {
							check(f+" "+path, r["rule"].(string))
							n++
						}
					}
				}
				for k, c := range x {
					walk(c, path+"."+k)
				}
			case []any:
				for _, c := range x {
					walk(c, path)
				}
			}
		}
		walk(doc, "")
		if n == 0 {
			t.Errorf("%s: no karpenter.k8s.aws label rule", f)
		}
	}
}
