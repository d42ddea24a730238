// Package agent is the node agent's runtime: it watches IMDS for
// interruption notices, takes the node out of service according to a
// per-kind policy (drain), reports each notice to the coordinators until
// acknowledged (agent/report), serves Prometheus metrics and speaks
// sd_notify to systemd. It takes off the cordon and taints it put on the
// node when their notice ends or the node rebooted (hold.go).
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/agent/report"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/httpauth"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Action is what the agent does on a notice.
type Action string

// Actions.
const (
	ActionDrain  Action = "drain"  // taint, cordon, evict
	ActionTaint  Action = "taint"  // cordon and the joiner.io/interruption taint only (the node is not marked disrupted)
	ActionIgnore Action = "ignore" // report only
)

// Policy maps notice kinds to actions.
type Policy map[imds.Kind]Action

// DefaultPolicy: spot ITN, ASG terminate and scheduled events (reboot, stop,
// retirement: drain before the event time) drain; a rebalance
// recommendation is only reported, as Karpenter records it and
// aws-node-termination-handler ignores it by default (taint: cordon, as
// NTH's rebalance monitoring does).
func DefaultPolicy() Policy {
	return Policy{
		imds.KindSpotInterruption: ActionDrain,
		imds.KindASGLifecycle:     ActionDrain,
		imds.KindScheduledEvent:   ActionDrain,
		imds.KindRebalance:        ActionIgnore,
	}
}

// ParseAction parses a policy action name.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case ActionDrain, ActionTaint, ActionIgnore:
		return a, nil
	}
	return "", fmt.Errorf("action %q: want drain, taint or ignore", s)
}

// Config is the agent's runtime configuration.
type Config struct {
	// NodeName is this node's Kubernetes name (required).
	NodeName string
	// NodeClaim is this node's NodeClaim name (optional, for reports).
	NodeClaim string
	// IMDS client options; IMDSGetter overrides the client (tests).
	IMDS       imds.ClientOptions
	IMDSGetter imds.Getter
	// Interval between IMDS polls (default 1 s).
	Interval time.Duration
	// Kinds to watch (default all).
	Kinds     []imds.Kind
	Deadlines imds.Deadlines
	// Policy per kind (missing kinds: DefaultPolicy).
	Policy Policy
	// Drain options (DryRun, ForceAfter, ...). Their RetryBase and RetryMax
	// also bound the back-off of a cordon or drain start that failed (an
	// API error), retried until it succeeds or the agent stops.
	Drain drain.Options
	// CoordinatorDrains: the agent only cordons and taints its own node and
	// reports; the coordinator drains it (it deletes the NodeClaim, whose
	// termination evicts the pods), so the agent needs no right to evict
	// or delete pods anywhere (the chart's default). A node without the
	// karpenter.sh/nodepool label has no NodeClaim and no coordinator
	// drains it: there a drain notice is only reported and the node left
	// schedulable (a cordon nobody follows up would strand it).
	CoordinatorDrains bool
	// BootID returns the current boot's ID (default: read
	// DefaultBootIDPath; on an error the Node's status.nodeInfo.bootID):
	// a cordon the agent made before the node rebooted is taken off.
	BootID func() (string, error)
	// MinDrainWindow: a drain gets at least this long, even when the notice's
	// deadline is nearer or already past (a scheduled event whose NotBefore has
	// passed, a notice seen late after an agent restart). Default 30 s.
	MinDrainWindow time.Duration
	// Report options; no endpoints = notices are not reported (logged once).
	Report report.Options
	// MetricsAddr serves /metrics and /healthz ("" = off). A loopback
	// address serves plain HTTP to anyone on the node (local tooling); any
	// other serves HTTPS with a self-signed certificate made at start, and
	// /metrics only to callers MetricsAuthorize accepts (New refuses such
	// an address without it). /healthz stays open (probes).
	MetricsAddr string
	// MetricsAuthorize checks a /metrics caller's bearer token (cmd/joiner
	// wires a TokenReview and a SubjectAccessReview for get /metrics
	// through the agent's client).
	MetricsAuthorize httpauth.Authorizer
	Version          string
	// ReleaseStartupPages pages out the executable's start-up-only code and
	// read-only data once the agent is ready (Linux; see releaseStartupPages).
	ReleaseStartupPages bool
}

