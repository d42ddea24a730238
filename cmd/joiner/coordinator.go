package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/loop"
)

func init() { addCommand(newCoordinatorCmd) }

type coordinatorFlags struct {
	dataDir         string
	bind            string
	advertise       string
	gossipBind      string
	join            []string
	bootstrapExpect int
	clusterName     string
	clusterEndpoint string
	httpAddr        string
	leader          leaderFlags
	security        securityFlags
}

// newCoordinatorCmd runs a coordinator replica: it forms and keeps the raft
// cluster (data dir, DNS addresses, memberlist bootstrap_expect), keeps an
// informer cache warm, serves the HTTP API (agents' interruption reports,
// /healthz, /readyz, /metrics) and, while it leads, runs the leader loops
// (provisioner, launcher, lifecycle, termination, interruption, disruption).
func newCoordinatorCmd(g *globals) *cobra.Command {
	f := &coordinatorFlags{}
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run a coordinator replica (StatefulSet pod)",
		Example: `  # what the chart's StatefulSet runs in pod joiner-coordinator-0
  joiner coordinator --cluster-name my-cluster --advertise joiner-coordinator-0.joiner-coordinator-peers.kube-system.svc:7000 \
    --bind 0.0.0.0:7000 --http-addr 0.0.0.0:8080 --gossip-bind 0.0.0.0:7946 --join joiner-coordinator-peers.kube-system.svc \
    --bootstrap-expect 3 --tls-ca-secret joiner-coordinator-ca --tls-ca-configmap joiner-coordinator-ca`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runCoordinator(ctx, f, log.Named("coordinator"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "/var/lib/joiner", "directory for node-id, raft.db and snapshots (the pod's volume)")
	fl.StringVar(&f.bind, "bind", "127.0.0.1:7000", "raft listen address host:port")
	fl.StringVar(&f.advertise, "advertise", "", "stable DNS host:port peers dial for raft (coordinator-N.<headless-svc>:7000); required")
	fl.StringVar(&f.gossipBind, "gossip-bind", "127.0.0.1:7946", "memberlist listen address ip:port")
	fl.StringSliceVar(&f.join, "join", nil, "memberlist addresses to join (the headless service DNS name)")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 3, "bootstrap raft once this many coordinators are visible and none has a configuration")
	fl.StringVar(&f.clusterName, "cluster-name", "", "Kubernetes cluster name (tags, client tokens); required")
	fl.StringVar(&f.clusterEndpoint, "cluster-endpoint", "", "Kubernetes API server endpoint new nodes join, Karpenter's CLUSTER_ENDPOINT (empty: discovered with EKS DescribeCluster)")
	fl.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP API listen address host:port (every replica uses the same port: followers forward to <leader raft host>:<this port>)")
	f.leader.register(fl)
	f.security.register(fl)
	return cmd
}

func (f *coordinatorFlags) validate() error {
	if f.advertise == "" {
		return errors.New("--advertise: required (a DNS host:port, not a pod IP)")
	}
	if host, _, err := net.SplitHostPort(f.advertise); err != nil || host == "" {
		return fmt.Errorf("--advertise %q: want host:port", f.advertise)
	}
	if f.clusterName == "" {
		return errors.New("--cluster-name: required")
	}
	if f.bootstrapExpect < 1 {
		return fmt.Errorf("--bootstrap-expect %d: want >= 1", f.bootstrapExpect)
	}
	if _, port, err := net.SplitHostPort(f.httpAddr); err != nil || port == "" || port == "0" {
		return fmt.Errorf("--http-addr %q: want host:port with a fixed port", f.httpAddr)
	}
	if _, _, err := f.leader.gates(); err != nil {
		return err
	}
	return nil
}

