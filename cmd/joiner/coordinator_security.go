package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/leader"
	"github.com/joiner-dev/joiner/internal/httpauth"
)

// securityFlags configure the coordinators' mutual TLS (raft and the HTTP
// API), agents' authentication, the gossip keyring and autopilot's
// dead-server cleanup.
type securityFlags struct {
	tlsCert, tlsKey, tlsCA string
	caSecret, caConfigMap  string
	namespace              string
	sans                   []string
	agentUsers             []string
	statusAccount          string
	insecureDev            bool
	nodeCredentials        bool
	keyringFile            string
	deadServerAfter        time.Duration
	minQuorum              uint
}

func (f *securityFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.caSecret, "tls-ca-secret", "", "Secret (in --namespace) holding the coordinators' CA, created when absent; each replica issues its own certificate from it (the chart's default)")
	fl.StringVar(&f.caConfigMap, "tls-ca-configmap", "", "ConfigMap (in --namespace) the CA certificate is published in for agents")
	fl.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "kube-system"), "namespace of the CA Secret and ConfigMap")
	fl.StringSliceVar(&f.sans, "tls-san", nil, "extra DNS names or IPs in this replica's certificate (the Service agents dial); --advertise's host is always in it")
	fl.StringVar(&f.tlsCert, "tls-cert-file", "", "PEM certificate (SAN: this replica's DNS name; server and client auth), instead of --tls-ca-secret, e.g. from cert-manager")
	fl.StringVar(&f.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fl.StringVar(&f.tlsCA, "tls-ca-file", "", "PEM CA that signs every coordinator's certificate (files are reloaded when they change)")
	fl.StringSliceVar(&f.agentUsers, "agent-service-account", []string{"system:serviceaccount:kube-system:joiner-agent"},
		"ServiceAccount user names whose projected tokens (audience "+karpv1.AgentTokenAudience+", bound to a pod) agents send; each may report only about its pod's node")
	fl.StringVar(&f.statusAccount, "status-service-account", "",
		"ServiceAccount whose tokens for audience "+api.StatusTokenAudience+" read /v1/status (what `joiner status` requests through the API server): system:serviceaccount:<namespace>:<name>, or a name in --namespace; empty: status needs a client certificate")
	fl.BoolVar(&f.nodeCredentials, "accept-node-credentials", true, "also accept a node's own credential (system:node:<name>, e.g. the kubelet's EKS token a systemd-mode agent sends), for reports about that node only")
	fl.BoolVar(&f.insecureDev, "insecure-dev", false, "development only: run raft and the HTTP API without TLS and accept reports from anyone")
	fl.StringVar(&f.keyringFile, "gossip-keyring-file", "", "memberlist keyring: one base64 key (16, 24 or 32 bytes) per line, the primary first; empty: gossip unencrypted")
	fl.DurationVar(&f.deadServerAfter, "dead-server-cleanup-after", 5*time.Minute, "leader removes a raft server unseen in gossip this long (0: never)")
	fl.UintVar(&f.minQuorum, "min-quorum", 0, "never remove a dead server below this many voters (0: --bootstrap-expect)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// errNoTLS: a coordinator without TLS material refuses to start.
var errNoTLS = errors.New("raft and the HTTP API need TLS: set --tls-ca-secret (the chart's default) or --tls-cert-file, --tls-key-file and --tls-ca-file; --insecure-dev runs without, for development only")

// security is what build returns: the TLS material (nil only with
// --insecure-dev), the CA certificate agents and tools trust, the keyring.
type security struct {
	tls     *cluster.TLS
	caPEM   []byte
	keyring *memberlist.Keyring
}

// build loads or creates the TLS material and loads the keyring.
func (f *securityFlags) build(ctx context.Context, kc *kube.Clients, advertise string, log *zap.Logger) (security, error) {
	var out security
	if _, err := f.statusUser(); err != nil {
		return out, err
	}
	files := nonEmpty(f.tlsCert, f.tlsKey, f.tlsCA)
	switch {
	case files != 0 && files != 3:
		return out, fmt.Errorf("--tls-cert-file %q, --tls-key-file %q, --tls-ca-file %q: set all three or none", f.tlsCert, f.tlsKey, f.tlsCA)
	case files == 3 && f.caSecret != "":
		return out, errors.New("--tls-ca-secret and --tls-cert-file: set one of them")
	case files == 3:
		t, err := cluster.LoadTLS(cluster.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA})
		if err != nil {
			return out, err
		}
		ca, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return out, fmt.Errorf("--tls-ca-file: %w", err)
		}
		if f.caConfigMap != "" {
			if err := kube.PublishCA(ctx, kc.Kube, f.namespace, f.caConfigMap, ca); err != nil {
				return out, fmt.Errorf("--tls-ca-configmap: %w", err)
			}
		}
		out.tls, out.caPEM = t, ca
	case f.caSecret != "":
		ca, gossip, err := kube.EnsureSecrets(ctx, kc.Kube, f.namespace, f.caSecret, f.caConfigMap, time.Now())
		if err != nil {
			return out, fmt.Errorf("--tls-ca-secret %s/%s: %w", f.namespace, f.caSecret, err)
		}
		if len(gossip) > 0 && f.keyringFile == "" {
			// The coordinators' shared gossip key, made with the CA.
			if out.keyring, err = memberlist.NewKeyring(nil, gossip); err != nil {
				return out, fmt.Errorf("--tls-ca-secret %s/%s: gossip key: %w", f.namespace, f.caSecret, err)
			}
		}
		host, _, _ := net.SplitHostPort(advertise)
		names := append([]string{host}, f.sans...)
		t, err := cluster.TLSFromCA(ca, host, names)
		if err != nil {
			return out, err
		}
		out.tls, out.caPEM = t, ca.CertPEM
	case f.insecureDev:
		log.Warn("--insecure-dev: raft and the HTTP API run without TLS and accept interruption reports from anyone; never in production")
	default:
		return out, errNoTLS
	}
	switch {
	case out.keyring != nil:
	case f.keyringFile == "":
		log.Warn("gossip is unencrypted: set --gossip-keyring-file (gossip only discovers peers; raft membership needs a certificate)")
	default:
		kr, err := cluster.LoadKeyring(f.keyringFile)
		if err != nil {
			return out, fmt.Errorf("--gossip-keyring-file: %w", err)
		}
		out.keyring = kr
	}
	return out, nil
}