// Agent is a running node agent.
type Agent struct {
	cfg      Config
	log      *zap.Logger
	kube     kubernetes.Interface
	watcher  *imds.Watcher
	drainer  *drain.Drainer
	reporter *report.Client
	metrics  *Metrics
	notify   notifier

	lastOK atomic.Int64 // unix nanos of the last IMDS round that answered
	wg     sync.WaitGroup
	ln     net.Listener
	// cert serves the metrics listener's TLS (nil: loopback, plain HTTP).
	cert *httpauth.SelfSigned

	// holdMu serialises the agent's changes of its hold on the node
	// (claim, release), each a read-modify-write of the Node.
	holdMu sync.Mutex
	// mu guards ended, running and handedOver (never held across API
	// calls).
	mu sync.Mutex
	// ended holds the IDs of the notices that ended (canceled scheduled
	// events): a cordon still being retried for one gives up.
	ended map[string]bool
	// running cancels the handling (cordon, drain) of a notice by ID.
	running map[string]context.CancelFunc
	// handedOver holds the IDs of the notices a coordinator acknowledged
	// and acts on (it replaces a NodePool node): their end does not
	// uncordon a NodePool node, which is going away.
	handedOver map[string]bool
}

// New wires an agent. It does no I/O except binding the metrics listener.
func New(cfg Config, kube kubernetes.Interface, log *zap.Logger) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("agent: node name must be set")
	}
	defaults.Positive(&cfg.Interval, time.Second)
	defaults.Positive(&cfg.MinDrainWindow, 30*time.Second)
	defaults.Positive(&cfg.Drain.RetryBase, drain.DefaultRetryBase)
	defaults.Positive(&cfg.Drain.RetryMax, drain.DefaultRetryMax)
	pol := DefaultPolicy()
	for k, v := range cfg.Policy {
		pol[k] = v
	}
	cfg.Policy = pol
	if cfg.BootID == nil {
		cfg.BootID = readBootID
	}
	a := &Agent{cfg: cfg, log: log, kube: kube, metrics: NewMetrics(), notify: notifier{log: log.Named("systemd")},
		ended: map[string]bool{}, running: map[string]context.CancelFunc{}, handedOver: map[string]bool{}}
	a.metrics.pollOK = func() { a.lastOK.Store(time.Now().UnixNano()) }
	get := cfg.IMDSGetter
	if get == nil {
		c, err := imds.NewClient(cfg.IMDS)
		if err != nil {
			return nil, err
		}
		get = c
	}
	a.watcher = imds.NewWatcher(get, log.Named("imds"), imds.WatcherOptions{
		Interval: cfg.Interval, Kinds: cfg.Kinds, Deadlines: cfg.Deadlines, Observer: a.metrics,
	})
	dopts := cfg.Drain
	dopts.Observer = a.metrics
	a.drainer = drain.New(kube, log.Named("drain"), dopts)
	if len(cfg.Report.Endpoints) > 0 {
		ropts := cfg.Report
		ropts.Observer = a.metrics
		if ropts.UserAgent == "" && cfg.Version != "" {
			ropts.UserAgent = "joiner-agent/" + cfg.Version
		}
		r, err := report.NewClient(log.Named("report"), ropts)
		if err != nil {
			return nil, err
		}
		a.reporter = r
	}
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics listener on %s: %w", cfg.MetricsAddr, err)
		}
		if err := a.secureMetrics(ln); err != nil {
			_ = ln.Close()
			return nil, err
		}
		a.ln = ln
	}
	return a, nil
}

