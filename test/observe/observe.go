// Package observe reads what the code under test recorded: the Events a
// record.FakeRecorder holds and the values of Prometheus collectors. Test
// code only.
package observe

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/record"

	"github.com/joiner-dev/joiner/cloud"
)

// Events takes every Event rec holds now, oldest first.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// EventsText is Events joined by newlines.
func EventsText(rec *record.FakeRecorder) string {
	return strings.Join(Events(rec), "\n")
}

// Count sums what c collects: counter values and histogram sample counts.
func Count(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Histogram != nil:
			total += float64(d.Histogram.GetSampleCount())
		case d.Gauge != nil:
			total += d.Gauge.GetValue()
		}
	}
	return total
}

// Series are the series of name in g whose labels include want (nil: any
// labels).
func Series(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found []*dto.Metric
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			found = append(found, m)
		}
	}
	return found
}

// Sample is the value of the one series of name in g whose labels include
// want (nil: any labels): a gauge's or counter's value, a histogram's or
// summary's sample count. ok is false when there is none; the test fails
// when several match.
func Sample(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) (value float64, ok bool) {
	t.Helper()
	found := Series(t, g, name, want)
	switch len(found) {
	case 0:
		return 0, false
	case 1:
	default:
		t.Fatalf("%s%v: %d series, want 1", name, want, len(found))
	}
	m := found[0]
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount()), true
	}
	t.Fatalf("%s: unexpected metric type", name)
	return 0, false
}

// Terminations is a cloud that only records the instances it is asked to
// terminate (the Terminate and Get methods the termination controller
// calls).
type Terminations struct {
	mu    sync.Mutex
	calls []string
}

// Terminate records id.
func (c *Terminations) Terminate(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, id)
	return nil
}

// Get reports an instance terminated once it was asked to terminate it,
// running before.
func (c *Terminations) Get(_ context.Context, id string) (cloud.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.calls, id) {
		return cloud.Instance{ID: id, State: "terminated"}, nil
	}
	return cloud.Instance{ID: id, State: "running"}, nil
}

// IDs lists the terminated instances in call order.
func (c *Terminations) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}