// peerClient is the HTTP client one replica uses for another's API.
func (s security) peerClient(timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if s.tls != nil {
		c.Transport = &http.Transport{TLSClientConfig: s.tls.HTTPClientConfig()}
	}
	return c
}

// scheme of the HTTP API.
func (s security) scheme() string {
	if s.tls == nil {
		return "http"
	}
	return "https"
}

// authenticator checks agents' tokens with TokenReview (nil with
// --insecure-dev: anyone may report).
func (f *securityFlags) authenticator(s security, kc *kube.Clients) api.Authenticator {
	if s.tls == nil {
		return nil
	}
	r := &kube.TokenReviewer{Client: kc.Kube, Audience: karpv1.AgentTokenAudience, Users: f.agentUsers, NodeUsers: f.nodeCredentials}
	return reviewAuthenticator(r.Review)
}

// statusUser is the user of --status-service-account ("" when unset).
func (f *securityFlags) statusUser() (string, error) {
	switch {
	case f.statusAccount == "":
		return "", nil
	case !strings.Contains(f.statusAccount, ":"):
		return kube.ServiceAccountUser(f.namespace, f.statusAccount), nil
	}
	if _, _, err := kube.ParseServiceAccountUser(f.statusAccount); err != nil {
		return "", fmt.Errorf("--status-service-account: %w", err)
	}
	return f.statusAccount, nil
}

