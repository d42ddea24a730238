package karpmetrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Karpenter v1.14.1 runs awslabs/operatorpkg's status controller once per
// kind it manages; each serves operator_<kind>_status_condition_* and
// operator_<kind>_termination_* and, where Karpenter asks for them
// (EmitDeprecatedMetrics: NodeClaim, NodePool, EC2NodeClass, not Node), the
// same values under the generic names operator_status_condition_* and
// operator_termination_*, labelled by the object's kind and API group in
// place of the kind's extra labels. This file is the table of kinds, what
// is read of an object, and the scrape-time gauges (StatusCollector);
// conditions_observer.go observes transitions and terminations.

// operatorpkg's label names.
const (
	statusLabelNamespace = "namespace"
	statusLabelName      = "name"
	statusLabelType      = "type"
	statusLabelStatus    = "status"
	statusLabelReason    = "reason"
	statusLabelGroup     = "group"
	statusLabelKind      = "kind"
)

// StatusCache is what the status condition metrics read (kube.Cache).
type StatusCache interface {
	NodeClaims() []*karpv1.NodeClaim
	NodePools() []*karpv1.NodePool
	Nodes() []*corev1.Node
	NodeClasses() []*awsv1.EC2NodeClass
}

// statusCond is one status condition as the metrics see it.
type statusCond struct {
	typ, status, reason string
	since               time.Time // lastTransitionTime
}

// statusObject is what the metrics read of one object.
type statusObject struct {
	uid             types.UID
	namespace, name string
	labels          map[string]string
	deleted         time.Time // deletionTimestamp, zero when not deleting
	conds           []statusCond
}

// statusKind is one kind's status controller as Karpenter configures it.
type statusKind struct {
	// name is the lower-case kind in the metric names; kind and group are
	// the generic metrics' kind and group labels.
	name, kind, group string
	// generic: the values are also served under the generic (deprecated)
	// names.
	generic bool
	// labelKeys are the object labels that become metric labels (named
	// by promLabelOf) on every per-kind metric (Karpenter's WithLabels).
	labelKeys []string
	// buckets are the per-kind histograms' buckets; the generic ones use
	// Prometheus' default buckets.
	buckets []float64
	list    func(StatusCache) []statusObject
}

// statusKinds is the table of the kinds Joiner manages, as Karpenter
// v1.14.1 registers their status controllers (kubernetes-sigs/karpenter
// pkg/controllers/controllers.go, aws/karpenter-provider-aws
// pkg/controllers/controllers.go): transition and termination histograms
// in 0.5 s to 8192 s doubling buckets but for EC2NodeClass (defaults);
// NodeClaims and Nodes labelled by their class and pool labels, Nodes also
// by karpenter.sh/initialized.
func statusKinds() []statusKind {
	doubling := prometheus.ExponentialBuckets(0.5, 2, 15)
	return []statusKind{
		{name: "nodeclaim", kind: "NodeClaim", group: karpv1.Group, generic: true, buckets: doubling,
			labelKeys: []string{karpv1.LabelNodeClass, karpv1.LabelNodePool},
			list: func(c StatusCache) []statusObject {
				return statusObjects(c.NodeClaims(), func(o *karpv1.NodeClaim) []metav1.Condition { return o.Status.Conditions })
			}},
		{name: "nodepool", kind: "NodePool", group: karpv1.Group, generic: true, buckets: doubling,
			list: func(c StatusCache) []statusObject {
				return statusObjects(c.NodePools(), func(o *karpv1.NodePool) []metav1.Condition { return o.Status.Conditions })
			}},
		{name: "node", kind: "Node", buckets: doubling,
			labelKeys: []string{karpv1.LabelNodeClass, karpv1.LabelNodePool, karpv1.LabelInitialized},
			list: func(c StatusCache) []statusObject {
				nodes := c.Nodes()
				out := make([]statusObject, 0, len(nodes))
				for _, n := range nodes {
					o := newStatusObject(n)
					o.conds = make([]statusCond, 0, len(n.Status.Conditions))
					for _, nc := range n.Status.Conditions {
						o.conds = appendCond(o.conds, statusCond{typ: string(nc.Type), status: string(nc.Status), reason: nc.Reason,
							since: nc.LastTransitionTime.Time})
					}
					out = append(out, o)
				}
				return out
			}},
		{name: "ec2nodeclass", kind: "EC2NodeClass", group: karpv1.AWSGroup, generic: true, buckets: prometheus.DefBuckets,
			list: func(c StatusCache) []statusObject {
				return statusObjects(c.NodeClasses(), func(o *awsv1.EC2NodeClass) []metav1.Condition { return o.Status.Conditions })
			}},
	}
}

// statusObjects reads the objects of a kind whose conditions are
// metav1.Conditions.
func statusObjects[T metav1.Object](list []T, conditions func(T) []metav1.Condition) []statusObject {
	out := make([]statusObject, 0, len(list))
	for _, obj := range list {
		o := newStatusObject(obj)
		cs := conditions(obj)
		o.conds = make([]statusCond, 0, len(cs))
		for _, c := range cs {
			o.conds = appendCond(o.conds, statusCond{typ: c.Type, status: string(c.Status), reason: c.Reason, since: c.LastTransitionTime.Time})
		}
		out = append(out, o)
	}
	return out
}

func newStatusObject(obj metav1.Object) statusObject {
	o := statusObject{uid: obj.GetUID(), namespace: obj.GetNamespace(), name: obj.GetName(), labels: obj.GetLabels()}
	if dt := obj.GetDeletionTimestamp(); dt != nil {
		o.deleted = dt.Time
	}
	return o
}

