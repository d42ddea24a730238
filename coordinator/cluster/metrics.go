package cluster

import (
	"fmt"
	"sync"

	gometrics "github.com/hashicorp/go-metrics"
	gometricsprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

var exportOnce sync.Once

// ExportMetrics sends what raft and memberlist measure (through
// hashicorp/go-metrics' process-wide sink) to reg, named
// joiner_raft_* and joiner_memberlist_* (joiner_raft_commitTime,
// joiner_raft_state_leader, joiner_memberlist_gossip, ...; timers are
// summaries in milliseconds; raft's peer count is left to the API's
// joiner_raft_peers). A series not updated for a minute is
// dropped. The sink is process-wide: only the first call exports; later
// calls return nil.
func ExportMetrics(reg prometheus.Registerer) error {
	var err error
	exportOnce.Do(func() { err = exportMetrics(reg) })
	return err
}

func exportMetrics(reg prometheus.Registerer) error {
	sink, err := gometricsprom.NewPrometheusSinkFrom(gometricsprom.PrometheusOpts{
		Expiration: gometricsprom.DefaultPrometheusOpts.Expiration,
		Registerer: reg,
		Name:       "go_metrics_sink", // its dummy descriptor: not a joiner_* series
	})
	if err != nil {
		return fmt.Errorf("registering the raft and memberlist metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("joiner")
	cfg.EnableHostname = false       // no host name in metric names
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	// joiner_raft_peers{suffrage} is the API's (coordinator/api): raft's
	// own peer count would clash with it.
	cfg.BlockedPrefixes = []string{"joiner.raft.peers"}
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("setting the raft and memberlist metrics sink: %w", err)
	}
	return nil
}
