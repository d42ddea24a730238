// Package harness runs Joiner as real processes on one machine: the test
// control plane (etcd, kube-apiserver, kube-controller-manager without the
// node lifecycle controller, kube-scheduler, Joiner's CRDs), `joiner sim`
// (a simulated EC2 region that registers Nodes), N `joiner coordinator`
// replicas forming a raft cluster, and one `joiner agent` per simulated
// node. The demo (cmd/joiner-demo) and the process integration tests
// (test/integration) use it.
//
// Every child runs in its own process group with its output in
// <Dir>/<name>.log; Stop ends them all (SIGTERM, then SIGKILL) and reaps
// them. Coordinators listen on distinct loopback addresses (127.0.0.1,
// 127.0.0.2, ...) so that every replica serves HTTP on the same port, which
// follower forwarding relies on.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/test/karpenterstate"
	"github.com/joiner-dev/joiner/test/testenv"
)

// Region is the simulated region.
const Region = "us-east-1"

// Options configure a harness.
type Options struct {
	// Dir holds data and logs (created when missing).
	Dir string
	// JoinerBin is the joiner binary (see BuildJoiner).
	JoinerBin string
	// Coordinators is the number of coordinator replicas (default 3).
	Coordinators int
	// ClusterName is the coordinators' --cluster-name and the value of the
	// karpenter.sh/discovery tag on the sim's subnets and security group
	// (default "demo").
	ClusterName string
	// BootDelay is the sim's time from launch to a registered Node
	// (default 2s).
	BootDelay time.Duration
	// SimKubeQPS and SimKubeBurst limit the sim's Kubernetes client
	// (defaults 500 and 1000: the sim must not be what is measured).
	SimKubeQPS   float32
	SimKubeBurst int
	// InterruptionNotice is the sim's time from a spot interruption notice
	// to the instance's termination (default 2m, as EC2).
	InterruptionNotice time.Duration
	// Agents runs one `joiner agent` per running simulated instance.
	Agents bool
	// Kubelet stands in for the kubelets the sim's nodes do not run: pods
	// bound to a sim node are marked Running and Ready, and pods being
	// deleted there are removed at once (see runKubelet).
	Kubelet bool
	// CoordinatorArgs are extra coordinator flags.
	CoordinatorArgs []string
	// DeferCoordinators starts no coordinator until StartCoordinators is
	// called, so a test can first seed the cluster (as Karpenter left it,
	// say) with the control plane, the sim and the kubelet stand-in
	// running.
	DeferCoordinators bool
	// InsecureDev runs the coordinators with --insecure-dev (plain HTTP,
	// no TLS, reports from anyone). The default is the chart's: mutual TLS
	// from a CA Secret, agents authenticated per node.
	InsecureDev bool
	// Log receives the harness's own messages (default: none).
	Log *zap.Logger
}

// Coordinator is one coordinator replica.
type Coordinator struct {
	// Name is its process name, coordinator-<i>.
	Name string
	// IP is its loopback address.
	IP string
	// RaftAddr is its raft address (advertised).
	RaftAddr string
	// URL is its HTTP API base URL.
	URL  string
	args []string
}

// Harness is a running set of processes.
type Harness struct {
	opts Options
	// Env is the control plane.
	Env *testenv.Env
	// SimURL is the sim's endpoint (EC2, SSM, control API, IMDS).
	SimURL string
	// Coordinators are the replicas, in start order.
	Coordinators []*Coordinator

	http   *http.Client
	caFile string // the coordinators' CA for agents ("" insecure)

	mu     sync.Mutex
	procs  map[string]*testenv.Process // by name, the current process
	all    []*testenv.Process          // every process ever started
	agents map[string]string           // instance id -> agent process name

	stopLoops context.CancelFunc
	loops     sync.WaitGroup
	stopOnce  sync.Once
}

