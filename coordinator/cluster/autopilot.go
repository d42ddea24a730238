package cluster

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// Members is the gossip view autopilot needs (Discovery implements it):
// the coordinators memberlist currently sees alive, self included.
type Members interface {
	Servers() []Meta
}

// StatsFetcher asks another server for its raft stats (the coordinator
// reads them from that replica's HTTP API). Autopilot uses them to judge
// health, which gates the promotion of new servers to voters.
type StatsFetcher func(ctx context.Context, id raft.ServerID, addr raft.ServerAddress) (autopilot.ServerStats, error)

// AutopilotConfig configures dead-server cleanup and server promotion.
type AutopilotConfig struct {
	// DeadServerAfter: a raft server that gossip has not seen alive for
	// this long is removed from the raft configuration (0: never).
	DeadServerAfter time.Duration
	// MinQuorum: never remove a voter if fewer than this many voters would
	// remain (Consul's min_quorum; the coordinator uses --bootstrap-expect).
	MinQuorum uint
	// ServerStabilizationTime a new server must stay healthy before it is
	// promoted to voter (default 10 s).
	ServerStabilizationTime time.Duration
	// LastContactThreshold and MaxTrailingLogs define a healthy server
	// (defaults 5 s and 250 entries).
	LastContactThreshold time.Duration
	MaxTrailingLogs      uint64
	// ReconcileInterval and UpdateInterval are autopilot's loop periods
	// (defaults 10 s and 2 s; tests shorten them).
	ReconcileInterval time.Duration
	UpdateInterval    time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Autopilot is a leader-only loop: hashicorp/raft-autopilot with the
// gossip pool as the application's view of servers. It adds alive
// coordinators missing from the raft configuration as non-voters (autopilot
// promotes them once stable), and removes servers gossip has not seen for
// DeadServerAfter, never below MinQuorum voters nor a majority at once. A server's absence is timed from when this leader first
// noticed it, so a new leader whose gossip is still converging removes
// nobody early.
type Autopilot struct {
	Raft    *raft.Raft
	ID      raft.ServerID
	Members Members
	// Stats fetches other servers' stats (nil: only the leader's own are
	// known, so new servers stay non-voters).
	Stats  StatsFetcher
	Config AutopilotConfig
	// Log is named by the caller ("autopilot"); raft-autopilot logs there too.
	Log *zap.Logger

	mu         sync.Mutex
	missing    map[raft.ServerID]time.Time
	lastConfig []raft.Server
}

// Run runs autopilot until ctx ends (leadership lost or shutdown).
func (a *Autopilot) Run(ctx context.Context) error {
	defaults.Clock(&a.Config.Now)
	// Absences are timed per term: one noticed in an earlier term may have
	// ended while this server was a follower.
	a.mu.Lock()
	a.missing = map[raft.ServerID]time.Time{}
	a.mu.Unlock()
	opts := []autopilot.Option{autopilot.WithLogger(NewHCLog(a.Log))}
	if a.Config.ReconcileInterval > 0 {
		opts = append(opts, autopilot.WithReconcileInterval(a.Config.ReconcileInterval))
	}
	if a.Config.UpdateInterval > 0 {
		opts = append(opts, autopilot.WithUpdateInterval(a.Config.UpdateInterval))
	}
	ap := autopilot.New(a.Raft, a, opts...)
	ap.Start(ctx)
	every := a.Config.ReconcileInterval
	defaults.Positive(&every, autopilot.DefaultReconcileInterval)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		a.addNewServers(ctx)
		select {
		case <-ctx.Done():
			<-ap.Stop()
			return nil
		case <-tick.C:
		}
	}
}

// addNewServers adds alive coordinators that hold no raft state and are
// missing from the configuration as non-voters (Nomad's reconcileMember).
// A server that came back with a new ID under an old address (a wiped data
// dir) replaces the old entry: raft refuses two servers on one address.
// Gossip only proposes: a member is added (or replaces anyone) only once
// it proves it is that server at that address (see verify).
func (a *Autopilot) addNewServers(ctx context.Context) {
	f := a.Raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	byID := map[raft.ServerID]raft.Server{}
	byAddr := map[raft.ServerAddress]raft.Server{}
	for _, s := range f.Configuration().Servers {
		byID[s.ID], byAddr[s.Address] = s, s
	}
	for _, m := range a.Members.Servers() {
		id, addr := raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr)
		if _, ok := byID[id]; ok || id == "" || addr == "" {
			continue
		}
		if err := a.verify(ctx, id, addr); err != nil {
			a.Log.Warn("not adding a gossip member that does not prove it is that server", zap.String("server", string(id)),
				zap.String("address", string(addr)), zap.Error(err))
			continue
		}
		if old, ok := byAddr[addr]; ok {
			a.Log.Info("removing raft server replaced at the same address", zap.String("server", string(old.ID)),
				zap.String("address", string(addr)), zap.String("replacement", string(id)))
			if err := a.Raft.RemoveServer(old.ID, 0, 10*time.Second).Error(); err != nil {
				a.Log.Warn("removing replaced raft server", zap.String("server", string(old.ID)), zap.Error(err))
				continue
			}
		}
		if err := a.Raft.AddNonvoter(id, addr, 0, 10*time.Second).Error(); err != nil {
			a.Log.Warn("adding raft server", zap.String("server", string(id)), zap.String("address", string(addr)), zap.Error(err))
			continue
		}
		a.Log.Info("added raft server as non-voter", zap.String("server", string(id)), zap.String("address", string(addr)))
	}
}

