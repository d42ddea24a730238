package crds

// The harness of the ported Karpenter v1.14.1 test suites (core:
// pkg/apis/v1/*_test.go; AWS provider: pkg/apis/v1/*_cel_test.go). Each case
// is one Ginkgo It or table Entry of Karpenter's, under its Context path and
// text; its objects are what Karpenter's client sends (a zero duration is
// written "Never", an empty map or list with omitempty is left out). Every
// object goes to the real API server serving packaging/crds, and through
// the Go validation (decode, SetDefaults, Validate or ValidateUpdate), and
// both verdicts are checked.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/kubetest"
)

type obj = map[string]any

// edit changes an object in place.
type edit func(obj)

// verdict is what a validator says of an object.
type verdict bool

const (
	admit  verdict = true
	reject verdict = false
)

func (v verdict) String() string {
	if v {
		return "admit"
	}
	return "reject"
}

// kcase is one Karpenter test case.
type kcase struct {
	// name is Karpenter's Context path and It (or DescribeTable/Entry) text.
	name string
	// objs are the objects the case submits, each checked alone (Karpenter
	// loops over several in some Its).
	objs []obj
	// update, when set, makes the case an update: each object is created
	// (it must be admitted), then changed by update and sent again; the
	// verdicts are the update's.
	update edit
	// crd is the API server's verdict (Karpenter's CRD's).
	crd verdict
	// goWant is the Go validation's verdict when it differs from crd, with
	// goWhy saying why: Karpenter's runtime validation of NodePools rejects
	// what the CRD admits, or Go cannot see the difference the CRD sees.
	goWant *verdict
	goWhy  string
	// check, when set, runs on the stored object after an admitted create.
	check func(t *testing.T, stored obj)
}

func admits(name string, objs ...obj) kcase  { return kcase{name: name, objs: objs, crd: admit} }
func rejects(name string, objs ...obj) kcase { return kcase{name: name, objs: objs, crd: reject} }

// runtimeRejects: the CRD admits, Karpenter's runtime validation (and so
// Joiner's Go validation) rejects.
func (c kcase) runtimeRejects(why string) kcase {
	v := reject
	c.goWant, c.goWhy = &v, why
	return c
}

// goAdmits: a known gap, the Go validation cannot reject what the CRD does.
func (c kcase) goAdmits(why string) kcase {
	v := admit
	c.goWant, c.goWhy = &v, why
	return c
}

func (c kcase) updatedBy(e edit) kcase {
	c.update = e
	return c
}

func (c kcase) goVerdict() verdict {
	if c.goWant != nil {
		return *c.goWant
	}
	return c.crd
}

// Object builders.

// set writes v at a dotted path of field names, making maps on the way.
func set(path string, v any) edit {
	return func(o obj) { setIn(o, path, v) }
}

func setIn(o obj, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := o[k].(obj)
		if !ok {
			next = obj{}
			o[k] = next
		}
		o = next
	}
	o[keys[len(keys)-1]] = v
}

// del removes the field at a dotted path.
func del(path string) edit {
	return func(o obj) {
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := o[k].(obj)
			if !ok {
				return
			}
			o = next
		}
		delete(o, keys[len(keys)-1])
	}
}

func build(base obj, edits []edit) obj {
	o := deepCopy(base)
	for _, e := range edits {
		e(o)
	}
	return o
}