// appendCond appends c unless a condition of its type is there already
// (conditions are a list keyed by type; the first one counts).
func appendCond(cs []statusCond, c statusCond) []statusCond {
	for _, have := range cs {
		if have.typ == c.typ {
			return cs
		}
	}
	return append(cs, c)
}

// promLabelOf is the metric label name of a Kubernetes label key, as
// operatorpkg writes it: slashes, dots and dashes become underscores.
func promLabelOf(key string) string {
	return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(key)
}

// extraLabelNames are the kind's label names from its label keys.
func (k statusKind) extraLabelNames() []string {
	out := make([]string, len(k.labelKeys))
	for i, key := range k.labelKeys {
		out[i] = promLabelOf(key)
	}
	return out
}

// extraLabelValues are an object's values of the kind's label keys.
func (k statusKind) extraLabelValues(labels map[string]string) []string {
	out := make([]string, len(k.labelKeys))
	for i, key := range k.labelKeys {
		out[i] = labels[key]
	}
	return out
}

// Help texts, Karpenter's.
const (
	helpConditionCount      = "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0"
	helpConditionCurrent    = "The current amount of time in seconds that a status condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes"
	helpConditionTransition = "The amount of time a condition was in a given state before transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes"
	helpConditionTransTotal = "The count of transitions of a given object, type and status."
	helpTerminationCurrent  = "The current amount of time in seconds that an object has been in terminating state."
	helpTerminationDuration = "The amount of time taken by an object to terminate completely."
)

// StatusCollectorConfig configures a StatusCollector.
type StatusCollectorConfig struct {
	Cache StatusCache
	// Leading says whether this replica leads (Karpenter's status
	// controllers run on the elected replica); nil: always.
	Leading func() bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// statusGauges are one kind's gauges, or the generic ones.
type statusGauges struct {
	count, current, terminating *prometheus.Desc
}

// StatusCollector derives the status condition gauges from the cache at
// scrape time: operator_<kind>_status_condition_count (1 per object and
// condition, labelled namespace, name, type, status, reason and the kind's
// extra labels), operator_<kind>_status_condition_current_status_seconds
// (time since the condition's lastTransitionTime, same labels) and
// operator_<kind>_termination_current_time_seconds (time since an
// object's deletionTimestamp while it is deleted; namespace, name and the
// extra labels), plus the generic names for the kinds that have them.
// Karpenter sets these when it reconciles an object (on every change and
// every 10 s); at scrape time they are current.
type StatusCollector struct {
	cfg     StatusCollectorConfig
	kinds   []statusKind
	perKind []statusGauges
	generic statusGauges
}

// NewStatusCollector returns a StatusCollector; register it on the
// registry /metrics serves.
func NewStatusCollector(cfg StatusCollectorConfig) *StatusCollector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &StatusCollector{cfg: cfg, kinds: statusKinds()}
	condLabels := []string{statusLabelNamespace, statusLabelName, statusLabelType, statusLabelStatus, statusLabelReason}
	termLabels := []string{statusLabelNamespace, statusLabelName}
	for _, k := range c.kinds {
		extra := k.extraLabelNames()
		prefix := "operator_" + k.name + "_"
		c.perKind = append(c.perKind, statusGauges{
			count:       prometheus.NewDesc(prefix+"status_condition_count", helpConditionCount, statusConcat(condLabels, extra), nil),
			current:     prometheus.NewDesc(prefix+"status_condition_current_status_seconds", helpConditionCurrent, statusConcat(condLabels, extra), nil),
			terminating: prometheus.NewDesc(prefix+"termination_current_time_seconds", helpTerminationCurrent, statusConcat(termLabels, extra), nil),
		})
	}
	kindLabels := []string{statusLabelGroup, statusLabelKind}
	c.generic = statusGauges{
		count:       prometheus.NewDesc("operator_status_condition_count", helpConditionCount, statusConcat(condLabels, kindLabels), nil),
		current:     prometheus.NewDesc("operator_status_condition_current_status_seconds", helpConditionCurrent, statusConcat(condLabels, kindLabels), nil),
		terminating: prometheus.NewDesc("operator_termination_current_time_seconds", helpTerminationCurrent, statusConcat(termLabels, kindLabels), nil),
	}
	return c
}

// statusConcat is a new slice of a then b.
func statusConcat(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

func statusGauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Describe implements prometheus.Collector.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range append(c.perKind, c.generic) {
		ch <- g.count
		ch <- g.current
		ch <- g.terminating
	}
}

// Collect implements prometheus.Collector.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	if c.cfg.Leading != nil && !c.cfg.Leading() {
		return
	}
	now := c.cfg.Now()
	for i, k := range c.kinds {
		g := c.perKind[i]
		for _, o := range k.list(c.cfg.Cache) {
			extra := k.extraLabelValues(o.labels)
			for _, cond := range o.conds {
				labels := []string{o.namespace, o.name, cond.typ, cond.status, cond.reason}
				age := now.Sub(cond.since).Seconds()
				statusGauge(ch, g.count, 1, statusConcat(labels, extra)...)
				statusGauge(ch, g.current, age, statusConcat(labels, extra)...)
				if k.generic {
					statusGauge(ch, c.generic.count, 1, statusConcat(labels, []string{k.group, k.kind})...)
					statusGauge(ch, c.generic.current, age, statusConcat(labels, []string{k.group, k.kind})...)
				}
			}
			if o.deleted.IsZero() {
				continue
			}
			age := now.Sub(o.deleted).Seconds()
			statusGauge(ch, g.terminating, age, statusConcat([]string{o.namespace, o.name}, extra)...)
			if k.generic {
				statusGauge(ch, c.generic.terminating, age, o.namespace, o.name, k.group, k.kind)
			}
		}
	}
}
