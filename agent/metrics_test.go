package agent

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/joiner-dev/joiner/drain"
)

// TestEvictionMetrics: the agent serves Karpenter's
// karpenter_pods_eviction_requests_total (by code, as the coordinator does)
// and karpenter_pods_drained_total (pods evicted, by reason) beside its own
// joiner_agent_evictions_total (by result); a forced delete (code 0) is no
// eviction request and drains no pod in Karpenter's sense.
func TestEvictionMetrics(t *testing.T) {
	m := NewMetrics()
	var o drain.Observer = m
	const forceful = drain.ReasonForceful
	for _, e := range []struct {
		result string
		code   int
		reason string
	}{
		{drain.ResultBlocked, 429, forceful}, {drain.ResultBlocked, 429, forceful}, {drain.ResultEvicted, 200, forceful},
		{drain.ResultGone, 404, forceful}, {drain.ResultError, 500, forceful}, {drain.ResultError, 0, forceful},
		{drain.ResultDeleted, 0, forceful}, {drain.ResultEvicted, 200, "Drifted"},
	} {
		o.Eviction(e.result, e.code, e.reason)
	}
	const want = `# HELP karpenter_pods_drained_total The total number of pods drained during node termination by Karpenter, labeled by reason
# TYPE karpenter_pods_drained_total counter
karpenter_pods_drained_total{reason="Drifted"} 1
karpenter_pods_drained_total{reason="Forceful Termination"} 1
# HELP karpenter_pods_eviction_requests_total The total number of pod eviction requests made by Karpenter, labeled by response code
# TYPE karpenter_pods_eviction_requests_total counter
karpenter_pods_eviction_requests_total{code="200"} 2
karpenter_pods_eviction_requests_total{code="404"} 1
karpenter_pods_eviction_requests_total{code="429"} 2
karpenter_pods_eviction_requests_total{code="500"} 1
# HELP joiner_agent_evictions_total Eviction attempts by result (evicted, blocked, deleted, gone, error).
# TYPE joiner_agent_evictions_total counter
joiner_agent_evictions_total{result="blocked"} 2
joiner_agent_evictions_total{result="deleted"} 1
joiner_agent_evictions_total{result="error"} 2
joiner_agent_evictions_total{result="evicted"} 2
joiner_agent_evictions_total{result="gone"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"karpenter_pods_drained_total", "karpenter_pods_eviction_requests_total", "joiner_agent_evictions_total"); err != nil {
		t.Error(err)
	}
}
