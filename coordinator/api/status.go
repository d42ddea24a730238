package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// StatusPath serves the replica's view of the cluster (GET, authenticated).
const StatusPath = "/v1/status"

// State is the FSM view /v1/status and the state metrics read.
type State interface {
	Intents() []fsm.LaunchIntent
	Instances() []fsm.Instance
	Interruptions() []fsm.InterruptionReport
	Terminations() []fsm.TerminationIntent
	LastIndex() uint64
}

// RaftInfo is the raft view /v1/status and the raft metrics read.
type RaftInfo interface {
	RaftStatus() (RaftStatus, error)
}

// Status is the body of GET /v1/status. Every replica answers from its
// own FSM: a follower's view may lag the leader by the entries it has not
// applied yet (compare raft.appliedIndex across replicas).
type Status struct {
	// ServedBy is the server ID of the replica that answered.
	ServedBy string `json:"servedBy"`
	// ServedByLeader is true when that replica was the leader.
	ServedByLeader bool       `json:"servedByLeader"`
	Raft           RaftStatus `json:"raft"`
	Intents        []Intent   `json:"intents"`
	Instances      []Instance `json:"instances"`
	// Terminations are termination intents (pending and done).
	Terminations []fsm.TerminationIntent `json:"terminations"`
	// UnhandledInterruptions are committed reports not handled yet.
	UnhandledInterruptions []fsm.InterruptionReport `json:"unhandledInterruptions"`
	// Cluster is what this replica knows of the Kubernetes cluster new
	// nodes join (absent when not wired).
	Cluster *ClusterFacts `json:"cluster,omitempty"`
}

