// Package telemetry registers a subsystem's Prometheus collectors in one
// call, so every subsystem fails the same way on a name registered twice.
package telemetry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs with reg (a nil reg registers nothing: the
// collectors still count, unexported). The error names the subsystem.
func Register(reg prometheus.Registerer, subsystem string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering %s metrics: %w", subsystem, err)
		}
	}
	return nil
}