// secureMetrics makes the certificate of a metrics listener bound to a
// non-loopback address (judged by the address bound, not the flag's
// text), whose /metrics must be authenticated; a loopback one is served
// as it is.
func (a *Agent) secureMetrics(ln net.Listener) error {
	addr := a.cfg.MetricsAddr
	if httpauth.IsLoopback(ln.Addr()) {
		return nil
	}
	if a.cfg.MetricsAuthorize == nil {
		return fmt.Errorf("--metrics-addr %q: bound %s, not a loopback address, so /metrics must be authenticated, and no token reviewer is wired (use a loopback address, e.g. 127.0.0.1:9464, for unauthenticated local scrapes)", addr, ln.Addr())
	}
	a.cert = &httpauth.SelfSigned{Hosts: certHosts(addr, a.cfg.NodeName)}
	if _, err := a.cert.Certificate(); err != nil {
		return fmt.Errorf("--metrics-addr %q: %w", addr, err)
	}
	return nil
}

// Metrics returns the agent's metrics.
func (a *Agent) Metrics() *Metrics { return a.metrics }

// MetricsAddr is the bound metrics address ("" when off).
func (a *Agent) MetricsAddr() string {
	if a.ln == nil {
		return ""
	}
	return a.ln.Addr().String()
}

// MetricsURL is the metrics listener's base URL, https:// unless it is a
// loopback one ("" when off).
func (a *Agent) MetricsURL() string {
	if a.ln == nil {
		return ""
	}
	if a.cert != nil {
		return "https://" + a.MetricsAddr()
	}
	return "http://" + a.MetricsAddr()
}

// certHosts are the names in the metrics listener's certificate: its
// address's host (unless unspecified) and the node's name.
func certHosts(addr, node string) []string {
	var hosts []string
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, host)
		}
	}
	return append(hosts, node)
}

// Healthy reports whether IMDS answered recently.
func (a *Agent) Healthy() bool {
	last := a.lastOK.Load()
	if last == 0 {
		return false
	}
	return time.Since(time.Unix(0, last)) <= max(5*a.cfg.Interval, 10*time.Second)
}

// Run runs the agent until ctx ends (SIGTERM), then stops every goroutine it
// started and returns nil, or an error if start-up failed.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer a.wg.Wait()
	if a.ln != nil {
		srv := a.metricsServer()
		ln := a.ln
		if a.cert != nil {
			srv.TLSConfig = a.cert.TLSConfig()
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("metrics server", zap.Error(err))
			}
		}()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	instanceID, err := a.watcher.ResolveInstanceID(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.lastOK.Store(time.Now().UnixNano())
	log := a.log.With(logging.Node(a.cfg.NodeName), zap.String(logging.KeyInstance, instanceID))
	if a.reporter == nil {
		log.Warn("no coordinator endpoints: interruption notices will not be reported")
	}
	a.notify.send(daemon.SdNotifyReady + "\nSTATUS=watching IMDS")
	if a.cfg.ReleaseStartupPages {
		if n, err := releaseStartupPages(); err != nil {
			log.Debug("releasing start-up pages", zap.Error(err))
		} else {
			log.Debug("released start-up pages", zap.Int("bytes-advised", n))
		}
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.notify.watchdog(ctx, a.Healthy)
	}()
	log.Info("agent started", zap.Duration("interval", a.cfg.Interval), zap.Bool("dry-run", a.cfg.Drain.DryRun),
		zap.String("metrics", a.MetricsURL()))
	if !a.cfg.Drain.DryRun {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.retry(ctx, log, "looking at the agent's earlier hold on the node", a.recoverHold)
		}()
	}
	_ = a.watcher.Run(ctx, func(n imds.Notice) { a.onNotice(ctx, n) })
	a.notify.send(daemon.SdNotifyStopping)
	log.Info("agent stopping")
	return nil
}

