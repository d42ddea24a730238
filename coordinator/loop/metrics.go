package loop

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/internal/telemetry"
)

// Pass metrics under controller-runtime's names, which Karpenter's
// dashboards read: a pass is a reconcile, the loop's Spec.Name the
// controller. Process-wide (every loop counts here); RegisterMetrics
// exports them.
var (
	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_total",
		Help: "Total number of reconciliations per controller"}, []string{"controller", "result"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_errors_total",
		Help: "Total number of reconciliation errors per controller"}, []string{"controller"})
	reconcileTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "controller_runtime_reconcile_time_seconds",
		Help: "Length of time per reconciliation per controller",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
			1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}}, []string{"controller"})
	depth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth",
		Help: "Current depth of workqueue: 1 while a pass of the loop is due and has not started, else 0"}, []string{"name"})
)

// RegisterMetrics registers the pass metrics on reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	return telemetry.Register(reg, "loop", reconciles, reconcileErrors, reconcileTime, depth)
}
