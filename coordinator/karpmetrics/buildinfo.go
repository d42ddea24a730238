package karpmetrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterBuildInfo registers karpenter_build_info, Karpenter's constant 1
// labeled by version, goversion, goarch and commit, with the binary's.
func RegisterBuildInfo(reg prometheus.Registerer, version, commit string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_build_info",
		Help: "A metric with a constant '1' value labeled by version from which karpenter was built."},
		[]string{"version", "goversion", "goarch", "commit"})
	g.WithLabelValues(version, runtime.Version(), runtime.GOARCH, commit).Set(1)
	return reg.Register(g)
}
