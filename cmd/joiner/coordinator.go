package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
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
}

// newCoordinatorCmd runs a coordinator replica. For now it forms and keeps
// the raft cluster (data dir, DNS addresses, memberlist bootstrap_expect)
// and logs leadership; the leader loops (provisioner, launcher with the
// cloud provider, lifecycle, GC, interruption) and the HTTP API are not
// wired yet.
func newCoordinatorCmd(g *globals) *cobra.Command {
	f := &coordinatorFlags{}
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run a coordinator replica (StatefulSet pod): raft cluster only so far",
		Args:  cobra.NoArgs,
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
	state := fsm.New()
	node, err := cluster.Open(cluster.Config{DataDir: f.dataDir, Bind: f.bind, Advertise: f.advertise}, state, log)
	if err != nil {
		return err
	}
	defer node.Close()
	meta := cluster.Meta{Role: cluster.RoleCoordinator, ID: string(node.ID), RaftAddr: string(node.Addr), Expect: f.bootstrapExpect}
	disc, err := cluster.StartDiscovery(cluster.DiscoveryConfig{Name: string(node.ID), BindAddr: gHost, BindPort: gPort}, meta, log)
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
	log.Info("coordinator starting", zap.String("id", string(node.ID)), zap.String("advertise", f.advertise), zap.String("cluster", f.clusterName))
	go func() {
		if err := cluster.RunBootstrap(ctx, node, disc, meta, time.Second, log); err != nil && ctx.Err() == nil {
			log.Error("bootstrap", zap.Error(err))
		}
	}()
	cluster.MonitorLeadership(ctx, node.Raft, 2*time.Minute, func(ctx context.Context) {
		log.Info("leader: no leader loops wired yet")
		<-ctx.Done()
	}, log)
	return nil
}
