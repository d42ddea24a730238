package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// RoleCoordinator is the memberlist role of coordinator replicas (agents
// gossip with another role and are never raft peers).
const RoleCoordinator = "coordinator"

// Meta is what a coordinator gossips in its memberlist node metadata
// (Nomad's serf tags): enough for bootstrap_expect.
type Meta struct {
	Role     string `json:"role"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Expect   int    `json:"expect"`
	// HasState: this server holds a raft configuration already.
	HasState bool `json:"has_state"`
}

// DiscoveryConfig configures memberlist for a coordinator.
type DiscoveryConfig struct {
	// Name is the memberlist node name (the raft server ID).
	Name string
	// BindAddr/BindPort for gossip (port 0 picks one).
	BindAddr string
	BindPort int
	// AdvertiseAddr/Port: the IP peers use for gossip ("" = bind address).
	// Gossip tolerates IP changes (members rejoin through DNS); raft uses
	// the DNS name in Meta.RaftAddr.
	AdvertiseAddr string
	AdvertisePort int
	// Keyring encrypts and authenticates gossip (LoadKeyring); nil:
	// plaintext. Members with different keys cannot join each other.
	Keyring *memberlist.Keyring
}

// Discovery is a memberlist member carrying coordinator metadata.
type Discovery struct {
	ml  *memberlist.Memberlist
	del *metaDelegate
}

type metaDelegate struct {
	mu   sync.Mutex
	meta []byte
}

func (d *metaDelegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}
func (d *metaDelegate) NotifyMsg([]byte)                {}
func (d *metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *metaDelegate) LocalState(bool) []byte          { return nil }
func (d *metaDelegate) MergeRemoteState([]byte, bool)   {}

// StartDiscovery starts the memberlist member.
func StartDiscovery(cfg DiscoveryConfig, meta Meta, log *zap.Logger) (*Discovery, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	del := &metaDelegate{meta: b}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = cfg.BindAddr, cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = cfg.AdvertiseAddr, cfg.AdvertisePort
	mc.Delegate = del
	mc.Keyring = cfg.Keyring
	mc.Logger = NewStdLog(log.Named("memberlist"))
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("starting memberlist on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	return &Discovery{ml: ml, del: del}, nil
}

// Addr is the host:port others join.
func (d *Discovery) Addr() string {
	n := d.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Join joins peers (headless service DNS names resolve to every pod).
func (d *Discovery) Join(addrs []string) (int, error) { return d.ml.Join(addrs) }

// Servers returns the metadata of alive coordinator members, self included,
// sorted by ID.
func (d *Discovery) Servers() []Meta {
	var out []Meta
	for _, n := range d.ml.Members() {
		var m Meta
		if json.Unmarshal(n.Meta, &m) != nil || m.Role != RoleCoordinator {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetHasState gossips that this server now holds a raft configuration.
func (d *Discovery) SetHasState(ctx context.Context) error {
	d.del.mu.Lock()
	var m Meta
	_ = json.Unmarshal(d.del.meta, &m)
	m.HasState = true
	d.del.meta, _ = json.Marshal(m)
	d.del.mu.Unlock()
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return d.ml.UpdateNode(timeout)
}

// Close leaves the cluster and stops memberlist.
func (d *Discovery) Close() error {
	_ = d.ml.Leave(time.Second)
	return d.ml.Shutdown()
}

// BootstrapConfiguration decides bootstrap_expect (pure): bootstrap only if
// this server has no state, at least expect coordinators are visible, they
// all expect the same number, and none reports an existing configuration.
// The configuration is every visible coordinator as a voter, sorted by ID,
// so all servers that decide compute the same one.
func BootstrapConfiguration(self Meta, servers []Meta) (raft.Configuration, bool) {
	if self.HasState || self.Expect <= 0 || len(servers) < self.Expect {
		return raft.Configuration{}, false
	}
	var cfg raft.Configuration
	for _, s := range servers {
		if s.HasState || s.Expect != self.Expect {
			return raft.Configuration{}, false
		}
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.RaftAddr)})
	}
	sort.Slice(cfg.Servers, func(i, j int) bool { return cfg.Servers[i].ID < cfg.Servers[j].ID })
	return cfg, true
}

// RunBootstrap waits until this node has a raft configuration: it either
// already had one, receives one from a leader, or bootstraps when
// BootstrapConfiguration says so. It gossips HasState once true.
func RunBootstrap(ctx context.Context, n *Node, d *Discovery, self Meta, every time.Duration, log *zap.Logger) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		has, err := n.HasState()
		if err != nil {
			return fmt.Errorf("reading raft configuration: %w", err)
		}
		if has {
			return d.SetHasState(ctx)
		}
		self.HasState = false
		if cfg, ok := BootstrapConfiguration(self, d.Servers()); ok {
			err := n.Raft.BootstrapCluster(cfg).Error()
			if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				return fmt.Errorf("bootstrapping raft: %w", err)
			}
			log.Info("bootstrapped raft cluster", zap.Int("servers", len(cfg.Servers)))
			return d.SetHasState(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
