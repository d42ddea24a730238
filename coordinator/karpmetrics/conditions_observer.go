package karpmetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

// StatusObserverCache is what the status observer reads (kube.Cache).
type StatusObserverCache interface {
	StatusCache
	Changes() (<-chan struct{}, func())
}

// StatusObserverConfig configures a StatusObserver.
type StatusObserverConfig struct {
	Cache StatusObserverCache
	// Registerer takes the counters and histograms (nil: unregistered).
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
}

// statusEvents are one kind's event metrics, or the generic ones.
type statusEvents struct {
	transitions *prometheus.CounterVec   // type, status, reason
	transition  *prometheus.HistogramVec // type, status (the previous one)
	terminated  *prometheus.HistogramVec // no label of its own
}

// seenObject is what the observer remembers of an object from one pass
// to the next.
type seenObject struct {
	pass    uint64
	extra   []string // the kind's extra label values
	deleted time.Time
	conds   []statusCond
}

// observedKind is one kind's metrics and memory.
type observedKind struct {
	statusKind
	events statusEvents
	seen   map[types.UID]*seenObject
}

// StatusObserver observes what operatorpkg's status controller observes
// when it reconciles an object, by comparing each object with what the
// last pass saw of it (by UID):
//
//   - a condition whose status differs from the one last seen (Unknown
//     when it was not there, or the object was not seen before) counts in
//     operator_<kind>_status_condition_transitions_total{type, status,
//     reason} (its new status and reason), and, when it was seen before,
//     the time it spent in its previous status (the difference of the two
//     lastTransitionTimes) is observed in
//     operator_<kind>_status_condition_transition_seconds{type, status}
//     (the previous status);
//   - an object last seen deleting that is gone is observed in
//     operator_<kind>_termination_duration_seconds (from its
//     deletionTimestamp to the pass that finds it gone).
//
// Every series has the kind's extra labels, as the object last had them;
// the generic names have group and kind instead. Objects gone from the
// cache are forgotten; a term starts and ends with an empty memory, as a
// Karpenter process starts with one (so a new leader counts the
// conditions it finds True or False once, as Karpenter does after a
// restart, and does not observe what was deleted before its term).
type StatusObserver struct {
	cache   StatusObserverCache
	now     func() time.Time
	log     *zap.Logger
	kinds   []*observedKind
	generic statusEvents
	pass    uint64
}

// NewStatusObserver builds the observer and registers its metrics; Run it
// on the leader.
func NewStatusObserver(cfg StatusObserverConfig) (*StatusObserver, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	o := &StatusObserver{cache: cfg.Cache, now: cfg.Now, log: cfg.Log}
	var collectors []prometheus.Collector
	for _, k := range statusKinds() {
		extra := k.extraLabelNames()
		prefix := "operator_" + k.name + "_"
		ok := &observedKind{statusKind: k, seen: map[types.UID]*seenObject{}}
		ok.events = statusEvents{
			transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "status_condition_transitions_total",
				Help: helpConditionTransTotal}, statusConcat([]string{statusLabelType, statusLabelStatus, statusLabelReason}, extra)),
			transition: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + "status_condition_transition_seconds",
				Help: helpConditionTransition, Buckets: k.buckets}, statusConcat([]string{statusLabelType, statusLabelStatus}, extra)),
			terminated: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + "termination_duration_seconds",
				Help: helpTerminationDuration, Buckets: k.buckets}, extra),
		}
		o.kinds = append(o.kinds, ok)
		collectors = append(collectors, ok.events.transitions, ok.events.transition, ok.events.terminated)
	}
	o.generic = statusEvents{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "operator_status_condition_transitions_total",
			Help: helpConditionTransTotal}, []string{statusLabelType, statusLabelStatus, statusLabelReason, statusLabelGroup, statusLabelKind}),
		transition: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "operator_status_condition_transition_seconds",
			Help: helpConditionTransition, Buckets: prometheus.DefBuckets}, []string{statusLabelType, statusLabelStatus, statusLabelGroup, statusLabelKind}),
		terminated: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "operator_termination_duration_seconds",
			Help: helpTerminationDuration, Buckets: prometheus.DefBuckets}, []string{statusLabelGroup, statusLabelKind}),
	}
	collectors = append(collectors, o.generic.transitions, o.generic.transition, o.generic.terminated)
	if err := telemetry.Register(cfg.Registerer, "operator status condition", collectors...); err != nil {
		return nil, err
	}
	return o, nil
}

// Run observes after cache events (at most every second) and every 30 s
// until ctx ends.
func (o *StatusObserver) Run(ctx context.Context) error {
	changes, stop := o.cache.Changes()
	defer stop()
	o.forget()
	defer o.forget()
	return loop.Run(ctx, loop.Spec{Name: "metrics.status", Log: o.log, Changes: changes, MinInterval: time.Second,
		Every: 30 * time.Second, Pass: func(context.Context) error { o.Pass(); return nil }})
}

// forget empties the memory (a term's start and end).
func (o *StatusObserver) forget() {
	for _, k := range o.kinds {
		clear(k.seen)
	}
}

// Pass looks at every object of every kind once.
func (o *StatusObserver) Pass() {
	now := o.now()
	o.pass++
	for _, k := range o.kinds {
		for _, obj := range k.list(o.cache) {
			extra := k.extraLabelValues(obj.labels)
			last := k.seen[obj.uid]
			o.transitions(k, last, obj.conds, extra)
			if last == nil {
				last = &seenObject{}
				k.seen[obj.uid] = last
			}
			*last = seenObject{pass: o.pass, extra: extra, deleted: obj.deleted, conds: obj.conds}
		}
		for uid, last := range k.seen {
			if last.pass == o.pass {
				continue
			}
			delete(k.seen, uid)
			if last.deleted.IsZero() {
				continue // gone without being seen deleting: not observed, as Karpenter
			}
			took := now.Sub(last.deleted).Seconds()
			k.events.terminated.WithLabelValues(last.extra...).Observe(took)
			if k.generic {
				o.generic.terminated.WithLabelValues(k.group, k.kind).Observe(took)
			}
		}
	}
}

// transitions counts and times the conditions of an object whose status
// changed since last seen (nil: not seen before).
func (o *StatusObserver) transitions(k *observedKind, last *seenObject, conds []statusCond, extra []string) {
	for _, c := range conds {
		var prev *statusCond
		if last != nil {
			prev = findCond(last.conds, c.typ)
		}
		prevStatus := string(metav1.ConditionUnknown)
		if prev != nil {
			prevStatus = prev.status
		}
		if c.status == prevStatus {
			continue
		}
		k.events.transitions.WithLabelValues(statusConcat([]string{c.typ, c.status, c.reason}, extra)...).Inc()
		if k.generic {
			o.generic.transitions.WithLabelValues(c.typ, c.status, c.reason, k.group, k.kind).Inc()
		}
		if prev == nil {
			continue
		}
		in := c.since.Sub(prev.since).Seconds()
		k.events.transition.WithLabelValues(statusConcat([]string{prev.typ, prev.status}, extra)...).Observe(in)
		if k.generic {
			o.generic.transition.WithLabelValues(prev.typ, prev.status, k.group, k.kind).Observe(in)
		}
	}
}

func findCond(cs []statusCond, typ string) *statusCond {
	for i := range cs {
		if cs[i].typ == typ {
			return &cs[i]
		}
	}
	return nil
}
