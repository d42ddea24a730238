package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/leader"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/featuregates"
)

// leaderFlags configure the cluster and cloud the leader loops act on.
type leaderFlags struct {
	kubeconfig     string
	kubeQPS        float32
	kubeBurst      int
	awsEndpoint    string
	region         string
	serviceCIDR    string
	caFile         string
	caBundle       string
	k8sVersion     string
	bootstrapImage string
	simulated      bool
	minValues      string
	stateRetention time.Duration
	classRefresh   time.Duration
	featureGates   string
	// queueName is the interruption queue (--interruption-queue).
	queueName string
	// isolatedVPC: the AWS Pricing API is not reachable (--isolated-vpc).
	isolatedVPC bool
	// batchIdle, batchMax bound a provisioning batch (Karpenter's
	// BATCH_IDLE_DURATION, BATCH_MAX_DURATION).
	batchIdle, batchMax time.Duration
	// amiRefresh, subnetRefresh are Karpenter's AMI_REFRESH_INTERVAL and
	// SUBNET_REFRESH_INTERVAL: a class is resolved as a whole, so the
	// smaller one set replaces classRefresh.
	amiRefresh, subnetRefresh time.Duration
}

func (f *leaderFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage (empty: in-cluster service account)")
	fl.Float32Var(&f.kubeQPS, "kube-client-qps", 200, "Kubernetes API requests per second the coordinator may send (Karpenter's KUBE_CLIENT_QPS)")
	fl.IntVar(&f.kubeBurst, "kube-client-burst", 300, "Kubernetes API request burst (Karpenter's KUBE_CLIENT_BURST)")
	fl.StringVar(&f.awsEndpoint, "aws-endpoint", "", "EC2 and SSM endpoint override, e.g. joiner sim's http://127.0.0.1:4566 (empty: AWS)")
	fl.StringVar(&f.region, "region", "", "AWS region (empty: from the environment / IMDS)")
	fl.StringVar(&f.serviceCIDR, "service-cidr", "", "cluster service CIDR new nodes are told; cluster DNS is the kube-system/kube-dns Service's cluster IP, else the CIDR's 10th address (empty: discovered with EKS DescribeCluster)")
	fl.StringVar(&f.caFile, "cluster-ca-file", "", "file with the cluster CA (PEM or base64) new nodes trust (empty: --cluster-ca-bundle, else the kubeconfig's CA, else discovered)")
	fl.StringVar(&f.caBundle, "cluster-ca-bundle", "", "cluster CA bundle (base64 PEM) new nodes trust, Karpenter's CLUSTER_CA_BUNDLE (empty: --cluster-ca-file, else the kubeconfig's CA, else discovered)")
	fl.StringVar(&f.k8sVersion, "kubernetes-version", "", "Kubernetes minor version (1.34) of EKS AMI aliases (empty: discovered with EKS DescribeCluster, refreshed every 5 minutes)")
	fl.StringVar(&f.bootstrapImage, "bootstrap-image", "", "agent image the user data starts where the agent is not baked into the AMI")
	fl.StringVar(&f.minValues, "min-values-policy", string(scheduler.MinValuesStrict),
		"Strict: a NodePool's minValues is never relaxed (pods wait); BestEffort: relaxed when nothing can keep it, and the NodeClaim says so (Karpenter's MIN_VALUES_POLICY)")
	fl.DurationVar(&f.stateRetention, "state-retention", time.Hour,
		"how long handled interruption reports and finished launch/termination intents stay in the replicated state (0: forever)")
	fl.DurationVar(&f.classRefresh, "nodeclass-refresh", 5*time.Minute,
		"how often ready EC2NodeClasses are resolved again (new AMIs behind an alias, subnets and security groups that come and go: dynamic drift)")
	fl.StringVar(&f.featureGates, "feature-gates", featuregates.Default,
		"Karpenter's feature gates, Name=bool,... (its names and defaults; Joiner acts on StaticCapacity: NodePools with spec.replicas keep that many nodes, SpotToSpotConsolidation: consolidation may replace spot nodes by cheaper spot nodes, and ReservedCapacity: EC2NodeClass capacityReservationSelectorTerms offer reserved capacity; NodeRepair, NodeOverlay and CapacityBuffer set true are refused, as Joiner does not implement them)")
	fl.StringVar(&f.queueName, "interruption-queue", "",
		"SQS queue of EC2 spot interruption, rebalance, state-change and AWS Health events (EventBridge rules), Karpenter's INTERRUPTION_QUEUE (empty: agents' IMDS reports only)")
	fl.BoolVar(&f.isolatedVPC, "isolated-vpc", false,
		"the VPC reaches no AWS service without a VPC endpoint, Karpenter's ISOLATED_VPC: on-demand prices are not read from the AWS Pricing API (the embedded ones of the region, else us-east-1's, stay), and a deleted EC2NodeClass's instance profiles are left (no IAM calls)")
	fl.BoolVar(&f.simulated, "simulated-cloud", false, "the cloud is joiner sim: nobody else removes startup taints, so the coordinator does")
	fl.DurationVar(&f.batchIdle, "batch-idle-duration", time.Second,
		"a batch of pending pods ends once none arrived for this long (Karpenter's BATCH_IDLE_DURATION)")
	fl.DurationVar(&f.batchMax, "batch-max-duration", 10*time.Second,
		"the longest a batch of pending pods grows before it is planned (Karpenter's BATCH_MAX_DURATION)")
	fl.DurationVar(&f.amiRefresh, "ami-refresh-interval", 0,
		"Karpenter's AMI_REFRESH_INTERVAL (at least 1m): EC2NodeClasses are resolved again at least this often (0: --nodeclass-refresh)")
	fl.DurationVar(&f.subnetRefresh, "subnet-refresh-interval", 0,
		"Karpenter's SUBNET_REFRESH_INTERVAL (at least 1m): EC2NodeClasses are resolved again at least this often (0: --nodeclass-refresh)")
}

