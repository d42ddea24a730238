// Command crdpatch adds to the CRDs controller-gen wrote what markers cannot
// express on types Joiner does not own (corev1.Taint) or on map values: the
// same schema rules Karpenter adds to its CRDs after generation. Plain
// OpenAPI keywords cost nothing in the API server's CEL budget.
//
// Usage: go run ./packaging/crds/crdpatch packaging/crds
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

const (
	qualifiedNamePattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	labelValuePattern    = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "karpenter.*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRDs in %s", os.Args[1])
	}
	for _, f := range files {
		if err == nil {
			err = patchFile(f)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func patchFile(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	walk(doc, "")
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, b) {
		return nil
	}
	return os.WriteFile(name, out, 0o644)
}

// walk patches every taint schema and the NodePool template labels.
func walk(v any, path string) {
	switch x := v.(type) {
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok {
			if isTaint(props) {
				patchTaint(props)
			}
			if labels, ok := props["labels"].(map[string]any); ok && path == ".spec.versions.schema.openAPIV3Schema.properties.spec.properties.template.properties.metadata" {
				if ap, ok := labels["additionalProperties"].(map[string]any); ok {
					ap["maxLength"] = 63
					ap["pattern"] = labelValuePattern
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

func isTaint(props map[string]any) bool {
	for _, k := range []string{"effect", "key", "value", "timeAdded"} {
		if _, ok := props[k]; !ok {
			return false
		}
	}
	return len(props) == 4
}

func patchTaint(props map[string]any) {
	props["effect"].(map[string]any)["enum"] = []any{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	key := props["key"].(map[string]any)
	key["minLength"] = 1
	key["maxLength"] = 316
	key["pattern"] = qualifiedNamePattern
	value := props["value"].(map[string]any)
	value["maxLength"] = 63
	value["pattern"] = labelValuePattern
}
