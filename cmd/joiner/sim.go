package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/joiner-dev/joiner/cloud/sim"
)

func init() { addCommand(newSimCmd) }

func newSimCmd(g *globals) *cobra.Command {
	var listen, kubeconfig, kubeContext, configPath, queue string
	var bootDelay time.Duration
	var kubeQPS float32
	var kubeBurst int
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a simulated EC2 region on 127.0.0.1",
		Long: `Run a simulated EC2 region: the EC2 Query API subset Joiner's AWS provider calls and SSM
GetParameter (point the SDK's endpoint at it), tagged subnets, security groups and AMIs (karpenter.sh/discovery=sim
by default), ClientToken idempotency, injectable capacity errors, spot interruptions and per-instance IMDS;
EKS DescribeCluster of the cluster "sim" (Kubernetes ` + sim.DefaultClusterVersion + `, service CIDR ` + sim.DefaultServiceCIDR + `).
With --kubeconfig, booted instances register Nodes built from their user data, and the cluster's endpoint and
CA are the kubeconfig's.

Control API: POST /control/capacity-errors {"instanceType","zone","capacityType","code"},
POST /control/instances/<id>/interrupt, POST /control/instances/<id>/{rebalance,scheduled-change,stop},
GET /control/instances; IMDS: /imds/<id>/latest/...; with --interruption-queue, SQS (GetQueueUrl, ReceiveMessage,
DeleteMessage, SendMessage) serves that queue, which receives the EventBridge events of those (and every state change).`,
		Example: `  # a cloud only
  joiner sim
  # instances that boot register Nodes in a kind cluster, 500 ms after launch
  joiner sim --kubeconfig ~/.kube/config --context kind-joiner --boot-delay 500ms --interruption-queue joiner-sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return fmt.Errorf("--listen %q: %w", listen, err)
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("--listen %q: the sim binds loopback addresses only", listen)
			}
			cfg := sim.DefaultConfig()
			if configPath != "" {
				if cfg, err = sim.LoadConfig(configPath); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("interruption-queue") {
				cfg.InterruptionQueue = queue
			}
			if cmd.Flags().Changed("boot-delay") {
				cfg.BootDelay = sim.Duration{Duration: bootDelay}
			}
			var kube kubernetes.Interface
			if kubeconfig != "" {
				rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
					&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
				if err != nil {
					return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
				}
				if kubeQPS <= 0 || kubeBurst <= 0 {
					return fmt.Errorf("--kube-qps %v, --kube-burst %d: want both > 0", kubeQPS, kubeBurst)
				}
				// The sim writes every Node and its heartbeats: it must not
				// be what a measurement measures (client-go's default is 5/s).
				rc.QPS, rc.Burst = kubeQPS, kubeBurst
				if kube, err = kubernetes.NewForConfig(rc); err != nil {
					return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
				}
				if err := joinKubeconfig(&cfg.Cluster, rc); err != nil {
					return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
				}
			}
			s := sim.New(sim.Options{Config: cfg, Kube: kube, Logger: log})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", listen, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			runDone := make(chan struct{})
			go func() { _ = s.Run(ctx); close(runDone) }()
			defer func() { stop(); <-runDone }()
			fmt.Fprintf(cmd.OutOrStdout(), "endpoint: http://%s\n", ln.Addr())
			log.Info("sim listening", zap.String("endpoint", "http://"+ln.Addr().String()),
				zap.String("region", cfg.Region), zap.Bool("kubernetes", kube != nil), zap.Duration("boot-delay", cfg.BootDelay.Duration),
				zap.Float32("kube-qps", kubeQPS), zap.Int("kube-burst", kubeBurst))
			select {
			case <-ctx.Done():
			case err := <-done:
				if !errors.Is(err, http.ErrServerClosed) {
					return fmt.Errorf("serving: %w", err)
				}
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shutdown)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:4566", "address to listen on (loopback only)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "cluster to register Nodes in, and whose API server and CA the default EKS cluster's DescribeCluster gives (none: the sim is a cloud only)")
	fl.StringVar(&kubeContext, "context", "", "context of --kubeconfig (empty: its current context)")
	fl.StringVar(&configPath, "config", "", "sim config (JSON: region, zones, subnets, securityGroups, images, parameters, bootDelay)")
	fl.DurationVar(&bootDelay, "boot-delay", 2*time.Second, "time from launch to a running instance and its Node")
	fl.StringVar(&queue, "interruption-queue", "", "SQS queue the sim's EventBridge rules send interruption and state-change events to (empty: none)")
	fl.Float32Var(&kubeQPS, "kube-qps", 500, "Kubernetes API requests per second the sim may send (Node registration and heartbeats)")
	fl.IntVar(&kubeBurst, "kube-burst", 1000, "Kubernetes API request burst of the sim")
	_ = cmd.MarkFlagFilename("kubeconfig")
	_ = cmd.MarkFlagFilename("config", "json")
	return cmd
}

// joinKubeconfig makes the default simulated EKS cluster describe the
// kubeconfig's API server and CA, so nodes are told to join the cluster
// the sim registers them in. A cluster the config file changed is kept.
func joinKubeconfig(c *sim.EKSCluster, rc *rest.Config) error {
	if c.Endpoint != sim.DefaultCluster().Endpoint {
		return nil
	}
	c.Endpoint = rc.Host
	ca, err := clusterCABundle(rc, "")
	if err != nil || ca == "" {
		return err
	}
	pem, err := base64.StdEncoding.DecodeString(ca)
	if err != nil {
		return fmt.Errorf("the kubeconfig's CA: %w", err)
	}
	c.CA = string(pem)
	return nil
}