// Start runs everything. On error the processes already started are
// stopped. A missing tool binary is reported with testenv.ErrToolsMissing.
func Start(ctx context.Context, opts Options) (*Harness, error) {
	defaults.Positive(&opts.Coordinators, 3)
	if opts.ClusterName == "" {
		opts.ClusterName = "demo"
	}
	defaults.Positive(&opts.BootDelay, 2*time.Second)
	defaults.Positive(&opts.SimKubeQPS, 500)
	defaults.Positive(&opts.SimKubeBurst, 1000)
	defaults.Positive(&opts.InterruptionNotice, 2*time.Minute)
	defaults.Zero(&opts.Log, zap.NewNop())
	if opts.JoinerBin == "" {
		return nil, errors.New("harness: Options.JoinerBin: required (see BuildJoiner)")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: run dir: %w", err)
	}
	// A previous run's etcd and raft data would be picked up (raft peers
	// at old addresses never elect a leader): refuse a used directory.
	for _, pattern := range []string{"controlplane", "coordinator-*"} {
		if used, _ := filepath.Glob(filepath.Join(opts.Dir, pattern)); len(used) > 0 {
			return nil, fmt.Errorf("harness: run dir %s holds a previous run's data (%s): remove it or choose another", opts.Dir, filepath.Base(used[0]))
		}
	}
	// A generous timeout: a coordinator on a loaded machine can take
	// seconds to answer /metrics, and a timeout reads as "not the leader".
	h := &Harness{opts: opts, http: &http.Client{Timeout: 20 * time.Second},
		procs: map[string]*testenv.Process{}, agents: map[string]string{}}
	if err := h.start(ctx); err != nil {
		h.Stop()
		return nil, err
	}
	return h, nil
}

