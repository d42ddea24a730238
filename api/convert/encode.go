package convert

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"sigs.k8s.io/yaml"
)

// Format is an output format of EncodeAs.
type Format string

// Output formats.
const (
	// FormatYAML is a multi-document YAML stream: passed-through documents
	// byte for byte, converted ones with sorted keys.
	FormatYAML Format = "yaml"
	// FormatJSON is one JSON document, indented as kubectl does: the object
	// when there is exactly one, otherwise a v1 List of them (kubectl's
	// convention). Comment-only documents are left out.
	FormatJSON Format = "json"
)

// Formats are the formats EncodeAs writes.
var Formats = []Format{FormatYAML, FormatJSON}

// Encode writes objects as a multi-document YAML stream: passed-through
// documents byte for byte, converted ones with sorted keys and no status.
// On error it returns no output.
func Encode(objs []Object) ([]byte, error) {
	out, errs := EncodeAs(objs, FormatYAML)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// EncodeAs writes objects in format f. A converted object that cannot be
// written is left out with every other object of its document, and
// reported as a *DocumentError; the rest is written.
func EncodeAs(objs []Object, f Format) ([]byte, []error) {
	docs := make([][]byte, len(objs))
	failed := map[string]bool{}
	var errs []error
	for i, o := range objs {
		d, err := encodeOne(o, f)
		if err != nil {
			errs = append(errs, o.fail(err))
			failed[o.Source] = true
			continue
		}
		docs[i] = d
	}
	var kept [][]byte
	for i, o := range objs {
		if !failed[o.Source] && docs[i] != nil {
			kept = append(kept, docs[i])
		}
	}
	switch f {
	case FormatJSON:
		out, err := jsonStream(kept)
		if err != nil {
			errs = append(errs, err)
		}
		return out, errs
	case FormatYAML:
		return yamlStream(kept), errs
	}
	return nil, append(errs, fmt.Errorf("unknown output format %q (want yaml or json)", f))
}

// encodeOne writes one object as a YAML document or a compact JSON value;
// nil for a comment-only document in JSON.
func encodeOne(o Object, f Format) ([]byte, error) {
	obj, kind, name := o.converted()
	if obj == nil {
		if f != FormatJSON {
			return o.Raw, nil
		}
		if onlyComments(o.Raw) {
			return nil, nil
		}
		j, err := yaml.YAMLToJSON(o.Raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return j, nil
	}
	j, err := objectJSON(obj)
	if err == nil && f != FormatJSON {
		j, err = toYAML(j)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", kind, name, err)
	}
	return j, nil
}

// yamlStream joins YAML documents with "---" lines.
func yamlStream(docs [][]byte) []byte {
	var b bytes.Buffer
	for i, doc := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(doc)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// jsonStream writes one JSON document: the one value, or a v1 List.
func jsonStream(docs [][]byte) ([]byte, error) {
	var v any
	if len(docs) == 1 {
		v = json.RawMessage(docs[0])
	} else {
		items := make([]json.RawMessage, len(docs))
		for i, d := range docs {
			items[i] = d
		}
		v = struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}{"v1", "List", items}
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "    ")
	if err := e.Encode(v); err != nil {
		return nil, fmt.Errorf("writing JSON: %w", err)
	}
	return b.Bytes(), nil
}

// objectJSON marshals a v1 object without status, creationTimestamp, nulls
// and an empty template metadata, keys sorted.
func objectJSON(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "status")
	pruneNulls(m)
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]any); ok {
		if t, ok := spec["template"].(map[string]any); ok {
			if md, ok := t["metadata"].(map[string]any); ok && len(md) == 0 {
				delete(t, "metadata")
			}
		}
	}
	b := &bytes.Buffer{}
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	if err := e.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// toYAML writes the JSON j as YAML and checks that the YAML reads back (as
// a document of a converted stream is read) as j: the YAML encoder writes
// a "<<" key bare, which YAML reads as a merge, and an output that reads
// back differently would not convert to itself. The error names the first
// field that does not read back.
func toYAML(j []byte) ([]byte, error) {
	var want any
	if err := json.Unmarshal(j, &want); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if path, found := mergeKey("", want); found {
		return nil, fmt.Errorf("%w: %s: a key \"<<\" cannot be written as YAML (it reads back as a merge)", ErrMalformed, path)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	back, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return nil, fmt.Errorf("%w: written as YAML it does not read back: %v", ErrMalformed, err)
	}
	var got any
	if err := json.Unmarshal(back, &got); err != nil {
		return nil, fmt.Errorf("%w: written as YAML it does not read back: %v", ErrMalformed, err)
	}
	if path, differs := firstDiff("", want, got); differs {
		return nil, fmt.Errorf("%w: %s: written as YAML it reads back differently", ErrMalformed, path)
	}
	return y, nil
}

// mergeKey returns the path of the first "<<" key in v (keys in order).
func mergeKey(path string, v any) (string, bool) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := join(path, k)
			if k == "<<" {
				return p, true
			}
			if p, ok := mergeKey(p, t[k]); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range t {
			if p, ok := mergeKey(fmt.Sprintf("%s[%d]", path, i), e); ok {
				return p, true
			}
		}
	}
	return "", false
}

// firstDiff returns the path of the first value (keys in order) where a and
// b differ; "." for the whole value.
func firstDiff(path string, a, b any) (string, bool) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return cmp.Or(path, "."), true
		}
		for _, k := range slices.Sorted(maps.Keys(av)) {
			e, ok := bv[k]
			if !ok {
				return join(path, k), true
			}
			if p, d := firstDiff(join(path, k), av[k], e); d {
				return p, true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(bv)) {
			if _, ok := av[k]; !ok {
				return join(path, k), true
			}
		}
		return "", false
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) != len(av) {
			return cmp.Or(path, "."), true
		}
		for i := range av {
			if p, d := firstDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i]); d {
				return p, true
			}
		}
		return "", false
	}
	if !reflect.DeepEqual(a, b) {
		return cmp.Or(path, "."), true
	}
	return "", false
}

// pruneNulls removes null values (unset durations marshal as null).
func pruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			pruneNulls(e)
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
}