// statusAuthenticator lets people and tools without a coordinator
// certificate read /v1/status (`joiner status` through the API server's
// service proxy) with a token the API server issued for
// --status-service-account and audience api.StatusTokenAudience
// (TokenReview): whoever may create that ServiceAccount's tokens may read
// status, and never hands the coordinator their own credential. nil with
// --insecure-dev (status is open) or without --status-service-account.
func (f *securityFlags) statusAuthenticator(s security, kc *kube.Clients) api.Authenticator {
	user, err := f.statusUser()
	if s.tls == nil || user == "" || err != nil {
		return nil
	}
	r := &kube.StatusReviewer{Client: kc.Kube, Audience: api.StatusTokenAudience, User: user}
	return reviewAuthenticator(r.Review)
}

// metricsAuthorizer lets callers without a coordinator certificate scrape
// /metrics with a token the API server authenticates whose user may get
// /metrics (TokenReview + SubjectAccessReview; the chart's metricsReaders).
// nil with --insecure-dev (/metrics is open).
func (f *securityFlags) metricsAuthorizer(s security, kc *kube.Clients) httpauth.Authorizer {
	if s.tls == nil {
		return nil
	}
	return metricsAuthorizer(kc.Kube)
}

// metricsAuthorizer checks a /metrics caller's bearer token through kc
// (the coordinator's or the agent's client).
func metricsAuthorizer(kc kubernetes.Interface) httpauth.Authorizer {
	r := &kube.AccessReviewer{Client: kc, Path: kube.MetricsPath, Verb: "get"}
	return r.Authorize
}

// reviewAuthenticator serves the API with a token review: a rejected
// token is unauthenticated, a denied user forbidden, a busy reviewer busy
// (kube.HTTPAuthError).
func reviewAuthenticator(review func(context.Context, string) (kube.TokenIdentity, error)) api.Authenticator {
	return func(ctx context.Context, token string) (api.Identity, error) {
		id, err := review(ctx, token)
		if err != nil {
			return api.Identity{}, kube.HTTPAuthError(err)
		}
		return api.Identity{User: id.User, Node: id.Node}, nil
	}
}

// nodeInstance maps a node to its instance from the informer cache.
func nodeInstance(c *kube.Cache) func(string) (string, bool) {
	return func(name string) (string, bool) {
		n := c.Node(name)
		if n == nil {
			return "", false
		}
		id := cloud.InstanceID(n.Spec.ProviderID)
		return id, id != ""
	}
}

// writeToolFiles keeps dataDir/tls/{tls.crt,tls.key,ca.crt} current for
// `joiner status` run in the pod, until ctx ends.
func writeToolFiles(ctx context.Context, s security, dataDir string, log *zap.Logger) {
	if s.tls == nil {
		return
	}
	dir := filepath.Join(dataDir, "tls")
	for {
		if err := s.tls.WriteFiles(dir, s.caPEM); err != nil {
			log.Warn("writing TLS files for local tools", zap.String("dir", dir), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// autopilot builds the leader-only autopilot loop (run beside the other
// leader loops, not after the Kubernetes cache syncs). Other replicas' raft
// stats come from their HTTP API (same port, the peer certificate).
func (f *securityFlags) autopilot(node *cluster.Node, disc *cluster.Discovery, cf *coordinatorFlags, s security, log *zap.Logger) leader.Loop {
	_, httpPort, _ := net.SplitHostPort(cf.httpAddr)
	mq := f.minQuorum
	if mq == 0 {
		mq = uint(cf.bootstrapExpect)
	}
	ap := &cluster.Autopilot{
		Raft: node.Raft, ID: node.ID, Members: disc, Log: log.Named("autopilot"),
		Stats:  api.StatsFetcher(s.peerClient(5*time.Second), api.PortResolver(s.scheme(), httpPort)),
		Config: cluster.AutopilotConfig{DeadServerAfter: f.deadServerAfter, MinQuorum: mq},
	}
	return leader.Loop{Name: "autopilot", Run: ap.Run}
}

func nonEmpty(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}