// ClusterFacts is what new nodes are told about the cluster they join:
// discovered (EKS DescribeCluster) or set by flags.
type ClusterFacts struct {
	Name              string `json:"name"`
	Endpoint          string `json:"endpoint,omitempty"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	ServiceCIDR       string `json:"serviceCIDR,omitempty"`
	ClusterDNS        string `json:"clusterDNS,omitempty"`
	IPFamily          string `json:"ipFamily,omitempty"`
	// Overridden names the facts given (flags; the CA also by the
	// kubeconfig) rather than discovered.
	Overridden []string `json:"overridden,omitempty"`
	// DiscoveredAt is when the cloud last described the cluster.
	DiscoveredAt *time.Time `json:"discoveredAt,omitempty"`
	// Error is the last discovery error, or why facts are missing.
	Error string `json:"error,omitempty"`
}

// RaftStatus is one replica's raft state.
type RaftStatus struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	LeaderID      string `json:"leaderID,omitempty"`
	LeaderAddress string `json:"leaderAddress,omitempty"`
	Term          uint64 `json:"term"`
	// LastIndex is the last raft log index this replica holds,
	// LastLogTerm its term; AppliedIndex the last entry its FSM applied.
	LastIndex    uint64 `json:"lastIndex"`
	LastLogTerm  uint64 `json:"lastLogTerm"`
	AppliedIndex uint64 `json:"appliedIndex"`
	// LastContact is the time since this replica last heard from a leader
	// ("0s" on the leader, "never" when it never did).
	LastContact string `json:"lastContact"`
	Peers       []Peer `json:"peers"`
}

// Peer is a server of the raft configuration.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// Intent is a launch intent as status shows it.
type Intent struct {
	ID         string `json:"id"`
	NodeClaim  string `json:"nodeClaim"`
	NodePool   string `json:"nodePool"`
	State      string `json:"state"`
	Attempt    int    `json:"attempt"`
	InstanceID string `json:"instanceID,omitempty"`
	Pods       int    `json:"pods"`
	// InstanceTypes are the candidates, cheapest first.
	InstanceTypes []string  `json:"instanceTypes,omitempty"`
	LastError     string    `json:"lastError,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// Instance is an instance as status shows it.
type Instance struct {
	ID           string    `json:"id"`
	IntentID     string    `json:"intentID"`
	InstanceType string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	CapacityType string    `json:"capacityType"`
	Price        float64   `json:"price"`
	State        string    `json:"state"`
	Node         string    `json:"node,omitempty"`
	LaunchedAt   time.Time `json:"launchedAt"`
}

// BuildStatus assembles a Status from the replica's raft and FSM views.
func BuildStatus(r RaftInfo, st State) (Status, error) {
	rs, err := r.RaftStatus()
	if err != nil {
		return Status{}, err
	}
	rs.AppliedIndex = st.LastIndex()
	out := Status{
		ServedBy: rs.ID, ServedByLeader: rs.State == raft.Leader.String(), Raft: rs,
		Intents: []Intent{}, Instances: []Instance{}, Terminations: []fsm.TerminationIntent{},
		UnhandledInterruptions: []fsm.InterruptionReport{},
	}
	for _, in := range st.Intents() {
		var types []string
		for _, c := range in.Spec.Candidates {
			if !contains(types, c.InstanceType) {
				types = append(types, c.InstanceType)
			}
		}
		out.Intents = append(out.Intents, Intent{
			ID: in.ID, NodeClaim: in.Spec.NodeClaim, NodePool: in.Spec.NodePool, State: string(in.State), Attempt: in.Attempt,
			InstanceID: in.InstanceID, Pods: len(in.Pods), InstanceTypes: types, LastError: in.LastError, CreatedAt: in.CreatedAt,
		})
	}
	for _, i := range st.Instances() {
		out.Instances = append(out.Instances, Instance{
			ID: i.ID, IntentID: i.IntentID, InstanceType: i.InstanceType, Zone: i.Zone, CapacityType: i.CapacityType,
			Price: i.Price, State: string(i.State), Node: i.NodeName, LaunchedAt: i.LaunchedAt,
		})
	}
	out.Terminations = append(out.Terminations, st.Terminations()...)
	for _, rep := range st.Interruptions() {
		if !rep.Handled {
			out.UnhandledInterruptions = append(out.UnhandledInterruptions, rep)
		}
	}
	return out, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if !s.peer(r) && !s.statusCaller(w, r) {
		return
	}
	if s.cfg.Raft == nil || s.cfg.State == nil {
		writeError(w, http.StatusNotImplemented, "status is not wired on this server")
		return
	}
	st, err := BuildStatus(s.cfg.Raft, s.cfg.State)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("reading raft state: %v", err))
		return
	}
	if r.URL.Query().Get("view") == "raft" {
		// Autopilot's health checks poll every few seconds: raft only.
		st.Intents, st.Instances, st.Terminations, st.UnhandledInterruptions = nil, nil, nil, nil
	} else if s.cfg.ClusterFacts != nil {
		st.Cluster = s.cfg.ClusterFacts()
	}
	writeJSON(w, http.StatusOK, st)
}

// statusCaller authenticates a status request that presents no coordinator
// certificate by its bearer token, answering 401, 403, 429 or 503 itself
// when the caller may not read status.
func (s *Server) statusCaller(w http.ResponseWriter, r *http.Request) bool {
	token := bearer(r.Header)
	if s.cfg.StatusAuthenticate == nil || token == "" {
		msg := "status needs a client certificate from the coordinators' CA"
		if s.cfg.StatusAuthenticate != nil {
			msg += ", or a status token for audience " + StatusTokenAudience + " (Authorization, or " + ProxiedAuthorizationHeader + " through the API server's proxy; joiner status requests one)"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="joiner"`)
		writeError(w, http.StatusUnauthorized, msg)
		return false
	}
	id, err := s.cfg.StatusAuthenticate(r.Context(), token)
	switch {
	case err == nil:
		s.log.Debug("status read with a bearer token", zap.String("user", id.User))
		return true
	case errors.Is(err, ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="joiner"`)
		writeError(w, http.StatusUnauthorized, "bearer token rejected: "+err.Error())
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many authentications, retry")
	default:
		// Not an answer about the token (e.g. the coordinator may not
		// create TokenReviews): logged, never shown to an unknown caller.
		s.log.Warn("authenticating a status request", zap.Error(err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "cannot check the caller now, retry")
	}
	return false
}

// RaftStatus implements RaftInfo.
func (c RaftCluster) RaftStatus() (RaftStatus, error) {
	f := c.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return RaftStatus{}, fmt.Errorf("reading raft configuration: %w", err)
	}
	addr, leaderID := c.Raft.LeaderWithID()
	stats := c.Raft.Stats()
	local := cluster.LocalStats(c.Raft)
	rs := RaftStatus{
		ID: string(c.ID), State: c.Raft.State().String(), LeaderID: string(leaderID), LeaderAddress: string(addr),
		LastIndex: local.LastIndex, LastLogTerm: local.LastTerm, LastContact: local.LastContact.String(), Peers: []Peer{},
	}
	if local.LastContact < 0 {
		rs.LastContact = "never"
	}
	rs.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	for _, s := range f.Configuration().Servers {
		rs.Peers = append(rs.Peers, Peer{
			ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String(),
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leaderID && leaderID != "",
		})
	}
	sort.Slice(rs.Peers, func(i, j int) bool { return rs.Peers[i].ID < rs.Peers[j].ID })
	return rs, nil
}

