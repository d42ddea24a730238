// Package convert turns legacy Karpenter manifests into the v1 API Joiner
// serves, as Karpenter's own tools do: karpenter-convert (v0.32) takes
// karpenter.sh/v1alpha5 Provisioner and karpenter.k8s.aws/v1alpha1
// AWSNodeTemplate to v1beta1, and Karpenter v1.0's conversion webhooks take
// karpenter.sh/v1beta1 NodePool and NodeClaim and karpenter.k8s.aws/v1beta1
// EC2NodeClass to v1. Where those tools read a value the API server defaulted
// (a v1beta1 CRD default), the conversion writes that default.
//
// Every field with a v1 home is mapped; every field without one is dropped and
// reported through the warn callback with its path and the reason. Documents
// that are not legacy Karpenter objects pass through byte for byte. A document
// that cannot be converted is reported with its position, kind, name, field
// and value, and the others are still converted. The conversion is pure and
// deterministic: same input, same output.
package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
	awsv1beta1 "github.com/joiner-dev/joiner/api/legacy/aws/v1beta1"
	v1alpha5 "github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
	corev1beta1 "github.com/joiner-dev/joiner/api/legacy/core/v1beta1"
)

// RolePlaceholder is the spec.role karpenter-convert writes for every
// converted AWSNodeTemplate, to be substituted (envsubst) with the node role.
// Here it is written only for a legacy node class that names neither an
// instance profile nor a role, unless Options give one.
const RolePlaceholder = "$KARPENTER_NODE_ROLE"

// Options tune a conversion.
type Options struct {
	// Warn receives each warning: a field dropped, moved or filled in.
	// May be nil.
	Warn func(string)
	// DefaultRole is written as spec.role of a legacy node class that names
	// neither an instance profile nor a role (v1alpha1 fell back to the
	// aws.defaultInstanceProfile setting). Empty: RolePlaceholder.
	DefaultRole string
	// DefaultInstanceProfile is written as spec.instanceProfile of such a
	// class instead. At most one of the two may be set.
	DefaultInstanceProfile string
	// IgnoreDefaults leaves out the requirements the v1alpha5 AWS webhook
	// added to a Provisioner lacking them (karpenter-convert
	// --ignore-defaults).
	IgnoreDefaults bool
}

// Object is one document of the converted stream: either passed through
// (Raw) or a v1 object produced from a legacy one (exactly one of NodePool,
// EC2NodeClass, NodeClaim).
type Object struct {
	// Raw is the input document's bytes, for documents passed through.
	Raw []byte
	// NodePool is a converted karpenter.sh/v1 NodePool.
	NodePool *karpv1.NodePool
	// EC2NodeClass is a converted karpenter.k8s.aws/v1 EC2NodeClass.
	EC2NodeClass *awsv1.EC2NodeClass
	// NodeClaim is a converted karpenter.sh/v1 NodeClaim.
	NodeClaim *karpv1.NodeClaim
	// Source names the input document, e.g. `document 2 (Provisioner default)`.
	Source string

	where, what string // Source's parts, for errors found later
	// kubelet is the kubelet block of a converted legacy pool, which moves
	// to the EC2NodeClass it references; kubeletPath is its field.
	kubelet     *awsv1.KubeletConfiguration
	kubeletPath string
}

// Converted reports whether o was produced by conversion (not passed through).
func (o Object) Converted() bool {
	return o.NodePool != nil || o.EC2NodeClass != nil || o.NodeClaim != nil
}

// converted returns the converted object, its kind and name; nil for a
// passed-through document.
func (o Object) converted() (obj any, kind, name string) {
	switch {
	case o.NodePool != nil:
		return o.NodePool, "NodePool", o.NodePool.Name
	case o.EC2NodeClass != nil:
		return o.EC2NodeClass, "EC2NodeClass", o.EC2NodeClass.Name
	case o.NodeClaim != nil:
		return o.NodeClaim, "NodeClaim", o.NodeClaim.Name
	}
	return nil, "", ""
}

// fail wraps err as the error of o's document.
func (o Object) fail(err error) error {
	if o.where == "" && o.what == "" {
		return &DocumentError{Where: o.Source, Err: err}
	}
	return &DocumentError{Where: o.where, What: o.what, Err: err}
}

