// Package manifests turns Kubernetes and Karpenter manifests (multi-document
// YAML) into a scheduler.Input for `joiner plan`: workloads are expanded
// into their pods, DaemonSets into per-node overhead, legacy Karpenter
// objects go through api/convert, and NodePools and EC2NodeClasses are
// defaulted and validated. It is pure: bytes in, input and problems out.
//
// The coordinator feeds the scheduler from informers instead; this package
// is only the offline path.
package manifests

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/convert"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// File is one input stream.
type File struct {
	Name string
	Data []byte
}

// ErrInput wraps every problem with the input documents.
var ErrInput = errors.New("invalid input")

// Result is what the manifests describe.
type Result struct {
	Input *scheduler.Input
	// DefaultNodePool is true when the input had no NodePool and the
	// documented default was used.
	DefaultNodePool bool
	// Warnings are notes that do not block (ignored kinds, dropped legacy
	// fields, defaults applied).
	Warnings []string
}

// DefaultNodePoolName and DefaultNodeClassName name the objects Load adds
// when the input has none.
const (
	DefaultNodePoolName  = "default"
	DefaultNodeClassName = "default"
)

// DefaultNodePool is used when the input has no NodePool: Karpenter's
// getting-started pool (linux, amd64 or arm64, on-demand or spot, c/m/r
// families of generation 3 and later), referencing the default EC2NodeClass.
func DefaultNodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultNodePoolName},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: DefaultNodeClassName},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelOS, Operator: karpv1.OpIn, Values: []string{"linux"}},
				{Key: karpv1.LabelArch, Operator: karpv1.OpIn, Values: []string{"amd64", "arm64"}},
				{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}},
				{Key: karpv1.LabelInstanceCategory, Operator: karpv1.OpIn, Values: []string{"c", "m", "r"}},
				{Key: karpv1.LabelInstanceGeneration, Operator: karpv1.OpGt, Values: []string{"2"}},
			},
		}}},
	}
}

// DefaultNodeClass is used for NodePools whose EC2NodeClass is not in the
// input: AL2023, no kubelet block.
func DefaultNodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}},
	}
}

// ignoredKinds do not affect scheduling; they are skipped with a warning.
var ignoredKinds = map[string]bool{
	"Service": true, "ConfigMap": true, "Secret": true, "Namespace": true, "ServiceAccount": true,
	"PodDisruptionBudget": true, "HorizontalPodAutoscaler": true, "Ingress": true, "Role": true,
	"RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true, "NetworkPolicy": true,
	"PriorityClass": true, "StorageClass": true, "PersistentVolumeClaim": true, "CustomResourceDefinition": true,
}

// DefaultMaxPods is the most pods Load lets the input describe (pending and
// bound, workloads expanded into their replicas) unless Options say
// otherwise: five times Karpenter's largest scheduling benchmark (20 000
// pods) and the 100 000 pods the leader pass is sized for, well under what
// fits in memory. `replicas: 1000000` is an input error, not an OOM kill.
const DefaultMaxPods = 100_000

// Options tune Load.
type Options struct {
	// MaxPods bounds the pods the input may describe (0: DefaultMaxPods).
	// A workload or Pod that would pass it is an input error naming the
	// field and its value, and adds no pod; the check comes before any
	// allocation proportional to the count.
	MaxPods int
}

type loader struct {
	res     Result
	errs    []error
	maxPods int
	pods    int // pods admitted so far (pending and bound)
	pools   []*karpv1.NodePool
	classes map[string]*awsv1.EC2NodeClass
	nodes   []*corev1.Node
	bound   []*corev1.Pod
	pending []*corev1.Pod
	daemons []*corev1.Pod
}

// Load reads the files. It returns the input built from every document it
// could use and one error per document it could not (each wrapping
// ErrInput and naming the file, document and field).
func Load(files []File) (*Result, []error) { return LoadWith(files, Options{}) }

