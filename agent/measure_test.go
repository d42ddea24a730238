package agent_test

// Measurements behind BENCHMARKS.md (agent section). They need the real
// control plane and AEMM, take minutes, and log figures instead of asserting
// times, so they run only with JOINER_MEASURE=1:
//
//	JOINER_MEASURE=1 go test -count=1 -v -run 'TestMeasure' -timeout 30m ./agent/

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/joiner-dev/joiner/agent"
	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/test/testenv"
)

func measureGate(t *testing.T) {
	if os.Getenv("JOINER_MEASURE") != "1" {
		t.Skip("measurement: set JOINER_MEASURE=1 to run")
	}
}

// probeSpot polls AEMM's spot path every 5 ms until it answers 200 and
// returns when it first did.
func probeSpot(ctx context.Context, endpoint string) (time.Time, error) {
	hc := &http.Client{Timeout: time.Second}
	var token string
	for {
		if token == "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/latest/api/token", nil)
			req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
			if resp, err := hc.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					token = string(b)
				}
			}
		}
		if token != "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/latest/meta-data/"+imds.PathSpotInstanceAction, nil)
			req.Header.Set("X-aws-ec2-metadata-token", token)
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return time.Now(), nil
				}
				if resp.StatusCode == 401 {
					token = ""
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestMeasureNoticeToCordon: spot notice visible in AEMM -> node cordoned by
// the agent (1 s poll), over JOINER_MEASURE_SAMPLES samples (default 40).
func TestMeasureNoticeToCordon(t *testing.T) {
	measureGate(t)
	samples := 40
	if v, err := strconv.Atoi(os.Getenv("JOINER_MEASURE_SAMPLES")); err == nil && v > 0 {
		samples = v
	}
	env := testenv.Start(t, testenv.Options{})
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, IMDSv2Only: true, SpotDelay: 2 * time.Second})
	ctx := t.Context()
	c := env.Client
	const nodeName = "measure-node"
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for i := 0; i < samples; i++ {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Unschedulable, n.Spec.Taints = false, nil
		if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", nodeName).String()})
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var visible time.Time
		wg.Add(1)
		go func() { defer wg.Done(); visible, _ = probeSpot(actx, m.Endpoint) }()
		// A random phase between the agent's poll ticks and the notice (due 2 s after the restart).
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
		a, err := agent.New(agent.Config{
			NodeName: nodeName, Interval: time.Second, Kinds: []imds.Kind{imds.KindSpotInterruption},
			IMDS:   imds.ClientOptions{Endpoint: m.Endpoint},
			Policy: agent.Policy{imds.KindSpotInterruption: agent.ActionTaint},
		}, c, measureLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(actx) }()
		var cordoned time.Time
	loop:
		for {
			select {
			case ev := <-w.ResultChan():
				if nn, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Modified && nn.Spec.Unschedulable {
					cordoned = time.Now()
					break loop
				}
			case <-actx.Done():
				break loop
			}
		}
		w.Stop()
		cancel()
		wg.Wait()
		if cordoned.IsZero() || visible.IsZero() || cordoned.Before(visible) {
			t.Fatalf("sample %d: visible %v cordoned %v", i, visible, cordoned)
		}
		lat = append(lat, cordoned.Sub(visible))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	t.Logf("notice visible -> cordoned over %d samples (1 s poll): p50 %s p90 %s p99 %s max %s (GOMAXPROCS %d)",
		len(lat), pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		lat[len(lat)-1].Round(time.Millisecond), runtime.GOMAXPROCS(0))
}

// TestMeasureIdle runs the real `joiner agent` binary against AEMM (no
// notices due) for JOINER_MEASURE_DURATION (default 5m) and reports its peak
// RSS and CPU share from /proc.
func TestMeasureIdle(t *testing.T) {
	measureGate(t)
	dur := 5 * time.Minute
	if v, err := time.ParseDuration(os.Getenv("JOINER_MEASURE_DURATION")); err == nil && v > 0 {
		dur = v
	}
	m := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, IMDSv2Only: true, SpotDelay: 24 * time.Hour, RebalanceDelay: 24 * time.Hour})
	dir := t.TempDir()
	bin := filepath.Join(dir, "joiner")
	build := exec.Command("go", "build", "-o", bin, "../cmd/joiner")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building joiner: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// The agent does not talk to the API server until a notice arrives.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "--node-name=idle", "--kubeconfig="+kubeconfig, "--imds-endpoint="+m.Endpoint,
		"--metrics-addr=127.0.0.1:0", "--config="+filepath.Join(dir, "none.json"), "--log-level=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	time.Sleep(5 * time.Second) // start-up
	pid := cmd.Process.Pid
	cpu0, wall0 := procCPU(t, pid), time.Now()
	var peak int64
	for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(time.Second) {
		peak = max(peak, procRSS(t, pid))
	}
	cpu := procCPU(t, pid) - cpu0
	wall := time.Since(wall0)
	hwm := procField(t, pid, "VmHWM:")
	t.Logf("joiner agent idle for %s (1 s poll, 4 paths): CPU %.3f%% of a core, RSS peak %.1f MiB (VmHWM %.1f MiB)",
		wall.Round(time.Second), 100*cpu.Seconds()/wall.Seconds(), float64(peak)/1024, float64(hwm)/1024)
}

func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)        // utime (field 14)
	st, _ := strconv.ParseInt(f[12], 10, 64)        // stime (field 15)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func procRSS(t *testing.T, pid int) int64 { return procField(t, pid, "VmRSS:") }

// procField returns a kB field of /proc/pid/status.
func procField(t *testing.T, pid int, name string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), name) {
			v, _ := strconv.ParseInt(strings.Fields(s.Text())[1], 10, 64)
			return v
		}
	}
	return 0
}

func measureLogger(t *testing.T) *zap.Logger {
	if os.Getenv("JOINER_MEASURE_DEBUG") == "1" {
		return zaptest.NewLogger(t)
	}
	return zap.NewNop()
}
