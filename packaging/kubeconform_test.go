package packaging_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kubernetesModule is the Kubernetes release the control plane of the
// tests is built from (tools/k8s); its api/openapi-spec/swagger.json holds
// the schemas kubeconform checks against (kubeconform downloads them by
// default; nothing is downloaded here).
func kubernetesModule(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "tools", "k8s", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("tools/k8s/go.mod: no `require k8s.io/kubernetes vX.Y.Z` line")
	}
	out, err := run(t, filepath.Join(repoRoot(t), "tools", "k8s"), []string{"GOFLAGS=-mod=mod"}, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+string(m[1]))
	if err != nil {
		t.Skipf("k8s.io/kubernetes@%s not in the module cache (`make tools` fetches it): %v\n%s", m[1], err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal([]byte(out), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	return mod.Dir
}

// kubeconformSchemas writes, for each kind, a standalone strict JSON schema
// from Kubernetes' OpenAPI v2 definitions at
// dir/<group, or the version for the core group>/<version>/<kind>.json (the
// layout of kubeconform's -schema-location template below): the kind's
// definition and every definition it references; objects refuse unknown
// properties; int-or-string and Quantity accept their two forms.
func kubeconformSchemas(t *testing.T, swagger, dir string, kinds map[schema.GroupVersionKind]bool) {
	t.Helper()
	b, err := os.ReadFile(swagger)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("%s: %v", swagger, err)
	}
	defs := spec.Definitions
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	for name, d := range defs {
		defs[name] = strictSchema(d)
	}
	byGVK := map[schema.GroupVersionKind]string{}
	for name, d := range defs {
		gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m := g.(map[string]any)
			byGVK[schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}] = name
		}
	}
	for gvk := range kinds {
		root, ok := byGVK[gvk]
		if !ok {
			continue // kubeconform reports the missing schema (or it is skipped)
		}
		closure := map[string]any{}
		var visit func(name string)
		visit = func(name string) {
			if _, seen := closure[name]; seen {
				return
			}
			closure[name] = defs[name]
			for _, ref := range refs(defs[name]) {
				visit(ref)
			}
		}
		visit(root)
		doc := map[string]any{"$ref": "#/definitions/" + root, "definitions": closure}
		group := gvk.Group
		if group == "" {
			group = gvk.Version
		}
		p := filepath.Join(dir, group, gvk.Version, strings.ToLower(gvk.Kind)+".json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// strictSchema refuses unknown properties of every object that lists its
// properties and accepts both forms of an int-or-string.
func strictSchema(n map[string]any) map[string]any {
	if n["format"] == "int-or-string" {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	}
	if props, ok := n["properties"].(map[string]any); ok {
		for k, p := range props {
			if m, ok := p.(map[string]any); ok {
				props[k] = strictSchema(m)
			}
		}
		if _, ok := n["additionalProperties"]; !ok {
			n["additionalProperties"] = false
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if m, ok := n[k].(map[string]any); ok {
			n[k] = strictSchema(m)
		}
	}
	return n
}

// refs lists the definitions a schema refers to.
func refs(n any) []string {
	var out []string
	switch v := n.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				out = append(out, strings.TrimPrefix(s, "#/definitions/"))
			} else {
				out = append(out, refs(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, refs(x)...)
		}
	}
	return out
}

// TestKubeconformStrict: everything both charts render (defaults, the CI
// values, the examples, Karpenter's own values) passes kubeconform -strict
// against Kubernetes' schemas; the Prometheus Operator's ServiceMonitor,
// whose CRD is not here, is skipped. A rendered object with an unknown
// field fails, so the check can fail.
func TestKubeconformStrict(t *testing.T) {
	kubeconform := tool(t, "kubeconform")
	tool(t, "helm")
	swagger := filepath.Join(kubernetesModule(t), "api", "openapi-spec", "swagger.json")
	dir := t.TempDir()
	renders := map[string]string{}
	for _, v := range append(ciValues(t), karpenterValues) {
		out, err := render(t, []string{v}, "settings.clusterName=kubeconform", "serviceMonitor.enabled=true")
		if err != nil {
			t.Fatalf("helm template -f %s: %v\n%s", v, err, out)
		}
		renders[strings.NewReplacer("/", "_", ".", "_").Replace(v)+".yaml"] = out
	}
	out, err := renderRelease(t, crdChartDir, "joiner-crd", nil)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", crdChartDir, err, out)
	}
	renders["joiner-crd.yaml"] = out
	renders["unknown-field.yaml"] = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  notAField: 1\n  ports: [{port: 80}]\n"

	kinds := map[schema.GroupVersionKind]bool{}
	for name, body := range renders {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, o := range objects(t, body) {
			kinds[o.GroupVersionKind()] = true
		}
	}
	schemas := filepath.Join(dir, "schemas")
	kubeconformSchemas(t, swagger, schemas, kinds)

	var files []string
	for name := range renders {
		files = append(files, filepath.Join(dir, name))
	}
	res, _ := run(t, dir, nil, kubeconform, append([]string{"-strict", "-summary", "-output", "text", "-skip", "ServiceMonitor",
		"-schema-location", filepath.Join(schemas, "{{ .Group }}", "{{ .ResourceAPIVersion }}", "{{ .ResourceKind }}.json")}, files...)...)
	t.Logf("kubeconform:\n%s", res)
	invalid := 0
	sc := bufio.NewScanner(strings.NewReader(res))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, " is invalid") && !strings.Contains(line, " failed validation") && !strings.Contains(line, "could not find schema") {
			continue
		}
		if strings.HasPrefix(line, filepath.Join(dir, "unknown-field.yaml")) {
			invalid++
			if !strings.Contains(line, "notAField") {
				t.Errorf("the unknown field is not named: %s", line)
			}
			continue
		}
		t.Errorf("kubeconform: %s", line)
	}
	if invalid != 1 {
		t.Errorf("a Service with spec.notAField: %d failures, want 1 (is kubeconform strict?)", invalid)
	}
	if !regexp.MustCompile(`Summary: \d{2,} resources found`).MatchString(res) {
		t.Errorf("kubeconform summary missing or too few resources:\n%s", res)
	}
}