// LoadWith is Load with options.
func LoadWith(files []File, opts Options) (*Result, []error) {
	l := &loader{classes: map[string]*awsv1.EC2NodeClass{}, maxPods: cmp.Or(opts.MaxPods, DefaultMaxPods)}
	warn := func(s string) { l.res.Warnings = append(l.res.Warnings, s) }
	inputs := make([]convert.Input, len(files))
	for i, f := range files {
		inputs[i] = convert.Input{Name: f.Name, Data: f.Data}
	}
	// One bad document must not hide the rest: ConvertAll keeps the
	// documents that converted and names each one that did not.
	r := convert.ConvertAll(inputs, convert.Options{Warn: warn})
	for _, err := range r.Errors {
		l.errs = append(l.errs, fmt.Errorf("%w: %w", ErrInput, err))
	}
	objs := r.Objects
	for _, o := range objs {
		switch {
		case o.NodePool != nil:
			l.addPool(o.NodePool, o.Source)
		case o.EC2NodeClass != nil:
			l.addClass(o.EC2NodeClass, o.Source)
		default:
			if err := l.document(o.Raw, o.Source); err != nil {
				l.errs = append(l.errs, fmt.Errorf("%w: %s: %w", ErrInput, o.Source, err))
			}
		}
	}
	return l.finish(), l.errs
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func (l *loader) document(raw []byte, src string) error {
	var tm typeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	if tm.Kind == "" {
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			return nil
		}
		return fmt.Errorf("no kind")
	}
	strict := func(into any) error {
		if err := yaml.UnmarshalStrict(raw, into); err != nil {
			return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
		return nil
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Pod":
		var p corev1.Pod
		if err := strict(&p); err != nil {
			return err
		}
		defaultNS(&p.ObjectMeta)
		if err := l.admit("Pod", p.ObjectMeta, "", 1); err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			l.bound = append(l.bound, &p)
		} else {
			l.pending = append(l.pending, &p)
		}
	case "apps/v1 Deployment", "apps/v1 ReplicaSet", "apps/v1 StatefulSet":
		// Checked against its own type; read as what the three share.
		if err := strict(replicated[tm.Kind]()); err != nil {
			return err
		}
		var d replicas
		if err := yaml.Unmarshal(raw, &d); err != nil {
			return err
		}
		return l.expand(tm.Kind, d.ObjectMeta, &d.Spec.Template, "spec.replicas", d.count())
	case "batch/v1 Job":
		var j batchv1.Job
		if err := strict(&j); err != nil {
			return err
		}
		field, n := jobPods(&j.Spec)
		return l.expand(tm.Kind, j.ObjectMeta, &j.Spec.Template, "spec."+field, n)
	case "batch/v1 CronJob":
		var j batchv1.CronJob
		if err := strict(&j); err != nil {
			return err
		}
		// one run of the job
		field, n := jobPods(&j.Spec.JobTemplate.Spec)
		return l.expand(tm.Kind, j.ObjectMeta, &j.Spec.JobTemplate.Spec.Template, "spec.jobTemplate.spec."+field, n)
	case "apps/v1 DaemonSet":
		var d appsv1.DaemonSet
		if err := strict(&d); err != nil {
			return err
		}
		p := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		p.Name, p.Namespace = d.Name, d.Namespace
		defaultNS(&p.ObjectMeta)
		l.daemons = append(l.daemons, p)
	case "v1 Node":
		var n corev1.Node
		if err := strict(&n); err != nil {
			return err
		}
		l.nodes = append(l.nodes, &n)
	case "karpenter.sh/v1 NodePool":
		var np karpv1.NodePool
		if err := strict(&np); err != nil {
			return err
		}
		l.addPool(&np, src)
	case "karpenter.k8s.aws/v1 EC2NodeClass":
		var nc awsv1.EC2NodeClass
		if err := strict(&nc); err != nil {
			return err
		}
		l.addClass(&nc, src)
	default:
		if ignoredKinds[tm.Kind] {
			l.res.Warnings = append(l.res.Warnings, fmt.Sprintf("%s: %s %s ignored (does not affect scheduling)", src, tm.APIVersion, tm.Kind))
			return nil
		}
		return fmt.Errorf("unknown kind %s (apiVersion %s)", tm.Kind, tm.APIVersion)
	}
	return nil
}

func stripComments(raw []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			b.Write(line)
		}
	}
	return b.Bytes()
}

func defaultNS(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
}

// replicated makes the types of the kinds whose pods are spec.replicas
// copies of spec.template.
var replicated = map[string]func() any{
	"Deployment":  func() any { return &appsv1.Deployment{} },
	"ReplicaSet":  func() any { return &appsv1.ReplicaSet{} },
	"StatefulSet": func() any { return &appsv1.StatefulSet{} },
}

// replicas is what the replicated kinds share.
type replicas struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas *int32                 `json:"replicas"`
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// count is spec.replicas (1 when unset).
func (r *replicas) count() int {
	if r.Spec.Replicas == nil {
		return 1
	}
	return int(*r.Spec.Replicas)
}

// jobPods returns the pods one run of a job starts at once and the field
// (under the JobSpec) that decides it.
func jobPods(s *batchv1.JobSpec) (field string, n int) {
	field, n = "parallelism", 1
	if s.Parallelism != nil {
		n = int(*s.Parallelism)
	}
	if s.Completions != nil && int(*s.Completions) < n {
		field, n = "completions", int(*s.Completions)
	}
	return field, n
}

