package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "joiner_test_total", Help: "test"})
	if err := Register(nil, "test", c); err != nil {
		t.Fatalf("nil registerer: %v", err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, "test", c); err != nil {
		t.Fatal(err)
	}
	err := Register(reg, "lifecycle", prometheus.NewCounter(prometheus.CounterOpts{Name: "joiner_test_total", Help: "test"}))
	if err == nil || !strings.Contains(err.Error(), "registering lifecycle metrics") {
		t.Fatalf("duplicate name: got %v, want an error naming the subsystem", err)
	}
}
