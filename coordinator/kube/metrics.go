package kube

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
)

var (
	clientRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_kube_client_requests_total",
		Help: "Kubernetes API requests this process sent, by verb and HTTP code (client-go's request results)."}, []string{"verb", "code"})
	registerHooks sync.Once
)

// requestResult adapts client-go's request-result hook to the counter.
type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, _ string) {
	clientRequests.WithLabelValues(strings.ToUpper(method), code).Inc()
}

// RegisterClientMetrics counts every request of the process's client-go
// clients in joiner_kube_client_requests_total and registers it on reg.
// client-go's hooks are process-wide and set once.
func RegisterClientMetrics(reg prometheus.Registerer) error {
	registerHooks.Do(func() { metrics.Register(metrics.RegisterOpts{RequestResult: requestResult{}}) })
	return reg.Register(clientRequests)
}
