package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster/boltstore"
)

// Config configures a coordinator raft node.
type Config struct {
	// DataDir holds node-id, raft.db and snapshots/ (the pod's PVC).
	DataDir string
	// Bind is the host:port the raft listener binds.
	Bind string
	// Advertise is the stable DNS host:port peers dial
	// (coordinator-N.<headless-svc>:port), never a pod IP.
	Advertise string
	// Tune lets callers (tests) adjust raft's config; nil keeps raft's
	// defaults, with a small snapshot threshold for our small state.
	Tune func(*raft.Config)
	// TLS, when set, makes every raft connection mutual TLS (nil:
	// plaintext; the coordinator command warns).
	TLS *TLS
}

// Node is an open raft node with its stores.
type Node struct {
	ID    raft.ServerID
	Addr  raft.ServerAddress
	Raft  *raft.Raft
	store *boltstore.Store
	trans *raft.NetworkTransport
}

// NodeID returns the server ID persisted in dataDir/node-id, creating a new
// UUID on first start. A wiped data dir therefore comes back as a new
// server, which the leader replaces (never a server that forgot its vote).
func NodeID(dataDir string) (raft.ServerID, error) {
	p := filepath.Join(dataDir, "node-id")
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if _, perr := uuid.Parse(id); perr != nil {
			return "", fmt.Errorf("reading node id %s: %q is not a UUID: %w", p, id, perr)
		}
		return raft.ServerID(id), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading node id: %w", err)
	}
	id := uuid.NewString()
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing node id: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("writing node id: %w", err)
	}
	return raft.ServerID(id), nil
}

// Open starts a raft node on the data dir: a bbolt log and stable store (boltstore)
// behind a 512-entry log cache, a file snapshot store keeping 2 snapshots,
// and a TCP transport that advertises the DNS name.
func Open(cfg Config, fsm raft.FSM, log *zap.Logger) (*Node, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	if _, _, err := net.SplitHostPort(cfg.Advertise); err != nil {
		return nil, fmt.Errorf("advertise address %q: want host:port: %w", cfg.Advertise, err)
	}
	id, err := NodeID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	hl := NewHCLog(log.Named("raft"))
	store, err := boltstore.Open(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return nil, fmt.Errorf("opening raft log store: %w", err)
	}
	cache, err := raft.NewLogCache(512, store)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("creating log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl.Named("snapshots"))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("opening snapshot store: %w", err)
	}
	stream, err := listenStream(cfg.Bind, cfg.Advertise, cfg.TLS)
	if err != nil {
		store.Close()
		return nil, err
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl.Named("transport"),
	})
	conf := raft.DefaultConfig()
	conf.LocalID = id
	conf.Logger = hl
	conf.SnapshotThreshold = 1024
	conf.TrailingLogs = 2048
	if cfg.Tune != nil {
		cfg.Tune(conf)
	}
	r, err := raft.NewRaft(conf, fsm, cache, store, snaps, trans)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, fmt.Errorf("starting raft: %w", err)
	}
	return &Node{ID: id, Addr: raft.ServerAddress(cfg.Advertise), Raft: r, store: store, trans: trans}, nil
}

// HasState reports whether this node already holds a raft configuration
// (it bootstrapped or joined before); such a node never bootstraps again.
func (n *Node) HasState() (bool, error) {
	f := n.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	return len(f.Configuration().Servers) > 0, nil
}

// Close shuts raft down and closes the stores.
func (n *Node) Close() error {
	err := n.Raft.Shutdown().Error()
	if cerr := n.trans.Close(); err == nil {
		err = cerr
	}
	if cerr := n.store.Close(); err == nil {
		err = cerr
	}
	return err
}