// Input is one named YAML stream (a file, or "-" for stdin).
type Input struct {
	// Name prefixes the document positions in errors; may be empty.
	Name string
	Data []byte
}

// Result is the outcome of a conversion.
type Result struct {
	// Objects are the output documents of every input document that
	// converted (or passed through), in input order.
	Objects []Object
	// Errors has one *DocumentError per input document (or input) that did
	// not convert; none of its objects is in Objects.
	Errors []error
}

// Err joins the errors; nil when every document converted.
func (r Result) Err() error { return errors.Join(r.Errors...) }

// Convert converts a multi-document YAML stream: legacy Karpenter documents
// are replaced by their v1 documents, everything else passes through
// unchanged. Dropped fields are reported through warn (which may be nil).
// On error it returns the output of the documents that converted.
func Convert(in []byte, warn func(string)) ([]byte, error) {
	r := ConvertAll([]Input{{Data: in}}, Options{Warn: warn})
	out, errs := EncodeAs(r.Objects, FormatYAML)
	return out, errors.Join(append(r.Errors, errs...)...)
}

// ConvertDocuments is Convert without the final encoding: it returns the
// output documents in order, converted ones as typed v1 objects.
func ConvertDocuments(in []byte, warn func(string)) ([]Object, error) {
	return ConvertInputs([]Input{{Data: in}}, warn)
}

// ConvertInputs is ConvertAll with default options, its errors joined. On
// error it also returns the objects of the documents that converted.
func ConvertInputs(inputs []Input, warn func(string)) ([]Object, error) {
	r := ConvertAll(inputs, Options{Warn: warn})
	return r.Objects, r.Err()
}

// ConvertAll converts several streams as one: a NodePool in one file and
// the EC2NodeClass it references in another are handled together (kubelet
// blocks move across). A document that does not convert is left out of the
// result and reported, naming the input and the document; an input that is
// not UTF-8 is left out whole.
func ConvertAll(inputs []Input, opts Options) Result {
	if opts.DefaultRole != "" && opts.DefaultInstanceProfile != "" {
		return Result{Errors: []error{errors.New("a default role and a default instance profile are mutually exclusive (v1 takes one of spec.role and spec.instanceProfile)")}}
	}
	c := &converter{opts: opts, warn: opts.Warn}
	if c.warn == nil {
		c.warn = func(string) {}
	}
	for _, in := range inputs {
		c.input = in.Name
		docs := splitDocuments(in.Data)
		if err := c.checkUTF8(in.Data, docs); err != nil {
			c.errs = append(c.errs, &DocumentError{Where: in.Name, Err: err})
			continue
		}
		for _, d := range docs {
			c.document(d)
		}
	}
	c.finish()
	return Result{Objects: c.out, Errors: c.errs}
}

// converter carries the state of one stream's conversion.
type converter struct {
	opts  Options
	warn  func(string)
	input string // name of the input being read
	out   []Object
	errs  []error
}

// warnf reports a dropped or changed field of object `what` ("Provisioner x").
func (c *converter) warnf(what, format string, args ...any) {
	c.warn(what + ": " + fmt.Sprintf(format, args...))
}

// failf records the error of a document (what may be empty).
func (c *converter) failf(where, what string, err error) {
	c.errs = append(c.errs, &DocumentError{Where: where, What: what, Err: err})
}

// drop removes every object of a document's source from the output, after
// a later step found an error in one of them.
func (c *converter) drop(source string) {
	kept := c.out[:0]
	for _, o := range c.out {
		if o.Source != source {
			kept = append(kept, o)
		}
	}
	c.out = kept
}

// pass appends a document passed through unchanged.
func (c *converter) pass(raw []byte, where string) {
	c.out = append(c.out, Object{Raw: raw, Source: where, where: where})
}

// typeMeta is what is read first from every document.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// what names the object tm describes, e.g. "Provisioner default".
func (tm typeMeta) what() string {
	return strings.TrimSpace(tm.Kind + " " + tm.Metadata.Name)
}

// where names document d of the input being read, as errors do.
func (c *converter) where(d document) string {
	w := fmt.Sprintf("document %d (line %d)", d.index, d.line)
	if c.input != "" {
		w = c.input + ": " + w
	}
	return w
}

