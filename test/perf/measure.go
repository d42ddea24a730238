package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/harness"
)

// coordStats is what the coordinators have used so far.
type coordStats struct {
	peakRSSMiB  float64 // the largest VmHWM of the three
	cpuSeconds  float64 // utime+stime of all three
	apiRequests float64 // joiner_kube_client_requests_total of all three
}

func (r *Run) coordStats(ctx context.Context) coordStats {
	var s coordStats
	for _, c := range r.H.Coordinators {
		p := r.H.Process(c.Name)
		if p == nil || p.Exited() {
			continue
		}
		pid := p.PID()
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
					s.peakRSSMiB = max(s.peakRSSMiB, kb/1024)
				}
			}
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// fields after the command's closing parenthesis: utime is the
			// 12th, stime the 13th (clock ticks, 100 per second on Linux)
			if i := strings.LastIndexByte(string(b), ')'); i > 0 {
				f := strings.Fields(string(b)[i+1:])
				if len(f) > 12 {
					ut, _ := strconv.ParseFloat(f[11], 64)
					st, _ := strconv.ParseFloat(f[12], 64)
					s.cpuSeconds += (ut + st) / 100
				}
			}
		}
		if page, err := r.H.Metrics(ctx, c); err == nil {
			s.apiRequests += metricSum(page, "joiner_kube_client_requests_total")
		}
	}
	return s
}

// metricSum adds the samples of a metric on a /metrics page.
func metricSum(page []byte, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// phase measures one phase: Start before the trigger, Finish when done.
type phase struct {
	r       *Run
	name    string
	started time.Time
	before  coordStats
}

func (r *Run) startPhase(ctx context.Context, name string) *phase {
	r.logf("phase %s", name)
	return &phase{r: r, name: name, started: time.Now(), before: r.coordStats(ctx)}
}

// finish fills the phase's coordinator figures and utilisation into res.
func (p *phase) finish(ctx context.Context, res Result) Result {
	after := p.r.coordStats(ctx)
	res.Scenario, res.Phase = p.r.name, p.name
	res.PeakRSSMiB = after.peakRSSMiB
	res.CPUSeconds = after.cpuSeconds - p.before.cpuSeconds
	res.APIRequests = after.apiRequests - p.before.apiRequests
	nodes, cpu, mem, err := p.r.utilisation(ctx)
	if err != nil {
		res.Note = strings.TrimSpace(res.Note + " " + err.Error())
	}
	res.Nodes, res.CPUUtil, res.MemUtil = nodes, cpu, mem
	p.r.logf("phase %s done: %d pods, %s (after the last pod %s), %d nodes, cpu %.1f%%, memory %.1f%%, %d disrupted %s",
		p.name, res.Pods, dur(res.Total), dur(res.AfterLastPod), res.Nodes, 100*res.CPUUtil, 100*res.MemUtil, res.Disrupted, res.Note)
	return res
}

// pods lists the workload's pods.
func (r *Run) pods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := r.H.Env.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "perf=" + Discovery})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return l.Items, nil
}

func running(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRunning waits until exactly want workload pods exist (not being
// deleted) and all are Running and Ready; it returns when that was first
// seen and the newest pod's creation time.
func (r *Run) waitRunning(ctx context.Context, want int, timeout time.Duration) (time.Time, time.Time, error) {
	deadline := time.Now().Add(timeout)
	lastLine := ""
	for {
		pods, err := r.pods(ctx)
		if err == nil {
			live, run, pending := 0, 0, 0
			var newest time.Time
			for i := range pods {
				p := &pods[i]
				if p.DeletionTimestamp != nil {
					continue
				}
				live++
				if p.CreationTimestamp.After(newest) {
					newest = p.CreationTimestamp.Time
				}
				if running(p) {
					run++
				} else if p.Spec.NodeName == "" {
					pending++
				}
			}
			if live == want && run == want {
				return time.Now(), newest, nil
			}
			if line := fmt.Sprintf("%d/%d pods running, %d pending", run, want, pending); line != lastLine {
				if time.Since(lastProgress) > 10*time.Second {
					r.logf("%s", line)
					lastProgress = time.Now()
				}
				lastLine = line
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, time.Time{}, fmt.Errorf("timed out after %s: %s", timeout, lastLine)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

var lastProgress time.Time

// podUIDs is the set of the workload's live pods.
func (r *Run) podUIDs(ctx context.Context) (map[string]bool, error) {
	pods, err := r.pods(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			out[string(pods[i].UID)] = true
		}
	}
	return out, nil
}

// gone counts the pods of before that no longer exist (disrupted: their
// node was taken away and their controller made new ones).
func (r *Run) gone(ctx context.Context, before map[string]bool) int {
	now, err := r.podUIDs(ctx)
	if err != nil {
		return -1
	}
	n := 0
	for uid := range before {
		if !now[uid] {
			n++
		}
	}
	return n
}

// settle waits until the NodeClaims stop changing: none is being deleted,
// every pod runs, and the set of NodeClaims has not changed for quiet. It
// returns when the last change was seen.
func (r *Run) settle(ctx context.Context, want int, quiet, timeout time.Duration, done func(*harness.State) bool) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	lastKey, lastChange := "", time.Now()
	for {
		st, err := r.H.State(ctx, Namespace, "perf="+Discovery)
		if err == nil {
			var names []string
			busy := false
			for _, nc := range st.NodeClaims {
				names = append(names, nc.Name)
				busy = busy || nc.Deleting || !nc.Initialized
			}
			for _, n := range st.Nodes {
				busy = busy || n.Disrupted
			}
			key := strings.Join(names, ",")
			if key != lastKey {
				lastKey, lastChange = key, time.Now()
				r.logf("%d nodeclaims, %d/%d pods running, %s/h", len(st.NodeClaims), st.Running, want, strconv.FormatFloat(st.Cost(), 'f', 3, 64))
			}
			ok := !busy && st.Pods == want && st.Running == want && (done == nil || done(st))
			if ok && time.Since(lastChange) >= quiet {
				return lastChange, nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not settled after %s (%d nodeclaims)", timeout, strings.Count(lastKey, ",")+1)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// utilisation is Karpenter's Monitor.AvgUtilization: over the nodes of a
// NodePool, the mean of requested / allocatable for cpu and memory.
func (r *Run) utilisation(ctx context.Context) (int, float64, float64, error) {
	nodes, err := r.H.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := r.H.Env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("listing pods: %w", err)
	}
	reqCPU, reqMem := map[string]int64{}, map[string]int64{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			reqCPU[p.Spec.NodeName] += c.Resources.Requests.Cpu().MilliValue()
			reqMem[p.Spec.NodeName] += c.Resources.Requests.Memory().Value()
		}
	}
	var n int
	var cpu, mem float64
	for i := range nodes.Items {
		nd := &nodes.Items[i]
		if nd.Labels[karpv1.LabelNodePool] == "" || nd.DeletionTimestamp != nil {
			continue
		}
		a := nd.Status.Allocatable
		if a.Cpu().IsZero() || a.Memory().IsZero() {
			continue
		}
		n++
		cpu += float64(reqCPU[nd.Name]) / float64(a.Cpu().MilliValue())
		mem += float64(reqMem[nd.Name]) / float64(a.Memory().Value())
	}
	if n == 0 {
		return 0, 0, 0, nil
	}
	return n, cpu / float64(n), mem / float64(n), nil
}
