package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/cloudadapter"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/userdata"
)

// leaderFlags configure the cluster and cloud the leader loops act on.
type leaderFlags struct {
	kubeconfig     string
	awsEndpoint    string
	region         string
	serviceCIDR    string
	caFile         string
	k8sVersion     string
	bootstrapImage string
	simulated      bool
}

func (f *leaderFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage (empty: in-cluster service account)")
	fl.StringVar(&f.awsEndpoint, "aws-endpoint", "", "EC2 and SSM endpoint override, e.g. joiner sim's http://127.0.0.1:4566 (empty: AWS)")
	fl.StringVar(&f.region, "region", "", "AWS region (empty: from the environment / IMDS)")
	fl.StringVar(&f.serviceCIDR, "service-cidr", "10.100.0.0/16", "cluster service CIDR new nodes are told (cluster DNS is its 10th address)")
	fl.StringVar(&f.caFile, "cluster-ca-file", "", "cluster CA (PEM or base64) new nodes trust (empty: the kubeconfig's CA)")
	fl.StringVar(&f.k8sVersion, "kubernetes-version", "1.32", "Kubernetes minor version for EKS AMI aliases")
	fl.StringVar(&f.bootstrapImage, "bootstrap-image", "", "agent image the user data starts where the agent is not baked into the AMI")
	fl.BoolVar(&f.simulated, "simulated-cloud", false, "the cloud is joiner sim: nobody else removes startup taints, so the coordinator does")
}

// leaderDeps are built once per process; the loops run once per term.
type leaderDeps struct {
	clients  *kube.Clients
	cache    *kube.Cache
	provider *joineraws.Provider
	loops    []namedLoop
}

type namedLoop struct {
	name string
	run  func(ctx context.Context) error
}

// restConfig loads the kubeconfig or the in-cluster config.
func (f *leaderFlags) restConfig() (*rest.Config, error) {
	if f.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig not set and not running in a pod: %w", err)
	}
	return c, nil
}

// awsConfig loads the SDK config; against an endpoint override without
// credentials in the environment (the sim) it uses static dummy ones.
func (f *leaderFlags) awsConfig(ctx context.Context) (awssdk.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if f.region != "" {
		opts = append(opts, awsconfig.WithRegion(f.region))
	}
	if f.awsEndpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("joiner-sim", "joiner-sim", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return cfg, fmt.Errorf("loading AWS config: %w", err)
	}
	if cfg.Region == "" {
		return cfg, errors.New("--region: required (no region in the environment)")
	}
	return cfg, nil
}

// buildLeader wires the clients, cache, cloud provider and every leader
// loop. Metrics register on reg once; the loops run per leadership term.
func buildLeader(ctx context.Context, f *coordinatorFlags, state *fsm.FSM, node *cluster.Node, reg prometheus.Registerer, log *zap.Logger) (*leaderDeps, error) {
	lf := &f.leader
	rc, err := lf.restConfig()
	if err != nil {
		return nil, err
	}
	clients, err := kube.NewClients(rc)
	if err != nil {
		return nil, err
	}
	awsCfg, err := lf.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	ec2c, ssmc := joineraws.NewClients(awsCfg, lf.awsEndpoint)
	provider, err := joineraws.New(joineraws.Options{EC2: ec2c, SSM: ssmc, Cluster: f.clusterName, Region: awsCfg.Region,
		KubernetesVersion: lf.k8sVersion, Logger: log})
	if err != nil {
		return nil, err
	}
	uc := userdata.Cluster{Name: f.clusterName, Endpoint: f.clusterEndpoint, ServiceCIDR: lf.serviceCIDR}
	if uc.Endpoint == "" {
		uc.Endpoint = rc.Host
	}
	switch {
	case lf.caFile != "":
		b, err := os.ReadFile(lf.caFile)
		if err != nil {
			return nil, fmt.Errorf("--cluster-ca-file: %w", err)
		}
		uc.CABundle = caBundle(b)
	case len(rc.CAData) > 0:
		uc.CABundle = caBundle(rc.CAData)
	case rc.CAFile != "":
		if b, err := os.ReadFile(rc.CAFile); err == nil {
			uc.CABundle = caBundle(b)
		}
	}

	d := &leaderDeps{clients: clients, cache: kube.NewCache(clients, log), provider: provider}
	proposer := cluster.RaftProposer{Raft: node.Raft}
	recorder := kube.NewRecorder(ctx, clients.Kube, "joiner")

	launch := launcher.New(launcher.Config{Cluster: f.clusterName, Registerer: reg}, cloudadapter.New(f.clusterName, provider), proposer, state, log)
	prov, err := provisioner.New(provisioner.Config{Cluster: uc, BootstrapImage: lf.bootstrapImage, Wake: launch.Wake},
		d.cache, clients, state, proposer, provider, reg, recorder, log)
	if err != nil {
		return nil, err
	}
	d.loops = append(d.loops,
		// Spot prices, launch-template adoption and clean-up: leader only,
		// since it deletes unused launch templates.
		namedLoop{"cloud", provider.Run},
		namedLoop{"launcher", launch.Run},
		namedLoop{"provisioner", prov.Run},
	)
	extra, err := moreLeaderLoops(leaderWiring{flags: f, deps: d, state: state, proposer: proposer,
		provisioner: prov, recorder: recorder, reg: reg, log: log})
	if err != nil {
		return nil, err
	}
	d.loops = append(d.loops, extra...)
	return d, nil
}

// runLeader runs every leader loop until ctx (the term) ends; a loop that
// fails is restarted after a pause, so one bad loop does not stop the rest.
func (d *leaderDeps) runLeader(ctx context.Context, log *zap.Logger) {
	// The loops act on a complete view only; say so when it takes long
	// (missing CRDs or RBAC keep an informer from listing).
	for waited := time.Duration(0); !d.cache.Synced(); waited += time.Second {
		if waited > 0 && waited%(30*time.Second) == 0 {
			log.Warn("leader loops waiting for the informer caches: are Joiner's CRDs installed and its RBAC applied?",
				zap.Duration("waited", waited))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	log.Info("leader loops starting", zap.Int("loops", len(d.loops)))
	var waits []func()
	for _, l := range d.loops {
		waits = append(waits, goLoop(ctx, l, log))
	}
	for _, wait := range waits {
		wait()
	}
	log.Info("leader loops stopped")
}