func deepCopy(o obj) obj {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	var out obj
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func list(items ...any) []any { return items }

// req is a requirement as Karpenter's client writes it (no values key when
// there are none).
func req(key, op string, values ...string) obj {
	r := obj{"key": key, "operator": op}
	if len(values) > 0 {
		r["values"] = strs(values)
	}
	return r
}

func reqMin(minValues int, key, op string, values ...string) obj {
	r := req(key, op, values...)
	r["minValues"] = minValues
	return r
}

func strs(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// taint is a corev1.Taint as written by its JSON tags: value omitted when
// empty, effect always written.
func taint(key, value, effect string) obj {
	t := obj{"key": key, "effect": effect}
	if value != "" {
		t["value"] = value
	}
	return t
}

// budget is a Budget; schedule and duration are left out when "".
func budget(nodes, schedule, duration string, reasons ...string) obj {
	b := obj{"nodes": nodes}
	if schedule != "" {
		b["schedule"] = schedule
	}
	if duration != "" {
		b["duration"] = duration
	}
	if len(reasons) > 0 {
		b["reasons"] = strs(reasons)
	}
	return b
}

func tags(kv ...string) obj {
	m := obj{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// The API server side.

var (
	nodePoolsGVR      = schema.GroupVersionResource{Group: karpv1.Group, Version: "v1", Resource: "nodepools"}
	nodeClaimsGVR     = schema.GroupVersionResource{Group: karpv1.Group, Version: "v1", Resource: "nodeclaims"}
	ec2NodeClassesGVR = schema.GroupVersionResource{Group: awsv1.Group, Version: "v1", Resource: "ec2nodeclasses"}
)

func gvr(o obj) schema.GroupVersionResource {
	switch o["kind"] {
	case "NodePool":
		return nodePoolsGVR
	case "NodeClaim":
		return nodeClaimsGVR
	case "EC2NodeClass":
		return ec2NodeClassesGVR
	}
	panic(fmt.Sprintf("unknown kind %v", o["kind"]))
}

var objectSeq atomic.Int64

// named gives a copy of o a fresh name.
func named(o obj, prefix string) obj {
	o = deepCopy(o)
	setIn(o, "metadata.name", fmt.Sprintf("%s-%d", prefix, objectSeq.Add(1)))
	return o
}

func toUnstructured(t *testing.T, o obj) *unstructured.Unstructured {
	t.Helper()
	return kubetest.Unstructured(t, o)
}

func create(ctx context.Context, t *testing.T, dc dynamic.Interface, o obj) (obj, error) {
	t.Helper()
	return written(dc.Resource(gvr(o)).Create(ctx, toUnstructured(t, o), metav1.CreateOptions{}))
}

func update(ctx context.Context, t *testing.T, dc dynamic.Interface, o obj) (obj, error) {
	t.Helper()
	return written(dc.Resource(gvr(o)).Update(ctx, toUnstructured(t, o), metav1.UpdateOptions{}))
}

// written is the object a write returned, or its error.
func written(u *unstructured.Unstructured, err error) (obj, error) {
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

func remove(ctx context.Context, dc dynamic.Interface, o obj) {
	name, _ := o["metadata"].(obj)["name"].(string)
	_ = dc.Resource(gvr(o)).Delete(ctx, name, metav1.DeleteOptions{})
}

// The Go side.

type validated interface {
	SetDefaults()
	Validate() error
}

// goType is a new object of the Go type of kind.
func goType(kind any) validated {
	switch kind {
	case "NodePool":
		return &karpv1.NodePool{}
	case "NodeClaim":
		return &karpv1.NodeClaim{}
	default:
		return &awsv1.EC2NodeClass{}
	}
}

// decode turns an object into its Go type; an object Go cannot decode is
// one Go rejects (as Karpenter's own client could not read it either).
func decode(o obj) (validated, error) {
	v := goType(o["kind"])
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// goValidateObj is the Go validation's answer on o (an update from old
// when old is not nil).
func goValidateObj(o, old obj) error {
	v, err := decode(o)
	if err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	v.SetDefaults()
	if old == nil {
		return v.Validate()
	}
	prev, err := decode(old)
	if err != nil {
		return fmt.Errorf("decoding the old object: %w", err)
	}
	prev.SetDefaults()
	switch x := v.(type) {
	case *karpv1.NodePool:
		return x.ValidateUpdate(prev.(*karpv1.NodePool))
	case *karpv1.NodeClaim:
		return x.ValidateUpdate(prev.(*karpv1.NodeClaim))
	}
	return v.Validate()
}

// runSuite runs the cases of one Karpenter suite, which has wantCases
// cases (Its and table Entries): through the Go validation (always), and
// through the API server (when it runs; not under -short).
func runSuite(t *testing.T, suite string, wantCases int, cases []kcase) {
	t.Helper()
	names := map[string]bool{}
	objects, gaps := 0, 0
	for _, c := range cases {
		if names[c.name] {
			t.Errorf("case %q listed twice", c.name)
		}
		names[c.name] = true
		objects += len(c.objs)
		if c.goWant != nil {
			gaps++
		}
		if len(c.objs) == 0 {
			t.Errorf("case %q has no objects", c.name)
		}
	}
	if len(names) != wantCases {
		t.Errorf("%s: %d cases ported, Karpenter's suite has %d", suite, len(names), wantCases)
	}
	t.Logf("%s: %d Karpenter cases, %d objects; %d with a Go verdict other than the CRD's", suite, len(names), objects, gaps)
	t.Run("Go validation", func(t *testing.T) {
		for _, c := range cases {
			for i, o := range c.objs {
				var old obj
				if c.update != nil {
					old, o = o, deepCopy(o)
					c.update(o)
				}
				goErr := goValidateObj(o, old)
				if g := verdict(goErr == nil); g != c.goVerdict() {
					t.Errorf("%s: object %d: %v, want %v%s (err: %v)\n%s", c.name, i, g, c.goVerdict(), why(c.goWhy), goErr, jsonOf(o))
				}
				if goErr != nil && !strings.HasPrefix(goErr.Error(), "decoding") && len(karpv1.FieldErrors(goErr)) == 0 {
					t.Errorf("%s: object %d: error without field errors: %v", c.name, i, goErr)
				}
			}
		}
	})
	t.Run("API server", func(t *testing.T) {
		env := apiserver.Env(t)
		dc := env.Dynamic()
		ctx := t.Context()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for i, o := range c.objs {
					o = named(o, "k")
					var old, sent, stored obj = nil, o, nil
					var err error
					if c.update != nil {
						old, err = create(ctx, t, dc, o)
						if err != nil {
							t.Fatalf("object %d: create before the update: %v", i, err)
						}
						sent = deepCopy(old)
						c.update(sent)
						stored, err = update(ctx, t, dc, sent)
						if stored == nil {
							stored = old
						}
					} else {
						stored, err = create(ctx, t, dc, o)
					}
					if got := verdict(err == nil); got != c.crd {
						t.Errorf("object %d: %v, want %v (err: %v)\n%s", i, got, c.crd, err, jsonOf(sent))
					}
					if err != nil && !apierrors.IsInvalid(err) {
						t.Errorf("object %d: error %v is not Invalid (422)", i, err)
					}
					// The Go validation of an update sees the stored (defaulted)
					// old object, as the coordinator would.
					if old != nil {
						if g := verdict(goValidateObj(sent, old) == nil); g != c.goVerdict() {
							t.Errorf("object %d: Go validation of the update from the stored object: %v, want %v", i, g, c.goVerdict())
						}
					}
					if c.check != nil && err == nil {
						c.check(t, stored)
					}
					if stored != nil {
						remove(ctx, dc, stored)
					}
				}
			})
		}
	})
}

func why(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func jsonOf(o obj) string {
	b, _ := json.Marshal(o)
	return string(b)
}

// without returns the keys of m but for those in skip, sorted.
func without(m map[string]bool, skip ...string) []string {
	var out []string
	for k := range m {
		if !slices.Contains(skip, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