// ErrUnauthorized is returned by FetchStatus on a 401.
var ErrUnauthorized = errors.New("coordinator refused the credentials")

// FetchStatus GETs baseURL/v1/status; c presents the client certificate
// (see cluster.TLS.HTTPClientConfig). Errors name the address.
func FetchStatus(ctx context.Context, c *http.Client, baseURL string) (Status, error) {
	return fetchStatus(ctx, c, strings.TrimSuffix(baseURL, "/")+StatusPath, baseURL)
}

func fetchStatus(ctx context.Context, c *http.Client, u, baseURL string) (Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Status{}, fmt.Errorf("coordinator address %q: %w", baseURL, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("coordinator at %s unreachable: %w", baseURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Status{}, fmt.Errorf("reading status from %s: %w", baseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"` // a metav1.Status from the API server's proxy
		}
		_ = json.Unmarshal(body, &e)
		if e.Error == "" {
			e.Error = e.Message
		}
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		err := fmt.Errorf("%s", e.Error)
		if resp.StatusCode == http.StatusUnauthorized {
			err = fmt.Errorf("%w: %s", ErrUnauthorized, e.Error)
		}
		return Status{}, fmt.Errorf("coordinator at %s answered %s: %w", baseURL, resp.Status, err)
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return Status{}, fmt.Errorf("decoding status from %s: %w", baseURL, err)
	}
	return st, nil
}

// StatsFetcher reads other coordinators' raft stats from their
// /v1/status (resolve maps a raft address to the replica's HTTP base URL),
// for autopilot's health checks.
func StatsFetcher(c *http.Client, resolve func(raftAddr string) (string, bool)) cluster.StatsFetcher {
	return func(ctx context.Context, id raft.ServerID, addr raft.ServerAddress) (autopilot.ServerStats, error) {
		base, ok := resolve(string(addr))
		if !ok {
			return autopilot.ServerStats{}, fmt.Errorf("server %s at %s has no known HTTP address", id, addr)
		}
		st, err := fetchStatus(ctx, c, strings.TrimSuffix(base, "/")+StatusPath+"?view=raft", base)
		if err != nil {
			return autopilot.ServerStats{}, err
		}
		if st.ServedBy != string(id) {
			return autopilot.ServerStats{}, fmt.Errorf("%s is server %s, not %s", base, st.ServedBy, id)
		}
		out := autopilot.ServerStats{LastIndex: st.Raft.LastIndex, LastTerm: st.Raft.LastLogTerm}
		switch st.Raft.LastContact {
		case "never":
			out.LastContact = -1
		default:
			d, err := time.ParseDuration(st.Raft.LastContact)
			if err != nil {
				return autopilot.ServerStats{}, fmt.Errorf("server %s: lastContact %q: %w", id, st.Raft.LastContact, err)
			}
			out.LastContact = d
		}
		return out, nil
	}
}
