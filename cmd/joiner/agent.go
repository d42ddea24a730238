package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/joiner-dev/joiner/agent"
	agentconfig "github.com/joiner-dev/joiner/agent/config"
	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/events"
)

func init() { addCommand(newAgentCmd) }

type agentFlags struct {
	configPath        string
	nodeName          string
	nodeClaim         string
	kubeconfig        string
	imdsEndpoint      string
	imdsAllowV1       bool
	imdsTokenTTL      time.Duration
	interval          time.Duration
	kinds             []string
	policy            map[string]string
	dryRun            bool
	forceAfter        time.Duration
	coordinators      []string
	tokenFile         string
	coordinatorDrains bool
	caFile            string
	metricsAddr       string
	releasePages      bool
	minWindow         time.Duration
}

func newAgentCmd(g *globals) *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (DaemonSet pod or systemd service): IMDS interruption notices, drain, report",
		Long: `Run the node agent. It polls IMDS (v2) for spot interruption notices, rebalance
recommendations, scheduled events and the ASG target lifecycle state; taints, cordons and
drains the node per kind; and reports each notice to the coordinators until acknowledged.
As a systemd service use Type=notify (READY=1 and watchdog pings are sent).`,
		Example: `  # as the chart's DaemonSet runs it
  joiner agent --coordinator https://joiner-coordinator.kube-system.svc:8080 \
    --coordinator-token-file /var/run/secrets/joiner/token --coordinator-ca-file /etc/joiner/ca/ca.crt --coordinator-drains
  # try the drain policy on a node without acting
  joiner agent --dry-run --policy rebalance-recommendation=drain --kubeconfig ~/.kube/config --node-name ip-10-0-1-2.ec2.internal`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg, kube, err := f.build(cmd)
			if err != nil {
				return &errExitCode{code: 2, err: err}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			// The node's Events, as Karpenter's source, with the node as host.
			cfg.Drain.Recorder = events.NewRecorder(ctx, kube, cfg.NodeName)
			a, err := agent.New(cfg, kube, log.Named("agent"))
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", agentconfig.DefaultPath, "agent config file written by joiner bootstrap (optional)")
	fl.StringVar(&f.nodeName, "node-name", "", "Kubernetes node name (default: config nodeName, $NODE_NAME, then the hostname)")
	fl.StringVar(&f.nodeClaim, "node-claim", os.Getenv("NODE_CLAIM"), "this node's NodeClaim name (for reports)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster config, then $KUBECONFIG)")
	fl.StringVar(&f.imdsEndpoint, "imds-endpoint", "", "IMDS endpoint (default http://169.254.169.254)")
	fl.BoolVar(&f.imdsAllowV1, "imds-allow-v1", false, "fall back to IMDSv1 when no IMDSv2 token can be had (off: fail loudly)")
	fl.DurationVar(&f.imdsTokenTTL, "imds-token-ttl", 6*time.Hour, "IMDSv2 token lifetime to request (refreshed before expiry)")
	fl.DurationVar(&f.interval, "poll-interval", time.Second, "IMDS poll interval")
	fl.StringSliceVar(&f.kinds, "kinds", nil, "notice kinds to watch (default all: spot-interruption, rebalance-recommendation, scheduled-event, asg-lifecycle)")
	fl.StringToStringVar(&f.policy, "policy", nil, "per-kind action, e.g. rebalance-recommendation=drain (drain, taint or ignore; default drain but rebalance-recommendation=ignore)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "log taints, cordons and evictions instead of making them")
	fl.DurationVar(&f.forceAfter, "force-after", 0, "delete pods whose eviction is still blocked this long after a drain starts (0: never)")
	fl.StringSliceVar(&f.coordinators, "coordinator", nil, "coordinator API base URL (repeatable; any replica)")
	fl.StringVar(&f.tokenFile, "coordinator-token-file", "", "file holding the bearer token for the coordinator API, read at each report (the projected ServiceAccount token the chart mounts)")
	fl.StringVar(&f.caFile, "coordinator-ca-file", "", "PEM CA the coordinators' certificates are checked against (the chart mounts the coordinators' CA ConfigMap)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:9464", "serve /metrics and /healthz here (empty: off). A loopback address serves plain HTTP to anyone on the node; any other serves HTTPS (a self-signed certificate made at start) and /metrics only to bearer tokens whose user may get /metrics (TokenReview and SubjectAccessReview; the chart's metricsReaders)")
	fl.BoolVar(&f.releasePages, "release-startup-pages", true, "once ready, page out the binary's start-up-only code (lower RSS; Linux)")
	fl.BoolVar(&f.coordinatorDrains, "coordinator-drains", false, "only cordon and taint this node and report; the coordinator evicts the pods (the agent then needs no eviction or pod delete rights)")
	fl.DurationVar(&f.minWindow, "min-drain-window", 30*time.Second, "give a drain at least this long even when the notice's deadline is nearer or past")
	_ = cmd.RegisterFlagCompletionFunc("kinds", cobra.FixedCompletions(noticeKinds(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("config")
	_ = cmd.MarkFlagFilename("kubeconfig")
	return cmd
}

func (f *agentFlags) build(cmd *cobra.Command) (agent.Config, kubernetes.Interface, error) {
	cfg := agent.Config{
		NodeName: f.nodeName, NodeClaim: f.nodeClaim, Interval: f.interval, MetricsAddr: f.metricsAddr, Version: version,
		ReleaseStartupPages: f.releasePages, MinDrainWindow: f.minWindow, CoordinatorDrains: f.coordinatorDrains,
		IMDS: imds.ClientOptions{Endpoint: f.imdsEndpoint, AllowIMDSv1: f.imdsAllowV1, TokenTTL: f.imdsTokenTTL},
	}
	if cfg.NodeName == "" {
		fc, err := agentconfig.Load(f.configPath)
		switch {
		case err == nil:
			cfg.NodeName = fc.NodeName
		case errors.Is(err, fs.ErrNotExist) && !cmd.Flags().Changed("config"):
		default:
			return cfg, nil, err
		}
	}
	if cfg.NodeName == "" {
		cfg.NodeName = os.Getenv("NODE_NAME")
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return cfg, nil, fmt.Errorf("--node-name not set and no hostname: %w", err)
		}
		cfg.NodeName = h
	}
	for _, k := range f.kinds {
		kind, err := parseKind(k)
		if err != nil {
			return cfg, nil, fmt.Errorf("--kinds: %w", err)
		}
		cfg.Kinds = append(cfg.Kinds, kind)
	}
	cfg.Policy = agent.Policy{}
	for k, v := range f.policy {
		kind, err := parseKind(k)
		if err != nil {
			return cfg, nil, fmt.Errorf("--policy: %w", err)
		}
		act, err := agent.ParseAction(v)
		if err != nil {
			return cfg, nil, fmt.Errorf("--policy %s: %w", k, err)
		}
		cfg.Policy[kind] = act
	}
	cfg.Drain.DryRun = f.dryRun
	cfg.Drain.ForceAfter = f.forceAfter
	cfg.Report.Endpoints = f.coordinators
	if f.tokenFile != "" {
		if _, err := os.Stat(f.tokenFile); err != nil {
			return cfg, nil, fmt.Errorf("--coordinator-token-file: %w", err)
		}
		cfg.Report.TokenFile = f.tokenFile
	}
	if f.caFile != "" {
		b, err := os.ReadFile(f.caFile)
		if err != nil {
			return cfg, nil, fmt.Errorf("--coordinator-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return cfg, nil, fmt.Errorf("--coordinator-ca-file %s: no PEM certificate", f.caFile)
		}
		cfg.Report.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
	}
	rc, err := kubeConfig(f.kubeconfig)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.Report.TokenFile == "" {
		// A systemd unit with the kubelet's kubeconfig: the node's own
		// credential identifies it to the coordinators.
		cfg.Report.TokenSource = bearerToken(rc)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return cfg, nil, err
	}
	cfg.MetricsAuthorize = metricsAuthorizer(kube)
	return cfg, kube, nil
}

func parseKind(s string) (imds.Kind, error) {
	for _, k := range imds.Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("notice kind %q: want one of %v", s, imds.Kinds)
}

func kubeClient(path string) (kubernetes.Interface, error) {
	rc, err := kubeConfig(path)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// bearerToken returns the bearer token rc sends to the API server (a
// static token, a token file, or an exec plugin's, e.g. EKS's `aws eks
// get-token` in the kubelet's kubeconfig), taken from the request its
// transport would send; none for client-certificate credentials.
func bearerToken(rc *rest.Config) func() (string, error) {
	return func() (string, error) {
		var got string
		rt, err := rest.HTTPWrappersForConfig(rc, roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				got = t
			}
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
		}))
		if err != nil {
			return "", fmt.Errorf("kubeconfig credentials: %w", err)
		}
		req, err := http.NewRequest(http.MethodGet, rc.Host, nil)
		if err != nil {
			return "", err
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return "", fmt.Errorf("kubeconfig credentials: %w", err)
		}
		resp.Body.Close()
		if got == "" {
			return "", errors.New("the kubeconfig's credentials carry no bearer token (client certificates cannot identify the node to the coordinators; use --coordinator-token-file)")
		}
		return got, nil
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func kubeConfig(path string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if path == "" {
		if rc, err = rest.InClusterConfig(); err != nil {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst = 20, 40
	rc.UserAgent = "joiner-agent/" + version
	return rc, nil
}

// noticeKinds are the IMDS notice kinds --kinds and --policy take.
func noticeKinds() []string {
	out := make([]string, len(imds.Kinds))
	for i, k := range imds.Kinds {
		out[i] = string(k)
	}
	return out
}
