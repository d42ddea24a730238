package aws_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/test/fakeclock"
)

// rewriteInstanceTypes serves s, passing DescribeInstanceTypes answers
// through edit.
func rewriteInstanceTypes(s *sim.Sim, edit func([]byte) []byte) http.Handler {
	h := s.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") != "DescribeInstanceTypes" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(edit(rec.Body.Bytes()))
	})
}

// TestInstanceTypeHardwareLabelsFromEC2: the provider labels its types
// with what DescribeInstanceTypes says of processor, EBS and encryption in
// transit (Karpenter's computeRequirements), not with the catalogue's
// model of them: here EC2 says every type is AMD at 2.9 GHz, without
// EBS-optimized info and without encryption in transit.
func TestInstanceTypeHardwareLabelsFromEC2(t *testing.T) {
	s := sim.New(sim.Options{Config: sim.DefaultConfig()})
	edit := func(b []byte) []byte {
		b = regexp.MustCompile(`<manufacturer>[^<]*</manufacturer>`).ReplaceAll(b, []byte("<manufacturer>AMD</manufacturer>"))
		b = regexp.MustCompile(`<sustainedClockSpeedInGhz>[^<]*</sustainedClockSpeedInGhz>`).ReplaceAll(b, []byte("<sustainedClockSpeedInGhz>2.9</sustainedClockSpeedInGhz>"))
		b = regexp.MustCompile(`<ebsOptimizedInfo>.*?</ebsOptimizedInfo>`).ReplaceAll(b, nil)
		return regexp.MustCompile(`<encryptionInTransitSupported>true</`).ReplaceAll(b, []byte("<encryptionInTransitSupported>false</"))
	}
	srv := httptest.NewServer(rewriteInstanceTypes(s, edit))
	t.Cleanup(srv.Close)
	e := &env{sim: s, clock: fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), endpoint: srv.URL}
	p := e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion})

	it := joineraws.InstanceTypeOf(t, p, nil, "m6i.large")
	want := map[string]string{
		karpv1.LabelInstanceCPUManufacturer:              "amd",
		karpv1.LabelInstanceCPUSustainedClockSpeedMhz:    "2900",
		karpv1.LabelInstanceEncryptionInTransitSupported: "false",
		karpv1.LabelInstanceTenancy:                      "default",
	}
	for k, v := range want {
		if it.Labels[k] != v {
			t.Errorf("m6i.large label %s = %q, want %q", k, it.Labels[k], v)
		}
	}
	if v, ok := it.Labels[karpv1.LabelInstanceEBSBandwidth]; ok {
		t.Errorf("m6i.large has EBS bandwidth label %q although EC2 gave no EbsOptimizedInfo", v)
	}
}

// TestInstanceTypeHardwareLabelsThroughSim: against the sim the provider's
// types carry the labels the catalogue's model gives (plans and the sim
// agree).
func TestInstanceTypeHardwareLabelsThroughSim(t *testing.T) {
	e := newEnv(t)
	for name, want := range map[string]map[string]string{
		"m5.large":  {karpv1.LabelInstanceCPUManufacturer: "intel", karpv1.LabelInstanceCPUSustainedClockSpeedMhz: "3100", karpv1.LabelInstanceEBSBandwidth: "4750", karpv1.LabelInstanceEncryptionInTransitSupported: "false"},
		"m6g.large": {karpv1.LabelInstanceCPUManufacturer: "aws", karpv1.LabelInstanceCPUSustainedClockSpeedMhz: "2500"},
		"m5a.large": {karpv1.LabelInstanceCPUManufacturer: "amd"},
		"m6i.large": {karpv1.LabelInstanceEncryptionInTransitSupported: "true", karpv1.LabelInstanceEBSBandwidth: "10000"},
	} {
		it := joineraws.InstanceTypeOf(t, e.provider, nil, name)
		for k, v := range want {
			if it.Labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", name, k, it.Labels[k], v)
			}
		}
	}
}
