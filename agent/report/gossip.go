package report

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// Agent states published in gossip metadata.
const (
	StateReady    = "ready"
	StateCordoned = "cordoned"
	StateDraining = "draining"
	StateDrained  = "drained"
)

// Meta is the agent's memberlist node metadata (at most memberlist.MetaMaxSize
// bytes of JSON, so keys are short).
type Meta struct {
	Role       string `json:"r"`            // "agent"
	Node       string `json:"n"`            // Kubernetes node name
	InstanceID string `json:"i"`            // EC2 instance ID
	NodeClaim  string `json:"c,omitempty"`  // NodeClaim name
	State      string `json:"s"`            // ready, cordoned, draining, drained
	Notice     string `json:"id,omitempty"` // latest notice ID
	Version    string `json:"v,omitempty"`
}

// DecodeMeta parses a member's metadata.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("decoding agent gossip metadata: %w", err)
	}
	return m, nil
}

// GossipOptions configure the agent's memberlist member.
type GossipOptions struct {
	// Name is the member name (default: the node name).
	Name string
	// BindAddr/BindPort to listen on (defaults 127.0.0.1 and 7946; 0 picks a free port).
	BindAddr string
	BindPort int
	// AdvertiseAddr/Port other members use to reach this one (default: bind).
	AdvertiseAddr string
	AdvertisePort int
	// Seeds are host:port of coordinators (or other agents) to join.
	Seeds []string
	// SecretKey (16, 24 or 32 bytes) encrypts gossip when set.
	SecretKey []byte
	// Keyring (the coordinators' --gossip-keyring-file) takes precedence
	// over SecretKey: its primary key encrypts, every key decrypts.
	Keyring *memberlist.Keyring
	// RejoinInterval between join attempts while alone (default 10 s).
	RejoinInterval time.Duration
}

// Member is the agent in the memberlist pool.
type Member struct {
	log  *zap.Logger
	opts GossipOptions
	ml   *memberlist.Memberlist

	mu   sync.Mutex
	meta Meta
}

// JoinPool starts the memberlist member; Run keeps it joined.
func JoinPool(log *zap.Logger, o GossipOptions, meta Meta) (*Member, error) {
	if o.Name == "" {
		o.Name = meta.Node
	}
	if o.BindAddr == "" {
		o.BindAddr = "127.0.0.1"
	}
	if o.RejoinInterval <= 0 {
		o.RejoinInterval = 10 * time.Second
	}
	meta.Role = "agent"
	m := &Member{log: log, opts: o, meta: meta}
	if b, _ := json.Marshal(meta); len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gossip metadata is %d bytes, over memberlist's %d", len(b), memberlist.MetaMaxSize)
	}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = o.Name
	cfg.BindAddr = o.BindAddr
	cfg.BindPort = o.BindPort
	cfg.AdvertiseAddr = o.AdvertiseAddr
	cfg.AdvertisePort = o.AdvertisePort
	if o.AdvertiseAddr == "" {
		cfg.AdvertisePort = 0
	}
	cfg.SecretKey = o.SecretKey
	if o.Keyring != nil {
		cfg.SecretKey, cfg.Keyring = nil, o.Keyring
	}
	cfg.Delegate = m
	cfg.Logger = zap.NewStdLog(log.Named("memberlist"))
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting memberlist on %s: %w", net.JoinHostPort(o.BindAddr, strconv.Itoa(o.BindPort)), err)
	}
	m.ml = ml
	return m, nil
}

// Addr is the member's gossip address.
func (m *Member) Addr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Members lists the pool as this member sees it.
func (m *Member) Members() []*memberlist.Node { return m.ml.Members() }

// Update changes the published state and notice and pushes it to the pool.
func (m *Member) Update(state, notice string) {
	m.mu.Lock()
	m.meta.State = state
	if notice != "" {
		m.meta.Notice = notice
	}
	m.mu.Unlock()
	if err := m.ml.UpdateNode(5 * time.Second); err != nil {
		m.log.Warn("publishing gossip state", zap.Error(err))
	}
}

// Run joins the seeds and rejoins whenever the member is alone, until ctx
// ends; then it leaves the pool and shuts down.
func (m *Member) Run(ctx context.Context) error {
	defer func() {
		if err := m.ml.Leave(2 * time.Second); err != nil {
			m.log.Debug("leaving gossip pool", zap.Error(err))
		}
		_ = m.ml.Shutdown()
	}()
	if len(m.opts.Seeds) == 0 {
		<-ctx.Done()
		return nil
	}
	failures := 0
	for {
		if m.ml.NumMembers() <= 1 {
			if n, err := m.ml.Join(m.opts.Seeds); err != nil {
				failures++
				if failures == 1 || failures%10 == 0 {
					m.log.Warn("joining gossip pool", zap.Strings("seeds", m.opts.Seeds), zap.Error(err), zap.Int("failures", failures))
				}
			} else {
				m.log.Info("joined gossip pool", zap.Int("contacted", n), zap.Int("members", m.ml.NumMembers()))
				failures = 0
			}
		}
		t := time.NewTimer(m.opts.RejoinInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// NodeMeta implements memberlist.Delegate.
func (m *Member) NodeMeta(limit int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(m.meta)
	if len(b) > limit {
		// Drop the optional fields rather than send a truncated document.
		short := m.meta
		short.Notice, short.Version = "", ""
		b, _ = json.Marshal(short)
	}
	return b
}

// NotifyMsg implements memberlist.Delegate (agents take no user messages).
func (m *Member) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (m *Member) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (m *Member) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (m *Member) MergeRemoteState([]byte, bool) {}
