package karpmetrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/drain"
)

// TestEvictionRequests: karpenter_pods_eviction_requests_total is served
// with Karpenter's help and label code (the decimal status); 0 (no eviction
// request answered with a status) is not counted; karpenter_pods_drained_total
// counts the pods evicted by reason.
func TestEvictionRequests(t *testing.T) {
	m, reg := registered(t)
	for _, code := range []int{200, 200, 429, 429, 429, 404, 409, 500, 0} {
		result := drain.ResultBlocked
		if code == 200 {
			result = drain.ResultEvicted
		}
		m.Evictions().Eviction(result, code, "Drifted")
	}
	const want = `# HELP karpenter_pods_eviction_requests_total The total number of pod eviction requests made by Karpenter, labeled by response code
# TYPE karpenter_pods_eviction_requests_total counter
karpenter_pods_eviction_requests_total{code="200"} 2
karpenter_pods_eviction_requests_total{code="404"} 1
karpenter_pods_eviction_requests_total{code="409"} 1
karpenter_pods_eviction_requests_total{code="429"} 3
karpenter_pods_eviction_requests_total{code="500"} 1
# HELP karpenter_pods_drained_total The total number of pods drained during node termination by Karpenter, labeled by reason
# TYPE karpenter_pods_drained_total counter
karpenter_pods_drained_total{reason="Drifted"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_pods_eviction_requests_total", "karpenter_pods_drained_total"); err != nil {
		t.Error(err)
	}
	var none *karpmetrics.Metrics
	none.Evictions().Eviction(drain.ResultEvicted, 200, "Drifted")
}
