package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/leader"
)

// securityFlags configure raft's mutual TLS, the gossip keyring and
// autopilot's dead-server cleanup.
type securityFlags struct {
	tlsCert, tlsKey, tlsCA string
	keyringFile            string
	deadServerAfter        time.Duration
	minQuorum              uint
}

func (f *securityFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.tlsCert, "tls-cert-file", "", "PEM certificate for raft mutual TLS (SAN: this replica's DNS name; server and client auth)")
	fl.StringVar(&f.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fl.StringVar(&f.tlsCA, "tls-ca-file", "", "PEM CA that signs every coordinator's certificate (files are reloaded when they change)")
	fl.StringVar(&f.keyringFile, "gossip-keyring-file", "", "memberlist keyring: one base64 key (16, 24 or 32 bytes) per line, the primary first; empty: gossip unencrypted")
	fl.DurationVar(&f.deadServerAfter, "dead-server-cleanup-after", 5*time.Minute, "leader removes a raft server unseen in gossip this long (0: never)")
	fl.UintVar(&f.minQuorum, "min-quorum", 0, "never remove a dead server below this many voters (0: --bootstrap-expect)")
}

// build loads the TLS material and keyring. Without TLS or a keyring it
// logs a warning: raft or gossip traffic is then plaintext and
// unauthenticated.
func (f *securityFlags) build(log *zap.Logger) (*cluster.TLS, *memberlist.Keyring, error) {
	var t *cluster.TLS
	switch n := nonEmpty(f.tlsCert, f.tlsKey, f.tlsCA); n {
	case 0:
		log.Warn("raft transport is plaintext: set --tls-cert-file, --tls-key-file and --tls-ca-file for mutual TLS")
	case 3:
		var err error
		if t, err = cluster.LoadTLS(cluster.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("--tls-cert-file %q, --tls-key-file %q, --tls-ca-file %q: set all three or none", f.tlsCert, f.tlsKey, f.tlsCA)
	}
	var kr *memberlist.Keyring
	if f.keyringFile == "" {
		log.Warn("gossip is unencrypted: set --gossip-keyring-file")
	} else {
		var err error
		if kr, err = cluster.LoadKeyring(f.keyringFile); err != nil {
			return nil, nil, fmt.Errorf("--gossip-keyring-file: %w", err)
		}
	}
	return t, kr, nil
}

// autopilot builds the leader-only autopilot loop (run beside the other
// leader loops, not after the Kubernetes cache syncs). Other replicas' raft
// stats come from their HTTP API (same port, same token).
func (f *securityFlags) autopilot(node *cluster.Node, disc *cluster.Discovery, cf *coordinatorFlags, log *zap.Logger) (leader.Loop, error) {
	var token string
	if cf.tokenFile != "" {
		b, err := os.ReadFile(cf.tokenFile)
		if err != nil {
			return leader.Loop{}, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	_, httpPort, _ := net.SplitHostPort(cf.httpAddr)
	bootstrapExpect := cf.bootstrapExpect
	mq := f.minQuorum
	if mq == 0 {
		mq = uint(bootstrapExpect)
	}
	ap := &cluster.Autopilot{
		Raft: node.Raft, ID: node.ID, Members: disc, Log: log.Named("autopilot"),
		Stats:  api.StatsFetcher(&http.Client{Timeout: 5 * time.Second}, api.PortResolver("http", httpPort), token),
		Config: cluster.AutopilotConfig{DeadServerAfter: f.deadServerAfter, MinQuorum: mq},
	}
	return leader.Loop{Name: "autopilot", Run: ap.Run}, nil
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