func (h *Harness) start(ctx context.Context) error {
	log := h.opts.Log
	log.Info("starting control plane", zap.String("dir", h.opts.Dir))
	env, err := testenv.StartDetached(ctx, filepath.Join(h.opts.Dir, "controlplane"), testenv.Options{
		ControllerManager: true,
		Controllers:       []string{"*", "-node-lifecycle-controller"},
		Scheduler:         true,
		CRDs:              true,
		CRDDir:            filepath.Join(testenv.RepoRoot(), "packaging", "crds"),
		// Admission taints new Nodes node.kubernetes.io/not-ready and the
		// node lifecycle controller (off: the sim's Nodes have no kubelet
		// leases) would lift it: without the plugin no taint is added.
		APIServerArgs: []string{"--disable-admission-plugins=TaintNodesByCondition"},
	})
	h.Env = env
	if err != nil {
		return fmt.Errorf("starting control plane: %w", err)
	}
	if err := h.startSim(ctx); err != nil {
		return err
	}
	if !h.opts.InsecureDev {
		if err := h.setupTLS(ctx); err != nil {
			return err
		}
	}
	if h.opts.Agents {
		if err := h.setupAgentDaemonSet(ctx); err != nil {
			return err
		}
	}
	if !h.opts.DeferCoordinators {
		if err := h.startCoordinators(ctx); err != nil {
			return err
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	h.stopLoops = cancel
	if h.opts.Agents {
		h.loops.Go(func() { h.runAgents(lctx) }) // owned by h: Stop cancels and waits
	}
	if h.opts.Kubelet {
		h.loops.Go(func() { h.runKubelet(lctx) }) // owned by h: Stop cancels and waits
	}
	return nil
}

// startSim runs `joiner sim` with subnets and a security group tagged
// karpenter.sh/discovery=<cluster name>, and an EKS cluster of that name
// whose endpoint and CA are the control plane's (the coordinators discover
// them, with the sim's service CIDR and Kubernetes version).
func (h *Harness) startSim(ctx context.Context) error {
	cfg := sim.DefaultConfig()
	// The coordinators hold Joiner's policy for this cluster; the test kit
	// seeding a Karpenter cluster (karpenterstate) may do what Karpenter did.
	cfg.IAM.Cluster = h.opts.ClusterName
	cfg.IAM.Callers = map[string]sim.Caller{karpenterstate.AccessKeyID: {Unrestricted: true}}
	cfg.Cluster.Name, cfg.Cluster.Endpoint = h.opts.ClusterName, h.Env.Config.Host
	if ca, err := os.ReadFile(h.Env.Config.CAFile); err == nil {
		cfg.Cluster.CA = string(ca)
	}
	for i := range cfg.Subnets {
		cfg.Subnets[i].Tags[sim.DiscoveryTag] = h.opts.ClusterName
	}
	for i := range cfg.SecurityGroups {
		cfg.SecurityGroups[i].Tags[sim.DiscoveryTag] = h.opts.ClusterName
	}
	cfg.BootDelay = sim.Duration{Duration: h.opts.BootDelay}
	cfg.InterruptionNotice = sim.Duration{Duration: h.opts.InterruptionNotice}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("sim config: %w", err)
	}
	cfgPath := filepath.Join(h.opts.Dir, "sim.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return fmt.Errorf("sim config: %w", err)
	}
	port, err := freePort([]string{"127.0.0.1"})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := h.startProcess("sim", []string{"sim", "--listen", addr, "--kubeconfig", h.Env.Kubeconfig,
		"--config", cfgPath, "--log-level", "info",
		"--kube-qps", strconv.FormatFloat(float64(h.opts.SimKubeQPS), 'f', -1, 32), "--kube-burst", strconv.Itoa(h.opts.SimKubeBurst)}, nil)
	if err != nil {
		return err
	}
	h.SimURL = "http://" + addr
	if err := h.waitHTTP(ctx, p, h.SimURL+"/control/instances"); err != nil {
		return fmt.Errorf("waiting for sim: %w", err)
	}
	h.opts.Log.Info("sim ready", zap.String("endpoint", h.SimURL))
	return nil
}

// StartCoordinators starts the coordinators of a harness started with
// DeferCoordinators.
func (h *Harness) StartCoordinators(ctx context.Context) error {
	if !h.opts.DeferCoordinators || len(h.Coordinators) > 0 {
		return errors.New("harness: the coordinators are started already")
	}
	return h.startCoordinators(ctx)
}

// startCoordinators runs the replicas on 127.0.0.<i+1> with common ports.
func (h *Harness) startCoordinators(ctx context.Context) error {
	n := h.opts.Coordinators
	ips := make([]string, n)
	for i := range ips {
		ips[i] = "127.0.0." + strconv.Itoa(i+1)
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort(ips)
		if err != nil {
			return err
		}
		for slices.Contains(ports[:i], p) {
			if p, err = freePort(ips); err != nil {
				return err
			}
		}
		ports[i] = p
	}
	raftPort, gossipPort, httpPort := strconv.Itoa(ports[0]), strconv.Itoa(ports[1]), strconv.Itoa(ports[2])
	known, err := h.coordinatorFlags(ctx)
	if err != nil {
		return err
	}
	for i, ip := range ips {
		var join []string
		for j, o := range ips {
			if j != i {
				join = append(join, net.JoinHostPort(o, gossipPort))
			}
		}
		scheme := "https"
		if h.caFile == "" || !known["tls-ca-secret"] {
			scheme = "http"
		}
		c := &Coordinator{Name: "coordinator-" + strconv.Itoa(i), IP: ip,
			RaftAddr: net.JoinHostPort(ip, raftPort), URL: scheme + "://" + net.JoinHostPort(ip, httpPort)}
		c.args = []string{"coordinator",
			"--data-dir", filepath.Join(h.opts.Dir, c.Name),
			"--bind", c.RaftAddr, "--advertise", c.RaftAddr,
			"--gossip-bind", net.JoinHostPort(ip, gossipPort),
			"--join", strings.Join(join, ","),
			"--bootstrap-expect", strconv.Itoa(n),
			"--cluster-name", h.opts.ClusterName,
			"--http-addr", net.JoinHostPort(ip, httpPort),
			"--log-level", "info",
		}
		opt := map[string]string{
			"kubeconfig": h.Env.Kubeconfig, "aws-endpoint": h.SimURL, "region": Region,
			"cluster-endpoint": h.Env.Config.Host,
		}
		for _, f := range []string{"kubeconfig", "aws-endpoint", "region", "cluster-endpoint"} {
			// A binary that discovers the cluster (it has --cluster-ca-bundle)
			// gets the cluster name only, as on EKS.
			if known[f] && (f != "cluster-endpoint" || !known["cluster-ca-bundle"]) {
				c.args = append(c.args, "--"+f, opt[f])
			}
		}
		if known["simulated-cloud"] {
			c.args = append(c.args, "--simulated-cloud")
		}
		switch {
		case scheme == "https":
			c.args = append(c.args, coordinatorTLSArgs()...)
		case known["insecure-dev"]:
			c.args = append(c.args, "--insecure-dev")
		}
		c.args = append(c.args, h.opts.CoordinatorArgs...)
		h.Coordinators = append(h.Coordinators, c)
	}
	for _, c := range h.Coordinators {
		if _, err := h.startProcess(c.Name, c.args, awsEnv()); err != nil {
			return err
		}
	}
	h.opts.Log.Info("coordinators started", zap.Int("replicas", n), zap.String("raft-port", raftPort),
		zap.String("http-port", httpPort))
	return nil
}

// awsEnv gives the coordinators dummy credentials for the sim.
func awsEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=joiner-sim", "AWS_SECRET_ACCESS_KEY=joiner-sim", "AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// coordinatorFlags lists the long flags `joiner coordinator` knows, so the
// harness passes the cloud and cluster flags only to a binary that has them.
func (h *Harness) coordinatorFlags(ctx context.Context) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, h.opts.JoinerBin, "coordinator", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("joiner coordinator --help: %w: %s", err, out)
	}
	known := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		if name, ok := strings.CutPrefix(f, "--"); ok {
			known[strings.TrimRight(name, ",=")] = true
		}
	}
	return known, nil
}

