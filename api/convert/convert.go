// Package convert turns legacy Karpenter manifests into the v1 API Joiner
// serves: karpenter.sh/v1alpha5 Provisioner and karpenter.k8s.aws/v1alpha1
// AWSNodeTemplate (Karpenter before v0.32), karpenter.sh/v1beta1 NodePool and
// karpenter.k8s.aws/v1beta1 EC2NodeClass (v0.32 to v0.37).
//
// Every field with a v1 home is mapped; every field without one is dropped and
// reported through the warn callback with its path and the reason. Documents
// that are not legacy Karpenter objects pass through byte for byte. The
// conversion is pure and deterministic: same input, same output.
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
	"sort"
	"strings"
	"unicode/utf8"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
	awsv1beta1 "github.com/joiner-dev/joiner/api/legacy/aws/v1beta1"
	v1alpha5 "github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
	corev1beta1 "github.com/joiner-dev/joiner/api/legacy/core/v1beta1"
)

// ErrMalformed wraps errors about input that is not valid YAML or does not
// decode into the type its apiVersion and kind name.
var ErrMalformed = errors.New("malformed manifest")

// ErrConflict wraps errors about input that converts to contradicting v1
// objects (two kubelet blocks for one EC2NodeClass, two objects of one name).
var ErrConflict = errors.New("conflicting manifests")

// Object is one document of the converted stream: either passed through
// (Raw) or a v1 object produced from a legacy one (exactly one of NodePool,
// EC2NodeClass).
type Object struct {
	// Raw is the input document's bytes, for documents passed through.
	Raw []byte
	// NodePool is a converted karpenter.sh/v1 NodePool.
	NodePool *karpv1.NodePool
	// EC2NodeClass is a converted karpenter.k8s.aws/v1 EC2NodeClass.
	EC2NodeClass *awsv1.EC2NodeClass
	// Source names the input document, e.g. `document 2 (Provisioner default)`.
	Source string
}

// Converted reports whether o was produced by conversion (not passed through).
func (o Object) Converted() bool { return o.NodePool != nil || o.EC2NodeClass != nil }

// Convert converts a multi-document YAML stream: legacy Karpenter documents
// are replaced by their v1 documents, everything else passes through
// unchanged. Dropped fields are reported through warn (which may be nil).
func Convert(in []byte, warn func(string)) ([]byte, error) {
	objs, err := ConvertDocuments(in, warn)
	if err != nil {
		return nil, err
	}
	return Encode(objs)
}

// ConvertDocuments is Convert without the final encoding: it returns the
// output documents in order, converted ones as typed v1 objects.
func ConvertDocuments(in []byte, warn func(string)) ([]Object, error) {
	return ConvertInputs([]Input{{Data: in}}, warn)
}

// Input is one named YAML stream (a file, or "-" for stdin).
type Input struct {
	// Name prefixes the document positions in errors; may be empty.
	Name string
	Data []byte
}