// refreshes checks the batch and refresh durations and folds the AMI and
// subnet refresh intervals into classRefresh (the smaller one set).
func (f *leaderFlags) refreshes() error {
	if f.batchIdle <= 0 || f.batchMax <= 0 {
		return fmt.Errorf("--batch-idle-duration %s, --batch-max-duration %s: want both > 0", f.batchIdle, f.batchMax)
	}
	var refresh time.Duration
	for _, r := range []struct {
		flag string
		d    time.Duration
	}{{"--ami-refresh-interval", f.amiRefresh}, {"--subnet-refresh-interval", f.subnetRefresh}} {
		if r.d == 0 {
			continue
		}
		if r.d < time.Minute {
			return fmt.Errorf("%s %s: want at least 1m", r.flag, r.d)
		}
		if refresh == 0 || r.d < refresh {
			refresh = r.d
		}
	}
	if refresh > 0 {
		f.classRefresh = refresh
	}
	return nil
}

// gates parses --feature-gates and refuses a gate Joiner does not implement
// set true (NodeRepair, NodeOverlay, CapacityBuffer), as the Helm chart
// does, rather than ignoring it. It also returns the unknown names.
func (f *leaderFlags) gates() (featuregates.Gates, []string, error) {
	gates, unknown, err := featuregates.Parse(f.featureGates)
	if err != nil {
		return gates, nil, fmt.Errorf("--feature-gates %q: %w", f.featureGates, err)
	}
	if on := gates.Unsupported(); len(on) > 0 {
		refused := make([]string, len(on))
		for i, name := range on {
			refused[i] = name + "=true is not supported: Joiner does not implement " + name
		}
		return gates, nil, fmt.Errorf("--feature-gates %q: %s (set it false or leave it out)", f.featureGates, strings.Join(refused, "; "))
	}
	return gates, unknown, nil
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

// clients builds the Kubernetes clients with the configured rate limits.
func (f *leaderFlags) clients() (*kube.Clients, *rest.Config, error) {
	rc, err := f.restConfig()
	if err != nil {
		return nil, nil, err
	}
	if f.kubeQPS <= 0 || f.kubeBurst <= 0 {
		return nil, nil, fmt.Errorf("--kube-client-qps %v, --kube-client-burst %d: want both > 0", f.kubeQPS, f.kubeBurst)
	}
	rc.QPS, rc.Burst = f.kubeQPS, f.kubeBurst
	clients, err := kube.NewClients(rc)
	if err != nil {
		return nil, nil, err
	}
	return clients, rc, nil
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

// buildLeader wires the clients, cache and cloud provider into the
// leader's work (coordinator/leader). Metrics register on reg once; the
// loops run once per term.
func buildLeader(ctx context.Context, f *coordinatorFlags, clients *kube.Clients, rc *rest.Config, state *fsm.FSM, node *cluster.Node,
	membership *leader.Loop, reg prometheus.Registerer, log *zap.Logger) (*leader.Leader, *kube.Cache, *nodeFacts, error) {
	lf := &f.leader
	policy := scheduler.MinValuesPolicy(lf.minValues)
	if policy != scheduler.MinValuesStrict && policy != scheduler.MinValuesBestEffort {
		return nil, nil, nil, fmt.Errorf("--min-values-policy %q: want %s or %s", lf.minValues, scheduler.MinValuesStrict, scheduler.MinValuesBestEffort)
	}
	if err := lf.refreshes(); err != nil {
		return nil, nil, nil, err
	}
	gates, unknown, err := lf.gates()
	if err != nil {
		return nil, nil, nil, err
	}
	if len(unknown) > 0 {
		log.Warn("ignoring unknown feature gates", zap.Strings("gate", unknown), zap.Strings("known", featuregates.Names))
	}
	awsCfg, err := lf.awsConfig(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	ac := joineraws.NewClients(awsCfg, lf.awsEndpoint)
	queue, err := lf.interruptionQueue(ac.SQS)
	if err != nil {
		return nil, nil, nil, err
	}
	discovery, err := discoverCluster(ctx, f, ac.EKS, rc, log)
	if err != nil {
		return nil, nil, nil, err
	}
	// Selector resolutions are cached no longer than a class refresh, so a
	// refresh sees what EC2 and SSM say now (a new AMI release).
	provider, err := joineraws.New(joineraws.Options{EC2: ac.EC2, SSM: ac.SSM, IAM: ac.IAM, Cluster: f.clusterName, Region: awsCfg.Region,
		Discovery: discovery, Logger: log, CacheTTL: min(lf.classRefresh, 5*time.Minute), NoReservedCapacity: !gates.ReservedCapacity,
		Pricing: ac.Pricing, IsolatedVPC: lf.isolatedVPC, Registerer: reg})
	if err != nil {
		return nil, nil, nil, err
	}
	// The CA bundle known at start is the drift hash's (as Karpenter's).
	facts, _ := discovery.Cluster()
	nf := &nodeFacts{discovery: discovery, dnsIP: kubeDNSIP(ctx, clients.Kube, log)}
	uc := nodeCluster(facts, nf.dnsIP)
	cache := kube.NewCache(clients, log)
	lead, err := leader.New(leader.Deps{
		Cluster: f.clusterName, UserData: uc, NodeCluster: leaderCluster(nf), BootstrapImage: lf.bootstrapImage, RemoveStartupTaints: lf.simulated,
		MinValuesPolicy: policy, FeatureGates: gates, BatchIdle: lf.batchIdle, BatchMax: lf.batchMax,
		Clients: clients, Kube: clients.Kube, Cache: cache, Cloud: provider, State: state,
		Raft: cluster.RaftProposer{Raft: node.Raft}, Membership: membership, StateRetention: lf.stateRetention, NodeClassRefresh: lf.classRefresh,
		InterruptionQueue: queue, Recorder: events.NewRecorder(ctx, clients.Kube, ""), Registerer: reg, Log: log,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return lead, cache, nf, nil
}

// The AWS provider marks interrupted spot offerings and capacity
// reservations unavailable (the interruption handler's Offerings).
var _ interruption.Offerings = (*joineraws.Provider)(nil)