// startProcess starts `joiner args...` as name and records it.
func (h *Harness) startProcess(name string, args, env []string) (*testenv.Process, error) {
	p, err := testenv.StartProcess(h.opts.Dir, name, h.opts.JoinerBin, args, env)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.procs[name] = p
	h.all = append(h.all, p)
	h.mu.Unlock()
	return p, nil
}

// Process returns the current process of that name, or nil.
func (h *Harness) Process(name string) *testenv.Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.procs[name]
}

// Coordinator returns the replica of that name, or nil.
func (h *Harness) Coordinator(name string) *Coordinator {
	for _, c := range h.Coordinators {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Kill crashes a process by name (SIGKILL to its group) and reaps it.
func (h *Harness) Kill(name string) error {
	p := h.Process(name)
	if p == nil {
		return fmt.Errorf("harness: no process %q", name)
	}
	p.Kill()
	h.opts.Log.Info("killed process", zap.String("name", name), zap.Int("pid", p.PID()))
	return nil
}

// Restart starts a coordinator again with the same flags and data dir; it
// must have exited (see Kill).
func (h *Harness) Restart(name string) error {
	c := h.Coordinator(name)
	if c == nil {
		return fmt.Errorf("harness: no coordinator %q", name)
	}
	if p := h.Process(name); p != nil && !p.Exited() {
		return fmt.Errorf("harness: %s is still running (pid %d)", name, p.PID())
	}
	_, err := h.startProcess(name, c.args, awsEnv())
	return err
}

// Metrics returns a replica's /metrics page (over the harness's TLS
// client when the coordinators run TLS).
func (h *Harness) Metrics(ctx context.Context, c *Coordinator) ([]byte, error) {
	return h.get(ctx, c.URL+"/metrics")
}

// IsLeader reports whether a replica says it is the raft leader
// (joiner_raft_leader 1 on its /metrics).
func (h *Harness) IsLeader(ctx context.Context, c *Coordinator) bool {
	body, err := h.get(ctx, c.URL+"/metrics")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "joiner_raft_leader "); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	return false
}

// Leader returns the replica that leads now, or nil.
func (h *Harness) Leader(ctx context.Context) *Coordinator {
	var found *Coordinator
	for _, c := range h.Coordinators {
		if p := h.Process(c.Name); p == nil || p.Exited() {
			continue
		}
		if h.IsLeader(ctx, c) {
			if found != nil {
				return nil // two claim it: an election is settling
			}
			found = c
		}
	}
	return found
}

// WaitLeader waits until a running replica leads, other than the excluded
// names, and returns it. A coordinator that exits fails the wait.
func (h *Harness) WaitLeader(ctx context.Context, exclude ...string) (*Coordinator, error) {
	for {
		if l := h.Leader(ctx); l != nil && !slices.Contains(exclude, l.Name) {
			return l, nil
		}
		if err := h.CheckAlive(exclude...); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a raft leader: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitReady waits until every running coordinator answers /readyz 200.
func (h *Harness) WaitReady(ctx context.Context) error {
	for {
		ready := 0
		running := 0
		for _, c := range h.Coordinators {
			if p := h.Process(c.Name); p == nil || p.Exited() {
				continue
			}
			running++
			if _, err := h.get(ctx, c.URL+"/readyz"); err == nil {
				ready++
			}
		}
		if running > 0 && ready == running {
			return nil
		}
		if err := h.CheckAlive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for coordinators to be ready (%d/%d): %w", ready, running, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CheckAlive returns an error naming the sim or a coordinator that exited
// without being killed on purpose (names in killed are ignored).
func (h *Harness) CheckAlive(killed ...string) error {
	names := []string{"sim"}
	for _, c := range h.Coordinators {
		names = append(names, c.Name)
	}
	for _, n := range names {
		if slices.Contains(killed, n) {
			continue
		}
		if p := h.Process(n); p != nil && p.Exited() {
			return p.ExitError()
		}
	}
	return nil
}

// Instances lists the sim's instances (GET /control/instances).
func (h *Harness) Instances(ctx context.Context) ([]sim.InstanceInfo, error) {
	body, err := h.get(ctx, h.SimURL+"/control/instances")
	if err != nil {
		return nil, err
	}
	var out []sim.InstanceInfo
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decoding sim instances: %w", err)
	}
	return out, nil
}

// Interrupt issues a spot interruption notice for an instance and returns
// the time the sim will terminate it.
func (h *Harness) Interrupt(ctx context.Context, instanceID string) (time.Time, error) {
	body, err := h.post(ctx, h.SimURL+"/control/instances/"+instanceID+"/interrupt")
	if err != nil {
		return time.Time{}, err
	}
	var r struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return time.Time{}, fmt.Errorf("decoding interrupt answer: %w", err)
	}
	return r.Time, nil
}

// ReleaseImages publishes a new release of the sim's images of family
// (AL2023, AL2, Bottlerocket) behind their SSM parameters and returns the
// old -> new image IDs.
func (h *Harness) ReleaseImages(ctx context.Context, family string) (map[string]string, error) {
	body, err := h.postJSON(ctx, h.SimURL+"/control/images/release", map[string]string{"family": family})
	if err != nil {
		return nil, err
	}
	var moved map[string]string
	if err := json.Unmarshal(body, &moved); err != nil {
		return nil, fmt.Errorf("decoding image release answer: %w", err)
	}
	return moved, nil
}

// runAgents starts an agent for every running instance with a Node name
// and stops the agents of terminated instances, until ctx ends.
func (h *Harness) runAgents(ctx context.Context) {
	for {
		if err := h.syncAgents(ctx); err != nil && ctx.Err() == nil {
			h.opts.Log.Debug("syncing agents", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (h *Harness) syncAgents(ctx context.Context) error {
	ins, err := h.Instances(ctx)
	if err != nil {
		return err
	}
	var coordinators []string
	for _, c := range h.Coordinators {
		coordinators = append(coordinators, "--coordinator", c.URL)
	}
	for _, in := range ins {
		h.mu.Lock()
		name, has := h.agents[in.ID]
		h.mu.Unlock()
		switch {
		case in.State == "running" && in.NodeName != "" && !has:
			var token string
			if h.caFile != "" {
				var ok bool
				if token, ok, err = h.agentToken(ctx, in.NodeName); err != nil {
					return err
				}
				if !ok {
					continue // no agent pod on the node yet: next round
				}
			}
			body, err := h.post(ctx, h.SimURL+"/control/instances/"+in.ID+"/imds")
			if err != nil {
				return fmt.Errorf("imds of %s: %w", in.ID, err)
			}
			var r struct {
				Endpoint string `json:"endpoint"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Endpoint == "" {
				return fmt.Errorf("imds of %s: bad answer %q", in.ID, body)
			}
			name = "agent-" + in.ID
			args := []string{"agent", "--node-name", in.NodeName, "--kubeconfig", h.Env.Kubeconfig,
				"--imds-endpoint", r.Endpoint, "--metrics-addr", "", "--release-startup-pages=false",
				"--log-level", "info"}
			if h.caFile != "" {
				args = append(args, "--coordinator-token-file", token, "--coordinator-ca-file", h.caFile)
			}
			if nc := in.Tags["karpenter.sh/nodeclaim"]; nc != "" {
				args = append(args, "--node-claim", nc)
			}
			args = append(args, coordinators...)
			if _, err := h.startProcess(name, args, nil); err != nil {
				return err
			}
			h.mu.Lock()
			h.agents[in.ID] = name
			h.mu.Unlock()
			h.opts.Log.Debug("started agent", zap.String("instance", in.ID), zap.String("node", in.NodeName))
		case in.State == "terminated" && has:
			if p := h.Process(name); p != nil {
				p.Stop()
			}
		}
	}
	return nil
}

// Agent returns the agent process of an instance, or nil.
func (h *Harness) Agent(instanceID string) *testenv.Process {
	h.mu.Lock()
	name := h.agents[instanceID]
	h.mu.Unlock()
	if name == "" {
		return nil
	}
	return h.Process(name)
}

// PIDs returns the process ids of every process the harness started,
// including the control plane and processes already killed.
func (h *Harness) PIDs() []int {
	var pids []int
	if h.Env != nil {
		pids = append(pids, h.Env.PIDs()...)
	}
	h.mu.Lock()
	for _, p := range h.all {
		pids = append(pids, p.PID())
	}
	h.mu.Unlock()
	return pids
}

// Logs returns the last n lines of every current process's log.
func (h *Harness) Logs(n int) string {
	var b strings.Builder
	if h.Env != nil {
		b.WriteString(h.Env.Logs(n))
	}
	h.mu.Lock()
	names := make([]string, 0, len(h.procs))
	for name := range h.procs {
		names = append(names, name)
	}
	h.mu.Unlock()
	slices.Sort(names)
	for _, name := range names {
		p := h.Process(name)
		fmt.Fprintf(&b, "==== %s (pid %d) %s ====\n%s\n", name, p.PID(), p.LogPath(), p.LogTail(n))
	}
	return b.String()
}

// Stop ends every process the harness started (agents, coordinators, the
// sim, then the control plane) and waits for them. Idempotent.
func (h *Harness) Stop() {
	h.stopOnce.Do(func() {
		if h.stopLoops != nil {
			h.stopLoops()
			h.loops.Wait()
		}
		h.mu.Lock()
		procs := slices.Clone(h.all)
		h.mu.Unlock()
		var wg sync.WaitGroup
		for i := len(procs) - 1; i >= 0; i-- {
			wg.Add(1)
			go func(p *testenv.Process) { defer wg.Done(); p.Stop() }(procs[i])
		}
		wg.Wait()
		if h.Env != nil {
			h.Env.Stop()
		}
	})
}

func (h *Harness) get(ctx context.Context, url string) ([]byte, error) {
	return h.do(ctx, http.MethodGet, url, nil)
}

func (h *Harness) post(ctx context.Context, url string) ([]byte, error) {
	return h.do(ctx, http.MethodPost, url, nil)
}

func (h *Harness) postJSON(ctx context.Context, url string, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return h.do(ctx, http.MethodPost, url, b)
}

func (h *Harness) do(ctx context.Context, method, url string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading body: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(answer)))
	}
	return answer, nil
}

// waitHTTP polls url until it answers 200, p exits or ctx ends.
func (h *Harness) waitHTTP(ctx context.Context, p *testenv.Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := h.get(ctx, url); err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return p.ExitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not answering %s: %w", p.Name(), url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort returns a TCP port free a moment ago on every address of ips.
func freePort(ips []string) (int, error) {
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			return 0, fmt.Errorf("finding a free port on %s: %w", ips[0], err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := true
		var held []net.Listener
		for _, ip := range ips[1:] {
			o, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, o)
		}
		// memberlist also binds UDP on the gossip port.
		for _, ip := range ips {
			if !ok {
				break
			}
			u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		l.Close()
		for _, o := range held {
			o.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free on all of %v", ips)
}

// BuildJoiner builds ./cmd/joiner of the repository into dir/joiner and
// returns its path.
func BuildJoiner(ctx context.Context, dir string) (string, error) {
	root := testenv.RepoRoot()
	if root == "" {
		return "", errors.New("building joiner: not inside the joiner repository")
	}
	out := filepath.Join(dir, "joiner")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/joiner")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/joiner: %w\n%s", err, b)
	}
	return out, nil
}