func runCoordinator(ctx context.Context, f *coordinatorFlags, log *zap.Logger) error {
	if err := f.validate(); err != nil {
		return err
	}
	gHost, gPortS, err := net.SplitHostPort(f.gossipBind)
	if err != nil {
		return fmt.Errorf("--gossip-bind %q: %w", f.gossipBind, err)
	}
	gPort, err := strconv.Atoi(gPortS)
	if err != nil {
		return fmt.Errorf("--gossip-bind %q: port: %w", f.gossipBind, err)
	}
	clients, rc, err := f.leader.clients()
	if err != nil {
		return err
	}
	sec, err := f.security.build(ctx, clients, f.advertise, log)
	if err != nil {
		return err
	}
	go writeToolFiles(ctx, sec, f.dataDir, log)
	state := fsm.New()
	// Set before raft replays the log: a rejected entry is logged on
	// every replica, at start-up too (the FSM keeps serving).
	fsmLog := log.Named("fsm")
	state.OnReject(func(index uint64, t fsm.MessageType, err error) {
		fsmLog.Warn("rejected raft entry", zap.Uint64("index", index), zap.Stringer("type", t), zap.Error(err))
	})
	node, err := cluster.Open(cluster.Config{DataDir: f.dataDir, Bind: f.bind, Advertise: f.advertise, TLS: sec.tls}, state, log)
	if err != nil {
		return err
	}
	defer closeBounded(node, 15*time.Second, log)
	meta := cluster.Meta{Role: cluster.RoleCoordinator, ID: string(node.ID), RaftAddr: string(node.Addr), Expect: f.bootstrapExpect}
	disc, err := cluster.StartDiscovery(cluster.DiscoveryConfig{Name: string(node.ID), BindAddr: gHost, BindPort: gPort, Keyring: sec.keyring}, meta, log)
	if err != nil {
		return err
	}
	defer disc.Close()
	if len(f.join) > 0 {
		// Peers start in parallel (and DNS lags pod start): retry the join
		// until the expected number of coordinators is visible.
		go func() {
			for ctx.Err() == nil && len(disc.Servers()) < f.bootstrapExpect {
				if _, err := disc.Join(f.join); err != nil {
					log.Debug("joining gossip peers", zap.Strings("join", f.join), zap.Error(err))
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		}()
	}
	log.Info("coordinator starting", zap.String("id", string(node.ID)), zap.String("advertise", f.advertise),
		zap.String("cluster", f.clusterName), zap.String("cluster-endpoint", f.clusterEndpoint), zap.String("http-addr", f.httpAddr))
	reg := prometheus.NewRegistry()
	if err := kube.RegisterClientMetrics(reg); err != nil {
		return fmt.Errorf("registering client metrics: %w", err)
	}
	if err := registerProcessMetrics(reg); err != nil {
		return err
	}
	ap := f.security.autopilot(node, disc, f, sec, log)
	lead, cache, discovery, err := buildLeader(ctx, f, clients, rc, state, node, &ap, reg, log)
	if err != nil {
		return err
	}
	cacheCtx, stopCache := context.WithCancel(ctx)
	cacheDone := make(chan struct{})
	go func() { defer close(cacheDone); _ = cache.Run(cacheCtx) }()
	defer func() { stopCache(); <-cacheDone }()
	stopHTTP, err := serveAPI(ctx, f, sec, api.Config{Authenticate: f.security.authenticator(sec, clients), NodeInstance: nodeInstance(cache),
		ClusterFacts: statusCluster(discovery), StatusAuthenticate: f.security.statusAuthenticator(sec, clients),
		MetricsAuthorize: f.security.metricsAuthorizer(sec, clients)},
		node, state, reg, log)
	if err != nil {
		return err
	}
	defer stopHTTP()
	go func() {
		if err := cluster.RunBootstrap(ctx, node, disc, meta, time.Second, log); err != nil && ctx.Err() == nil {
			log.Error("bootstrap", zap.Error(err))
		}
	}()
	cluster.MonitorLeadership(ctx, node.Raft, 2*time.Minute, lead.Run, log)
	return nil
}

// serveAPI starts the HTTP API on --http-addr (TLS unless --insecure-dev;
// auth's Authenticate and NodeInstance decide who may report, its
// ClusterFacts joins the status); the returned func stops it.
func serveAPI(ctx context.Context, f *coordinatorFlags, sec security, auth api.Config, node *cluster.Node, state *fsm.FSM,
	reg *prometheus.Registry, log *zap.Logger) (func(), error) {
	_, port, _ := net.SplitHostPort(f.httpAddr)
	c := api.RaftCluster{Raft: node.Raft, ID: node.ID}
	m, err := api.NewMetrics(reg, c.IsLeader, true)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	if err := api.RegisterStateMetrics(reg, c, state); err != nil {
		return nil, fmt.Errorf("registering state metrics: %w", err)
	}
	h := api.New(api.Config{Cluster: c, Reports: state, Raft: c, State: state,
		Authenticate: auth.Authenticate, NodeInstance: auth.NodeInstance, ClusterFacts: auth.ClusterFacts, StatusAuthenticate: auth.StatusAuthenticate,
		MetricsAuthorize: auth.MetricsAuthorize, Resolve: api.PortResolver(sec.scheme(), port), Client: sec.peerClient(10 * time.Second),
		Gatherer: reg, Metrics: m}, log)
	ln, err := api.Listen(f.httpAddr, api.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("--http-addr %q: %w", f.httpAddr, err)
	}
	var tlsConf *tls.Config
	if sec.tls != nil {
		tlsConf = sec.tls.HTTPServerConfig()
	}
	srv := api.NewHTTPServer(h, tlsConf, api.DefaultLimits, log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if tlsConf != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http api", zap.Error(err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

// closeBounded shuts raft down but gives up waiting after limit: raft waits
// for in-flight RPCs to peers that may be gone, and the process is about to
// exit anyway (the BoltDB log is crash-safe).
func closeBounded(node *cluster.Node, limit time.Duration, log *zap.Logger) {
	done := make(chan error, 1)
	go func() { done <- node.Close() }()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("shutting raft down", zap.Error(err))
		}
	case <-time.After(limit):
		log.Warn("raft shutdown still waiting; exiting without it", zap.Duration("waited", limit))
	}
}

// registerProcessMetrics registers the process-wide metrics besides
// Joiner's own: leader loop passes under controller-runtime's names,
// raft's and memberlist's (go-metrics), karpenter_build_info.
func registerProcessMetrics(reg prometheus.Registerer) error {
	if err := loop.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := cluster.ExportMetrics(reg); err != nil {
		return err
	}
	if err := karpmetrics.RegisterBuildInfo(reg, version, commit); err != nil {
		return fmt.Errorf("registering build info: %w", err)
	}
	return nil
}