func (a *Agent) metricsServer() *http.Server {
	mux := http.NewServeMux()
	var metrics http.Handler = promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{})
	if a.cert != nil {
		metrics = &httpauth.Guard{Next: metrics, Authorize: a.cfg.MetricsAuthorize, Log: a.log.Named("metrics"),
			Want: "metrics need a bearer token whose user may get /metrics (RBAC nonResourceURLs; the chart's metricsReaders)"}
	}
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.Healthy() {
			http.Error(w, "imds not answering", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// onNotice starts handling one new notice: the drain (per policy) and the
// report run concurrently, each in a goroutine the agent owns. An ended
// notice goes to onEnded.
func (a *Agent) onNotice(ctx context.Context, n imds.Notice) {
	if n.Ended {
		a.onEnded(ctx, n)
		return
	}
	observed := time.Now()
	a.metrics.Notices.WithLabelValues(string(n.Kind)).Inc()
	if a.reporter != nil {
		rep := agentv1.Report{
			ID: n.ID, Kind: string(n.Kind), InstanceID: n.InstanceID, Node: a.cfg.NodeName, NodeClaim: a.cfg.NodeClaim,
			Action: n.Action, EventID: n.EventID, NoticeTime: n.NoticeTime, Deadline: n.Deadline, ObservedAt: observed,
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if _, err := a.reporter.Deliver(ctx, rep); err != nil {
				if ctx.Err() == nil {
					a.log.Error("delivering interruption report", zap.String(logging.KeyNotice, n.ID), zap.Error(err))
				}
				return
			}
			if n.Kind != imds.KindRebalance {
				// The coordinator deletes the NodeClaim of a node
				// with any notice but a rebalance recommendation.
				a.mu.Lock()
				a.handedOver[n.ID] = true
				a.mu.Unlock()
				a.retry(ctx, a.log.With(zap.String(logging.KeyNotice, n.ID)), "recording the notice's hand-over on the node",
					func(ctx context.Context) error { return a.markHandedOver(ctx, n.ID) })
			}
		}()
	}
	action := a.cfg.Policy[n.Kind]
	if action == ActionIgnore || action == "" {
		a.log.Info("notice ignored by policy", zap.String(logging.KeyNotice, n.ID))
		return
	}
	hctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	a.running[n.ID] = cancel
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.running, n.ID)
			a.mu.Unlock()
			cancel()
		}()
		a.handle(hctx, n, action, observed)
	}()
}

// onEnded handles a notice that is over (a scheduled event canceled or
// completed): its cordon or drain, if still running, stops, and the
// agent's hold on the node is taken off unless another notice still
// holds it, or a coordinator acknowledged the notice's report and the
// node has a NodePool: the coordinator has deleted its NodeClaim (as
// Karpenter does on a scheduled change, canceled or not) and is draining
// it, so it must stay closed to new pods.
func (a *Agent) onEnded(ctx context.Context, n imds.Notice) {
	a.mu.Lock()
	a.ended[n.ID] = true
	if cancel, ok := a.running[n.ID]; ok {
		cancel()
	}
	handedOver := a.handedOver[n.ID]
	a.mu.Unlock()
	if a.cfg.Drain.DryRun {
		a.log.Info("dry-run: notice ended; would have taken the agent's cordon off", zap.String(logging.KeyNotice, n.ID))
		return
	}
	log := a.log.With(logging.Node(a.cfg.NodeName), zap.String(logging.KeyNotice, n.ID))
	if handedOver {
		log.Info("notice ended after a coordinator acknowledged it: a NodePool node stays cordoned while the coordinator replaces it")
	}
	why := fmt.Sprintf("%s notice %s ended (canceled, completed or no longer in IMDS)", n.Kind, n.ID)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.retry(ctx, log, "taking the agent's cordon off the node", func(ctx context.Context) error {
			_, err := a.release(ctx, func(node *corev1.Node, x heldNotice) bool {
				mine := x.ID == n.ID || (n.EventID != "" && x.Kind == n.Kind && x.EventID == n.EventID)
				return mine && !keptFor(node, x, handedOver)
			}, ReasonNoticeEnded, why)
			return err
		})
	}()
}

func (a *Agent) isHandedOver(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handedOver[id]
}

func (a *Agent) noticeEnded(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended[id]
}

// retry runs f until it succeeds or ctx ends, with the drain options'
// back-off.
func (a *Agent) retry(ctx context.Context, log *zap.Logger, what string, f func(context.Context) error) {
	b := backoff.New(a.cfg.Drain.RetryBase, a.cfg.Drain.RetryMax)
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil || !retryAfter(ctx, log, what, err, attempt, &b) {
			return
		}
	}
}

