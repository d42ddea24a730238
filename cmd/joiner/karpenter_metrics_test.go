package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/loop"
)

// describer is a Registerer that keeps the names of what is registered on
// it (vectors have none of their series before their first event).
type describer map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d describer) Unregister(prometheus.Collector) bool { return true }

// TestKarpenterMetricNames: every metric on Karpenter v1.14.1's reference
// page (testdata/karpenter-v1.14.1-metrics.txt, one name a line) is served,
// or listed there with the reason it is not; README.md lists the same
// exceptions.
func TestKarpenterMetricNames(t *testing.T) {
	served := describer{}
	ms, err := collectMetrics(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		served[m.name] = true
	}
	// Names made at run time: the operator_* families of each kind, and
	// the loops' controller-runtime and workqueue names.
	served.MustRegister(karpmetrics.NewStatusCollector(karpmetrics.StatusCollectorConfig{}))
	if _, err := karpmetrics.NewStatusObserver(karpmetrics.StatusObserverConfig{Registerer: served}); err != nil {
		t.Fatal(err)
	}
	if err := loop.RegisterMetrics(served); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open("testdata/karpenter-v1.14.1-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names++
		name, why, _ := strings.Cut(line, " ")
		switch why = strings.TrimSpace(why); {
		case why == "" && !served[name]:
			t.Errorf("%s: Karpenter serves it, Joiner does not (serve it, or list it with the reason in testdata and README.md)", name)
		case why != "" && served[name]:
			t.Errorf("%s: listed as not served (%s) but served", name, why)
		case why != "" && !strings.Contains(string(readme), why):
			t.Errorf("%s: README.md does not say why it is not served (%q)", name, why)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if names < 100 {
		t.Fatalf("%d names in testdata: want Karpenter's whole reference page", names)
	}
}