// ConvertInputs converts several streams as one: a NodePool in one file and
// the EC2NodeClass it references in another are handled together (kubelet
// blocks move across). Errors name the input and the document.
func ConvertInputs(inputs []Input, warn func(string)) ([]Object, error) {
	if warn == nil {
		warn = func(string) {}
	}
	c := &converter{warn: warn, kubelets: map[string][]kubeletUse{}, users: map[string][]string{}}
	for _, in := range inputs {
		c.input = in.Name
		docs := splitDocuments(in.Data)
		if err := c.checkUTF8(in.Data, docs); err != nil {
			return nil, err
		}
		for _, d := range docs {
			if err := c.document(d); err != nil {
				return nil, err
			}
		}
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	return c.out, nil
}

// Encode writes objects as a multi-document YAML stream: passed-through
// documents byte for byte, converted ones with sorted keys and no status.
func Encode(objs []Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		var doc []byte
		switch {
		case o.NodePool != nil:
			y, err := encodeObject(o.NodePool)
			if err != nil {
				return nil, fmt.Errorf("%sencoding NodePool %s: %w", sourcePrefix(o), o.NodePool.Name, err)
			}
			doc = y
		case o.EC2NodeClass != nil:
			y, err := encodeObject(o.EC2NodeClass)
			if err != nil {
				return nil, fmt.Errorf("%sencoding EC2NodeClass %s: %w", sourcePrefix(o), o.EC2NodeClass.Name, err)
			}
			doc = y
		default:
			doc = o.Raw
		}
		b.Write(doc)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// sourcePrefix is "<source>: " for errors about o, or empty.
func sourcePrefix(o Object) string {
	if o.Source == "" {
		return ""
	}
	return o.Source + ": "
}

// encodeObject marshals a v1 object without status, creationTimestamp and an
// empty template metadata, keys sorted.
func encodeObject(obj any) ([]byte, error) {
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
	j, err = json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return toYAML(j)
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
			p := k
			if path != "" {
				p = path + "." + k
			}
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
	at := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return cmp.Or(path, "."), true
		}
		for _, k := range slices.Sorted(maps.Keys(av)) {
			e, ok := bv[k]
			if !ok {
				return at(k), true
			}
			if p, d := firstDiff(at(k), av[k], e); d {
				return p, true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(bv)) {
			if _, ok := av[k]; !ok {
				return at(k), true
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

// kubeletUse is one legacy pool's kubelet block aimed at a node class.
type kubeletUse struct {
	from    string // "Provisioner default"
	path    string // field path in the source
	kubelet *awsv1.KubeletConfiguration
}

// converter carries the state of one stream's conversion.
type converter struct {
	warn  func(string)
	input string // name of the input being read
	out   []Object
	// kubelets maps an EC2NodeClass name to the kubelet blocks legacy pools
	// referencing it carried.
	kubelets map[string][]kubeletUse
	// users maps an EC2NodeClass name to the converted pools referencing it.
	users map[string][]string
}

// warnf reports a dropped or changed field of object `what` ("Provisioner x").
func (c *converter) warnf(what, format string, args ...any) {
	c.warn(what + ": " + fmt.Sprintf(format, args...))
}

// typeMeta is what is read first from every document.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// where names document d of the input being read, as errors do.
func (c *converter) where(d document) string {
	w := fmt.Sprintf("document %d (line %d)", d.index, d.line)
	if c.input != "" {
		w = c.input + ": " + w
	}
	return w
}

// checkUTF8 rejects an input that is not UTF-8 (YAML streams Joiner reads
// and writes are UTF-8), naming the document, line and column of the first
// bad byte. Comments are checked too: they pass through byte for byte.
func (c *converter) checkUTF8(data []byte, docs []document) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
	where := fmt.Sprintf("line %d (a document separator)", line)
	if c.input != "" {
		where = c.input + ": " + where
	}
	for _, d := range docs {
		lines := bytes.Count(d.raw, []byte("\n"))
		if !bytes.HasSuffix(d.raw, []byte("\n")) {
			lines++
		}
		if line >= d.line && line < d.line+lines {
			where = c.where(d)
			break
		}
	}
	return fmt.Errorf("%s: %w: line %d column %d: byte 0x%02x is not UTF-8", where, ErrMalformed, line, col, data[off])
}

func (c *converter) document(d document) error {
	where := c.where(d)
	if onlyComments(d.raw) {
		c.out = append(c.out, Object{Raw: d.raw, Source: where})
		return nil
	}
	j, err := yaml.YAMLToJSONStrict(d.raw)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", where, ErrMalformed, err)
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || j[0] != '{' {
		// Not an object (a scalar or a list): not a Kubernetes manifest.
		c.out = append(c.out, Object{Raw: d.raw, Source: where})
		return nil
	}
	var tm typeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		// apiVersion/kind/name of the wrong type: only legacy kinds matter.
		c.out = append(c.out, Object{Raw: d.raw, Source: where})
		return nil
	}
	if isList(tm) {
		return c.list(d, where, j)
	}
	objs, err := c.object(where, tm, j)
	if err != nil {
		return err
	}
	if objs == nil {
		c.out = append(c.out, Object{Raw: d.raw, Source: where})
		return nil
	}
	c.out = append(c.out, objs...)
	return nil
}

// list handles a `kind: List` (kubectl get -o yaml): when it holds legacy
// Karpenter items, directly or in a List among its items, each item becomes
// its own document (converted, split again if it is such a List, or
// re-encoded); otherwise the list passes through unchanged. So no document
// of the output is a List holding legacy items, and the output converts to
// itself.
func (c *converter) list(d document, where string, j []byte) error {
	items, ok, tooDeep := listItems(j, 1)
	if !ok || !holdsLegacy(items) {
		c.out = append(c.out, Object{Raw: d.raw, Source: where})
		return nil
	}
	if tooDeep {
		// a List past the depth, once its own document, could be split
		// on the next conversion
		return fmt.Errorf("%s: %w: a List nested more than %d Lists deep in a List holding legacy Karpenter objects; flatten it", where, ErrMalformed, maxListDepth)
	}
	return c.splitList(where, items)
}

// maxListDepth bounds how deep Lists nested in a List are looked into.
const maxListDepth = 8

// listItem is one item of a v1 List.
type listItem struct {
	raw json.RawMessage
	tm  typeMeta
	// items are the item's own items when it is a List (ok) nested at most
	// maxListDepth deep.
	items []listItem
	ok    bool
}

// listItems decodes the items of the List j, nested depth deep, and the
// Lists among them; ok is false when j has no items array. tooDeep reports
// a List among them nested deeper than maxListDepth (not looked into).
func listItems(j []byte, depth int) (items []listItem, ok, tooDeep bool) {
	if depth > maxListDepth {
		return nil, false, true
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &l); err != nil {
		return nil, false, false
	}
	items = make([]listItem, len(l.Items))
	for i, it := range l.Items {
		items[i].raw = it
		// apiVersion/kind/name of the wrong type leave them empty
		_ = json.Unmarshal(it, &items[i].tm)
		if isList(items[i].tm) {
			var deep bool
			items[i].items, items[i].ok, deep = listItems(it, depth+1)
			tooDeep = tooDeep || deep
		}
	}
	return items, true, tooDeep
}

// holdsLegacy reports whether items, or the items of a List among them,
// hold a legacy Karpenter object.
func holdsLegacy(items []listItem) bool {
	for _, it := range items {
		if isLegacy(it.tm) || it.ok && holdsLegacy(it.items) {
			return true
		}
	}
	return false
}

// splitList makes one document of each item of a List holding legacy items.
func (c *converter) splitList(where string, items []listItem) error {
	c.warnf(where, "List split into one document per item")
	for i, it := range items {
		w := fmt.Sprintf("%s items[%d]", where, i)
		if it.ok && holdsLegacy(it.items) {
			if err := c.splitList(w, it.items); err != nil {
				return err
			}
			continue
		}
		objs, err := c.object(w, it.tm, it.raw)
		if err != nil {
			return err
		}
		if objs == nil {
			y, err := toYAML(it.raw)
			if err != nil {
				return fmt.Errorf("%s: %w", w, err)
			}
			objs = []Object{{Raw: y, Source: w}}
		}
		c.out = append(c.out, objs...)
	}
	return nil
}

// isList reports whether tm names a v1 List.
func isList(tm typeMeta) bool { return tm.APIVersion == "v1" && tm.Kind == "List" }

// isLegacy reports whether tm names a kind this package converts.
func isLegacy(tm typeMeta) bool {
	switch {
	case tm.APIVersion == v1alpha5.APIVersion && tm.Kind == v1alpha5.Kind,
		tm.APIVersion == awsv1alpha1.APIVersion && tm.Kind == awsv1alpha1.Kind,
		tm.APIVersion == corev1beta1.APIVersion && tm.Kind == corev1beta1.KindNodePool,
		tm.APIVersion == awsv1beta1.APIVersion && tm.Kind == awsv1beta1.Kind:
		return true
	}
	return false
}

// object converts one legacy object; nil means pass through unchanged.
func (c *converter) object(where string, tm typeMeta, j []byte) ([]Object, error) {
	what := tm.Kind + " " + tm.Metadata.Name
	src := fmt.Sprintf("%s (%s)", where, what)
	if isLegacy(tm) && tm.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: %w: %s has no metadata.name", where, ErrMalformed, tm.Kind)
	}
	switch {
	case tm.APIVersion == v1alpha5.APIVersion && tm.Kind == v1alpha5.Kind:
		var p v1alpha5.Provisioner
		if err := c.decode(src, what, j, &p); err != nil {
			return nil, err
		}
		np, nc, err := c.provisioner(what, &p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		objs := []Object{{NodePool: np, Source: src}}
		if nc != nil {
			objs = append(objs, Object{EC2NodeClass: nc, Source: src})
		}
		return objs, nil
	case tm.APIVersion == awsv1alpha1.APIVersion && tm.Kind == awsv1alpha1.Kind:
		var t awsv1alpha1.AWSNodeTemplate
		if err := c.decode(src, what, j, &t); err != nil {
			return nil, err
		}
		nc, err := c.awsNodeTemplate(what, &t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		return []Object{{EC2NodeClass: nc, Source: src}}, nil
	case tm.APIVersion == corev1beta1.APIVersion && tm.Kind == corev1beta1.KindNodePool:
		var p corev1beta1.NodePool
		if err := c.decode(src, what, j, &p); err != nil {
			return nil, err
		}
		np, err := c.nodePoolV1beta1(what, &p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		return []Object{{NodePool: np, Source: src}}, nil
	case tm.APIVersion == awsv1beta1.APIVersion && tm.Kind == awsv1beta1.Kind:
		var nc awsv1beta1.EC2NodeClass
		if err := c.decode(src, what, j, &nc); err != nil {
			return nil, err
		}
		out, err := c.ec2NodeClassV1beta1(what, &nc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		return []Object{{EC2NodeClass: out, Source: src}}, nil
	}
	group, version, _ := strings.Cut(tm.APIVersion, "/")
	if (group == karpv1.Group || group == awsv1.Group) && version != "v1" {
		c.warnf(what, "%s %s is not converted (no v1 manifest equivalent); passed through unchanged", tm.APIVersion, tm.Kind)
	}
	return nil, nil
}

// decode reads j into out case-sensitively, then reports every field of the
// input the type does not know as dropped.
func (c *converter) decode(src, what string, j []byte, out any) error {
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, out); err != nil {
		return fmt.Errorf("%s: %w: %v", src, ErrMalformed, err)
	}
	var orig map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &orig); err != nil {
		return fmt.Errorf("%s: %w: %v", src, ErrMalformed, err)
	}
	rj, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("%s: re-encoding: %w", src, err)
	}
	var round map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(rj, &round); err != nil {
		return fmt.Errorf("%s: re-encoding: %w", src, err)
	}
	delete(orig, "status")
	kind, _ := orig["kind"].(string)
	apiVersion, _ := orig["apiVersion"].(string)
	var unknown []string
	unknownFields("", orig, round, &unknown)
	sort.Strings(unknown)
	for _, p := range unknown {
		c.warnf(what, "%s is not a %s %s field; dropped", p, apiVersion, kind)
	}
	return nil
}

// unknownFields appends the paths of non-empty values in orig that are absent
// from round (the input decoded into its type and encoded again).
func unknownFields(path string, orig, round any, out *[]string) {
	switch o := orig.(type) {
	case map[string]any:
		r, _ := round.(map[string]any)
		for k, v := range o {
			p := k
			if path != "" {
				p = path + "." + k
			}
			rv, ok := r[k]
			if !ok {
				if !isEmpty(v) {
					*out = append(*out, p)
				}
				continue
			}
			unknownFields(p, v, rv, out)
		}
	case []any:
		r, _ := round.([]any)
		for i, v := range o {
			if i < len(r) {
				unknownFields(fmt.Sprintf("%s[%d]", path, i), v, r[i], out)
			}
		}
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func yamlToJSON(raw []byte) ([]byte, error) { return yaml.YAMLToJSON(raw) }