// verify asks the member for its stats at its address: with TLS the
// answer comes over a connection whose certificate the CA issued for that
// address's host, and it must say it is server id. Without Stats (tests
// without HTTP) every member is taken at its word.
func (a *Autopilot) verify(ctx context.Context, id raft.ServerID, addr raft.ServerAddress) error {
	if a.Stats == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := a.Stats(ctx, id, addr)
	return err
}

// AutopilotConfig implements autopilot.ApplicationIntegration.
func (a *Autopilot) AutopilotConfig() *autopilot.Config {
	c := &autopilot.Config{
		CleanupDeadServers:      a.Config.DeadServerAfter > 0,
		LastContactThreshold:    a.Config.LastContactThreshold,
		MaxTrailingLogs:         a.Config.MaxTrailingLogs,
		MinQuorum:               a.Config.MinQuorum,
		ServerStabilizationTime: a.Config.ServerStabilizationTime,
	}
	defaults.Positive(&c.LastContactThreshold, 5*time.Second)
	if c.MaxTrailingLogs == 0 {
		c.MaxTrailingLogs = 250
	}
	defaults.Positive(&c.ServerStabilizationTime, 10*time.Second)
	return c
}

// NotifyState implements autopilot.ApplicationIntegration.
func (a *Autopilot) NotifyState(s *autopilot.State) {
	a.Log.Debug("autopilot state", zap.Bool("healthy", s.Healthy), zap.Int("failure-tolerance", s.FailureTolerance),
		zap.Int("servers", len(s.Servers)))
}

// KnownServers implements autopilot.ApplicationIntegration. Every server
// of the raft configuration is reported alive (seen in gossip) or failed
// (not seen); autopilot offers failed voters to RemoveFailedServer only
// when removing them keeps MinQuorum voters and a safe majority.
func (a *Autopilot) KnownServers() map[raft.ServerID]*autopilot.Server {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.missing == nil {
		a.missing = map[raft.ServerID]time.Time{}
	}
	servers := a.lastConfig
	if f := a.Raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
		a.lastConfig = servers
	}
	alive := map[raft.ServerID]bool{a.ID: true}
	for _, m := range a.Members.Servers() {
		alive[raft.ServerID(m.ID)] = true
	}
	_, leaderID := a.Raft.LeaderWithID()
	now := a.Config.Now()
	out := map[raft.ServerID]*autopilot.Server{}
	for _, s := range servers {
		srv := &autopilot.Server{
			ID: s.ID, Name: string(s.ID), Address: s.Address, NodeStatus: autopilot.NodeAlive,
			NodeType: autopilot.NodeVoter, IsLeader: s.ID == leaderID, RaftVersion: 3,
		}
		out[s.ID] = srv
		if alive[s.ID] {
			delete(a.missing, s.ID)
			continue
		}
		if _, ok := a.missing[s.ID]; !ok {
			a.missing[s.ID] = now
			a.Log.Info("raft server not seen in gossip", zap.String("server", string(s.ID)), zap.String("address", string(s.Address)))
		}
		srv.NodeStatus = autopilot.NodeFailed
	}
	return out
}

// RemoveFailedServer implements autopilot.ApplicationIntegration: a failed
// server unseen in gossip for DeadServerAfter is removed from the raft
// configuration; one unseen for less stays (it may be restarting).
func (a *Autopilot) RemoveFailedServer(s *autopilot.Server) {
	a.mu.Lock()
	since, ok := a.missing[s.ID]
	now := a.Config.Now()
	a.mu.Unlock()
	if !ok || a.Config.DeadServerAfter <= 0 || now.Sub(since) < a.Config.DeadServerAfter {
		return
	}
	log := a.Log.With(zap.String("server", string(s.ID)), zap.String("address", string(s.Address)), zap.Duration("gone-for", now.Sub(since)))
	// Gossip alone never removes a server: one that still answers as
	// itself (its certificate, its ID) is kept, whatever gossip says.
	if a.Stats != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := a.Stats(ctx, s.ID, s.Address)
		cancel()
		if err == nil {
			log.Warn("raft server unseen in gossip still answers; kept")
			a.mu.Lock()
			delete(a.missing, s.ID)
			a.mu.Unlock()
			return
		}
	}
	if err := a.Raft.RemoveServer(s.ID, 0, 5*time.Second).Error(); err != nil {
		log.Warn("removing dead raft server", zap.Error(err))
		return
	}
	a.mu.Lock()
	delete(a.missing, s.ID)
	a.mu.Unlock()
	log.Info("removed dead raft server: gone from gossip past the threshold")
}

// FetchServerStats implements autopilot.ApplicationIntegration: the local
// server's stats from raft, the others' from Stats.
func (a *Autopilot) FetchServerStats(ctx context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	out := map[raft.ServerID]*autopilot.ServerStats{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, s := range servers {
		if id == a.ID {
			st := LocalStats(a.Raft)
			mu.Lock()
			out[id] = &st
			mu.Unlock()
			continue
		}
		if a.Stats == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := a.Stats(ctx, id, s.Address)
			if err != nil {
				a.Log.Debug("fetching raft stats", zap.String("server", string(id)), zap.Error(err))
				return
			}
			mu.Lock()
			out[id] = &st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// LocalStats reads this server's raft stats: last log index and term, and
// the time since it last heard from a leader (0 on the leader).
func LocalStats(r *raft.Raft) autopilot.ServerStats {
	s := r.Stats()
	var st autopilot.ServerStats
	st.LastIndex, _ = strconv.ParseUint(s["last_log_index"], 10, 64)
	st.LastTerm, _ = strconv.ParseUint(s["last_log_term"], 10, 64)
	switch c := s["last_contact"]; c {
	case "0", "":
	case "never":
		st.LastContact = -1
	default:
		if d, err := time.ParseDuration(c); err == nil {
			st.LastContact = d
		}
	}
	return st
}