// handle cordons the node for n and, when action drains, drains it. The
// watcher hands each notice over once, so an API error (a timeout, a 5xx)
// must not lose it: the cordon is retried with back-off until it succeeds
// or ctx ends, and so is a drain that failed to start (cordon or pod list)
// while its deadline is ahead. A drain that ran to its deadline is not
// retried. Each notice has its own goroutine: retries delay no other.
func (a *Agent) handle(ctx context.Context, n imds.Notice, action Action, observed time.Time) {
	log := a.log.With(logging.Node(a.cfg.NodeName), zap.String(logging.KeyNotice, n.ID))
	deadline := n.Deadline
	if floor := observed.Add(a.cfg.MinDrainWindow); deadline.Before(floor) {
		deadline = floor
	}
	req := drain.Request{
		Node: a.cfg.NodeName, Reason: string(n.Kind), Deadline: deadline, Evict: action == ActionDrain && !a.cfg.CoordinatorDrains,
		Advisory: action == ActionTaint,
		Message:  describe(n),
	}
	retry := backoff.New(a.cfg.Drain.RetryBase, a.cfg.Drain.RetryMax)
	for attempt := 1; ; attempt++ {
		err := a.cordon(ctx, n, req, action)
		if err == nil {
			break
		}
		switch {
		case errors.Is(err, errNotJoiners):
			log.Warn("not cordoning: the coordinator drains, and it drains only NodePool nodes; the notice is reported only "+
				"(run the agent without --coordinator-drains, the chart's agent.localDrain, to drain such nodes)", zap.Error(err))
			return
		case errors.Is(err, errNoticeEnded):
			log.Info("the notice ended before the node was cordoned")
			return
		}
		if !retryAfter(ctx, log, "cordoning node", err, attempt, &retry) {
			return
		}
	}
	log.Info("node cordoned", zap.Duration("since-notice-seen", time.Since(observed)))
	if !req.Evict {
		return
	}
	retry = backoff.New(a.cfg.Drain.RetryBase, a.cfg.Drain.RetryMax)
	for attempt := 1; ; attempt++ {
		res, err := a.drainer.Drain(ctx, req)
		if err == nil {
			a.metrics.DrainDuration.Observe(time.Since(observed).Seconds())
			log.Info("node drained")
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, drain.ErrDeadline) || !time.Now().Before(deadline) {
			a.metrics.DrainDuration.Observe(time.Since(observed).Seconds())
			log.Error("draining node", zap.Error(err), zap.Strings("stuck", res.Stuck))
			return
		}
		if !retryAfter(ctx, log, "starting the drain", err, attempt, &retry) {
			return
		}
	}
}

// cordon taints and cordons the node for n: claim, which records what it
// added; a dry run only logs (drain's).
func (a *Agent) cordon(ctx context.Context, n imds.Notice, req drain.Request, action Action) error {
	if a.cfg.Drain.DryRun {
		return a.drainer.Cordon(ctx, req)
	}
	return a.claim(ctx, n, req, action == ActionDrain)
}

// retryAfter logs a failed attempt (the first, then every 10th) and
// waits out the next back-off step; false when ctx ended.
func retryAfter(ctx context.Context, log *zap.Logger, what string, err error, attempt int, b *wait.Backoff) bool {
	if ctx.Err() != nil {
		return false
	}
	d := b.Step()
	if attempt == 1 || attempt%10 == 0 {
		log.Error(what+"; retrying", zap.Error(err), zap.Int("attempt", attempt), zap.Duration("retry-in", d))
	}
	return backoff.Sleep(ctx, d)
}

func describe(n imds.Notice) string {
	s := fmt.Sprintf("%s notice %s (action %s), deadline %s", n.Kind, n.ID, n.Action, n.Deadline.UTC().Format(time.RFC3339))
	if n.Description != "" {
		s += ": " + n.Description
	}
	return s
}