func (c *converter) document(d document) {
	where := c.where(d)
	if onlyComments(d.raw) {
		c.pass(d.raw, where)
		return
	}
	j, err := yaml.YAMLToJSONStrict(d.raw)
	if err != nil {
		c.failf(where, "", yamlError(err, d.line))
		return
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || j[0] != '{' {
		// Not an object (a scalar or a list): not a Kubernetes manifest.
		c.pass(d.raw, where)
		return
	}
	var tm typeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		// apiVersion/kind/name of the wrong type: only legacy kinds matter.
		c.pass(d.raw, where)
		return
	}
	if isList(tm) {
		c.list(d, where, j)
		return
	}
	objs, err := c.object(where, tm, j)
	switch {
	case err != nil:
		c.failf(where, tm.what(), err)
	case objs == nil:
		c.pass(d.raw, where)
	default:
		c.out = append(c.out, objs...)
	}
}

// isList reports whether tm names a v1 List.
func isList(tm typeMeta) bool { return tm.APIVersion == "v1" && tm.Kind == "List" }

// isLegacy reports whether tm names a kind this package converts.
func isLegacy(tm typeMeta) bool {
	switch {
	case tm.APIVersion == v1alpha5.APIVersion && tm.Kind == v1alpha5.Kind,
		tm.APIVersion == awsv1alpha1.APIVersion && tm.Kind == awsv1alpha1.Kind,
		tm.APIVersion == corev1beta1.APIVersion && tm.Kind == corev1beta1.KindNodePool,
		tm.APIVersion == corev1beta1.APIVersion && tm.Kind == corev1beta1.KindNodeClaim,
		tm.APIVersion == awsv1beta1.APIVersion && tm.Kind == awsv1beta1.Kind:
		return true
	}
	return false
}

// object converts one legacy object; nil means pass through unchanged. Its
// errors name the field; the caller adds the document and the object.
func (c *converter) object(where string, tm typeMeta, j []byte) ([]Object, error) {
	if !isLegacy(tm) {
		group, version, _ := strings.Cut(tm.APIVersion, "/")
		if (group == karpv1.Group || group == awsv1.Group) && version != "v1" {
			c.warnf(tm.what(), "%s %s is not converted (no v1 manifest equivalent); passed through unchanged", tm.APIVersion, tm.Kind)
		}
		return nil, nil
	}
	if tm.Metadata.Name == "" {
		return nil, fmt.Errorf("%w: metadata.name is required", ErrMalformed)
	}
	what := tm.what()
	objs, err := c.legacy(what, tm, j)
	if err != nil {
		return nil, err
	}
	for i := range objs {
		objs[i].Source = fmt.Sprintf("%s (%s)", where, what)
		objs[i].where, objs[i].what = where, what
	}
	return objs, nil
}

// legacy decodes and converts a legacy object of kind tm.
func (c *converter) legacy(what string, tm typeMeta, j []byte) ([]Object, error) {
	switch {
	case tm.APIVersion == v1alpha5.APIVersion:
		return convertAs(c, what, j, c.provisioner)
	case tm.APIVersion == awsv1alpha1.APIVersion:
		return classObjects(convertAs(c, what, j, c.awsNodeTemplate))
	case tm.Kind == corev1beta1.KindNodePool:
		return convertAs(c, what, j, c.nodePoolV1beta1)
	case tm.Kind == corev1beta1.KindNodeClaim:
		nc, err := convertAs(c, what, j, c.nodeClaimV1beta1)
		if err != nil {
			return nil, err
		}
		return []Object{{NodeClaim: nc}}, nil
	default:
		return classObjects(convertAs(c, what, j, c.ec2NodeClassV1beta1))
	}
}

// convertAs decodes j as a T and converts it with conv.
func convertAs[T, O any](c *converter, what string, j []byte, conv func(string, *T) (O, error)) (O, error) {
	var in T
	if err := c.decode(what, j, &in); err != nil {
		var none O
		return none, err
	}
	return conv(what, &in)
}

// classObjects is the converted EC2NodeClass as the objects of its document.
func classObjects(nc *awsv1.EC2NodeClass, err error) ([]Object, error) {
	if err != nil {
		return nil, err
	}
	return []Object{{EC2NodeClass: nc}}, nil
}

func yamlToJSON(raw []byte) ([]byte, error) { return yaml.YAMLToJSON(raw) }
