package volumes

import "github.com/prometheus/client_golang/prometheus"

// Metrics exposes the data volumes' states.
type Metrics struct {
	volumes *prometheus.GaugeVec
}

// NewMetrics registers joiner_agent_data_volume{mount,device,state} on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{volumes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "joiner_agent_data_volume",
		Help: "Data volumes the agent saw at its last check: 1 per mount point, labelled with its state (ready, blank, hands-off, missing).",
	}, []string{"mount", "device", "state"})}
	if err := reg.Register(m.volumes); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe replaces the gauge's series with the plan's volumes.
func (m *Metrics) Observe(p Plan) {
	m.volumes.Reset()
	for _, v := range p.Volumes {
		m.volumes.WithLabelValues(v.Target, v.Device, v.State).Set(1)
	}
}
