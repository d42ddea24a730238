package convert

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
)

// decode reads j into out case-sensitively, then reports every field of the
// input the type does not know as dropped. A value of the wrong type is a
// *fieldError naming the field, the value and what the field takes.
func (c *converter) decode(what string, j []byte, out any) error {
	var orig map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &orig); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkType("", orig, reflect.TypeOf(out)); err != nil {
		return err
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, out); err != nil {
		// checkType knows every type the legacy objects use; this is a
		// safety net, not a path taken
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	rj, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("re-encoding: %w", err)
	}
	var round map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(rj, &round); err != nil {
		return fmt.Errorf("re-encoding: %w", err)
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

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkType returns a *fieldError for the first value of v (decoded JSON:
// nil, bool, int64, float64, string, []any, map[string]any), keys in order,
// that type t cannot hold. Keys t does not know are left to unknownFields.
func checkType(path string, v any, t reflect.Type) error {
	if v == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return checkUnmarshaler(path, v, t)
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch(path, v, "expected an object (key: value lines)")
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if ft, ok := fields[k]; ok {
				if err := checkType(join(path, k), m[k], ft); err != nil {
					return err
				}
			}
		}
		return nil
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch(path, v, "expected an object (key: value lines)")
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := checkType(karpv1.Key(path, k), m[k], t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return mismatch(path, v, "expected a list")
		}
		for i, e := range l {
			if err := checkType(karpv1.Index(path, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	}
	return checkScalar(path, v, t)
}

// checkScalar checks a string, bool or number field.
func checkScalar(path string, v any, t reflect.Type) error {
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return mismatch(path, v, "expected a string"+quoteHint(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return mismatch(path, v, "expected true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			return mismatch(path, v, "expected an integer"+unitHint(path))
		}
		if lo, hi := intRange(t.Bits()); n < lo || n > hi {
			return mismatch(path, v, fmt.Sprintf("expected an integer between %d and %d", lo, hi))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok || n < 0 || t.Bits() < 64 && uint64(n) > math.MaxUint64>>(64-t.Bits()) {
			return mismatch(path, v, "expected a non-negative integer")
		}
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case int64, float64:
		default:
			return mismatch(path, v, "expected a number")
		}
	}
	return nil
}

// intRange is the range of a signed integer of the given size.
func intRange(bits int) (lo, hi int64) {
	switch bits {
	case 8:
		return math.MinInt8, math.MaxInt8
	case 16:
		return math.MinInt16, math.MaxInt16
	case 32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// checkUnmarshaler decodes v into a new t with t's own UnmarshalJSON.
func checkUnmarshaler(path string, v any, t reflect.Type) error {
	b, err := json.Marshal(v)
	if err != nil {
		return mismatch(path, v, err.Error())
	}
	p := reflect.New(t)
	if err := p.Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
		return mismatch(path, v, expectedFor(t, err))
	}
	return nil
}

// expectedFor says what a type with its own decoding takes.
func expectedFor(t reflect.Type, err error) string {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return "expected a quantity such as 100Mi, 2 or 500m"
	case reflect.TypeFor[karpv1.Duration](), reflect.TypeFor[metav1.Duration]():
		return "expected a duration such as 90s, 5m or 1h30m"
	case reflect.TypeFor[metav1.Time]():
		return "expected a time such as 2024-01-02T15:04:05Z"
	case reflect.TypeFor[v1alpha5.Amount]():
		return err.Error()
	}
	return "expected " + t.String() + ": " + err.Error()
}

// quoteHint suggests quoting a YAML scalar that did not read as a string.
func quoteHint(v any) string {
	switch v.(type) {
	case bool, int64, float64:
		b, _ := json.Marshal(v)
		return fmt.Sprintf(" (quote it: %q)", string(b))
	}
	return ""
}

// unitHint names the unit of integer fields written with one.
func unitHint(path string) string {
	switch {
	case strings.HasSuffix(path, "GracePeriod"), strings.HasPrefix(path, "spec.ttlSeconds"):
		return " (seconds)"
	}
	return ""
}

func mismatch(path string, v any, expected string) error {
	return &fieldError{path: cmp.Or(path, "."), value: showValue(v), expected: expected}
}

// showValue writes a value the way errors quote it: compact JSON, cut at
// 60 bytes.
func showValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const most = 60
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return string(b)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// jsonFields maps the JSON keys of struct t to their types, as
// encoding/json does: the tag's name or the field's, embedded structs
// without a name promoted, "-" and unexported fields skipped.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for k, v := range jsonFields(ft) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		out[cmp.Or(name, f.Name)] = f.Type
	}
	return out
}

// unknownFields appends the paths of non-empty values in orig that are absent
// from round (the input decoded into its type and encoded again).
func unknownFields(path string, orig, round any, out *[]string) {
	switch o := orig.(type) {
	case map[string]any:
		r, _ := round.(map[string]any)
		for k, v := range o {
			p := join(path, k)
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