// admit counts n more pods of the object kind/meta, whose count comes from
// field (empty for a Pod), against the limit: an error, and nothing
// counted, when they would pass it or n is negative.
func (l *loader) admit(kind string, meta metav1.ObjectMeta, field string, n int) error {
	what := fmt.Sprintf("%s %s/%s", kind, cmp.Or(meta.Namespace, "default"), meta.Name)
	if field != "" {
		what += fmt.Sprintf(": %s %d", field, n)
	}
	switch {
	case n < 0:
		return fmt.Errorf("%s: must not be negative", what)
	case n > l.maxPods:
		return fmt.Errorf("%s: more than the %d pods joiner plan simulates (--max-pods)", what, l.maxPods)
	case n > l.maxPods-l.pods:
		return fmt.Errorf("%s: %d pods with the %d before it, more than the %d pods joiner plan simulates (--max-pods)", what, l.pods+n, l.pods, l.maxPods)
	}
	l.pods += n
	return nil
}

// expand makes n pods named <owner>-<i> from a template, once admit let
// them in.
func (l *loader) expand(kind string, owner metav1.ObjectMeta, t *corev1.PodTemplateSpec, field string, n int) error {
	if err := l.admit(kind, owner, field, n); err != nil {
		return err
	}
	ns := cmp.Or(owner.Namespace, "default")
	l.pending = slices.Grow(l.pending, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: t.Spec}
		p.Name, p.Namespace = owner.Name+"-"+strconv.Itoa(i), ns
		l.pending = append(l.pending, p)
	}
	return nil
}

// validDefaulted validates obj (a NodePool or an EC2NodeClass of src) as
// the API server would, then defaults it; false, with its first error
// recorded, when it is invalid.
func (l *loader) validDefaulted(obj interface{ SetDefaults() }, kind, name, src string) bool {
	if errs := convert.ValidateObject(obj); len(errs) > 0 {
		l.errs = append(l.errs, fmt.Errorf("%w: %s: %s %s: %w", ErrInput, src, kind, name, errs[0]))
		return false
	}
	obj.SetDefaults()
	return true
}

func (l *loader) addPool(np *karpv1.NodePool, src string) {
	if !l.validDefaulted(np, "NodePool", np.Name, src) {
		return
	}
	for _, o := range l.pools {
		if o.Name == np.Name {
			l.errs = append(l.errs, fmt.Errorf("%w: %s: NodePool %s defined twice; the first one is used", ErrInput, src, np.Name))
			return
		}
	}
	l.pools = append(l.pools, np)
}

func (l *loader) addClass(nc *awsv1.EC2NodeClass, src string) {
	if !l.validDefaulted(nc, "EC2NodeClass", nc.Name, src) {
		return
	}
	if l.classes[nc.Name] != nil {
		l.errs = append(l.errs, fmt.Errorf("%w: %s: EC2NodeClass %s defined twice; the first one is used", ErrInput, src, nc.Name))
		return
	}
	l.classes[nc.Name] = nc
}

func (l *loader) finish() *Result {
	in := &scheduler.Input{NodeClasses: map[string]*awsv1.EC2NodeClass{}, InstanceTypes: map[string][]*catalog.InstanceType{}}
	if len(l.pools) == 0 {
		l.pools = []*karpv1.NodePool{DefaultNodePool()}
		l.res.DefaultNodePool = true
		l.res.Warnings = append(l.res.Warnings, "no NodePool in the input: using the default NodePool (linux, amd64/arm64, on-demand/spot, c/m/r generation > 2)")
	}
	slices.SortStableFunc(l.pools, func(a, b *karpv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	in.NodePools = l.pools
	for _, np := range l.pools {
		name := DefaultNodeClassName
		if np.Spec.Template.Spec.NodeClassRef != nil {
			name = np.Spec.Template.Spec.NodeClassRef.Name
		}
		nc := l.classes[name]
		if nc == nil {
			nc = DefaultNodeClass(name)
			l.classes[name] = nc
			l.res.Warnings = append(l.res.Warnings, fmt.Sprintf("NodePool %s: EC2NodeClass %q not in the input: using an AL2023 default", np.Name, name))
		}
		in.NodeClasses[name] = nc
		if in.InstanceTypes[name] == nil {
			in.InstanceTypes[name] = catalog.InstanceTypes(catalog.Options{NodeClass: nc})
		}
	}
	byNode := map[string]*scheduler.Node{}
	for _, n := range l.nodes {
		sn := &scheduler.Node{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable}
		if sn.Allocatable == nil {
			sn.Allocatable = sn.Capacity
		}
		byNode[n.Name] = sn
		in.Nodes = append(in.Nodes, sn)
	}
	for _, p := range l.bound {
		if n := byNode[p.Spec.NodeName]; n != nil {
			n.Pods = append(n.Pods, p)
			continue
		}
		l.res.Warnings = append(l.res.Warnings, fmt.Sprintf("pod %s/%s is bound to node %s which is not in the input: planned as pending", p.Namespace, p.Name, p.Spec.NodeName))
		p.Spec.NodeName = ""
		l.pending = append(l.pending, p)
	}
	in.Pods = l.pending
	in.DaemonSetPods = l.daemons
	l.res.Input = in
	return &l.res
}
