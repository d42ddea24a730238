// Package api is the coordinator's HTTP server: agents' interruption
// reports (POST /v1/interruptions, the contract documented in agent/report),
// the replica's view of raft and the FSM (GET /v1/status, read by `joiner
// status` and by autopilot's health checks), /healthz and /readyz (open:
// probes) and /metrics (a CA client certificate, or a bearer token whose
// user may get /metrics).
//
// A report is committed to raft as an InterruptionReport (upsert by notice
// ID) by the leader and acknowledged only after the commit. A follower
// forwards the request to the leader's HTTP address (Config.Resolve maps
// the leader's raft address to it) and relays the answer; with no leader
// known, or when forwarding fails, it answers 503 with Retry-After and the
// agent retries (the notice ID makes a repeat a no-op).
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/httpauth"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Cluster is the raft view the server needs.
type Cluster interface {
	IsLeader() bool
	// Leader is the leader's raft address, "" when none is known.
	Leader() string
	// Ready is nil when a leader is known and this replica is a voter.
	Ready() error
	// Commit applies cmd and returns its index once committed.
	Commit(ctx context.Context, cmd []byte) (uint64, error)
}

// Reports reads committed interruption reports (the local FSM).
type Reports interface {
	Interruption(id string) (fsm.InterruptionReport, bool)
}

// Config configures a Server.
type Config struct {
	Cluster Cluster
	Reports Reports
	// Raft and State serve /v1/status (nil: 501); ClusterFacts (optional)
	// adds the cluster new nodes join.
	Raft         RaftInfo
	State        State
	ClusterFacts func() *ClusterFacts
	// Authenticate maps a report's bearer token to the caller (nil: no
	// authentication at all, --insecure-dev only: reports are accepted
	// from anyone and /v1/status is open).
	Authenticate Authenticator
	// StatusAuthenticate lets callers without a coordinator certificate
	// read /v1/status with a status token (StatusTokenAudience;
	// Authorization, or ProxiedAuthorizationHeader through the API
	// server's proxy): it maps
	// the token to the caller, or fails with ErrUnauthenticated,
	// ErrForbidden or ErrBusy. nil: client certificates only.
	StatusAuthenticate Authenticator
	// NodeInstance maps a node name to the EC2 instance ID behind it (the
	// Node's providerID): a report must name the caller's own node and
	// that node's instance.
	NodeInstance func(node string) (instanceID string, ok bool)
	// ReportsPerSecond and ReportBurst limit each node's reports (default
	// 1 and 10; an agent reports a notice until acknowledged, a few times).
	ReportsPerSecond float64
	ReportBurst      int
	// Resolve maps the leader's raft address to its HTTP base URL.
	Resolve func(raftAddr string) (baseURL string, ok bool)
	// Client forwards to the leader (default: 10 s timeout).
	Client *http.Client
	// Gatherer serves /metrics (default: none, 404) to coordinators and
	// tools with a certificate from the coordinators' CA and to callers
	// whose bearer token MetricsAuthorize accepts (open only when
	// Authenticate is nil, --insecure-dev).
	Gatherer prometheus.Gatherer
	Metrics  *Metrics
	// MetricsAuthorize checks a /metrics caller's bearer token (a
	// TokenReview and a SubjectAccessReview for get /metrics). nil:
	// client certificates only.
	MetricsAuthorize httpauth.Authorizer
	// Now stamps ReceivedAt (default time.Now).
	Now func() time.Time
	// RetryAfter is sent with 503 answers (default 1 s).
	RetryAfter time.Duration
}

// Server is the coordinator's HTTP handler.
type Server struct {
	cfg    Config
	log    *zap.Logger
	mux    *http.ServeMux
	limits *limiter
}

// forwardedHeader marks a request a follower forwarded, so a replica that
// is not the leader either answers 503 instead of forwarding again.
const forwardedHeader = "X-Joiner-Forwarded"

const maxBody = 64 << 10

// New builds a Server.
func New(cfg Config, log *zap.Logger) *Server {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	defaults.Clock(&cfg.Now)
	defaults.Positive(&cfg.RetryAfter, time.Second)
	defaults.Positive(&cfg.ReportsPerSecond, 1)
	defaults.Positive(&cfg.ReportBurst, 10)
	s := &Server{cfg: cfg, log: log.Named("api"), mux: http.NewServeMux(),
		limits: newLimiter(cfg.ReportsPerSecond, cfg.ReportBurst, cfg.Now)}
	s.mux.HandleFunc("POST "+agentv1.Path, s.interruption)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.ready)
	s.mux.HandleFunc("GET "+StatusPath, s.status)
	if cfg.Gatherer != nil {
		want := "metrics need a client certificate from the coordinators' CA"
		if cfg.MetricsAuthorize != nil {
			want += ", or a bearer token whose user may get /metrics (RBAC nonResourceURLs; the chart's metricsReaders)"
		}
		s.mux.Handle("GET /metrics", &httpauth.Guard{Next: promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}),
			Peer: s.peer, Authorize: cfg.MetricsAuthorize, Want: want, Log: s.log})
	}
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if err := s.cfg.Cluster.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) interruption(w http.ResponseWriter, r *http.Request) {
	caller, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if caller.Node != "" && !s.limits.allow(caller.Node) {
		s.cfg.Metrics.report(ResultThrottled)
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, 1/s.cfg.ReportsPerSecond))))
		writeError(w, http.StatusTooManyRequests, "too many reports from node "+caller.Node)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.cfg.Metrics.report(ResultInvalid)
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading body: %v", err))
		return
	}
	rep, err := decodeReport(body)
	if err != nil {
		s.cfg.Metrics.report(ResultInvalid)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if code, msg := s.authorize(caller, rep); code != 0 {
		if code == http.StatusServiceUnavailable {
			s.unavailable(w, rep, msg, nil)
			return
		}
		s.cfg.Metrics.report(ResultForbidden)
		s.log.Warn("refused interruption report", zap.String("user", caller.User), zap.String("caller-node", caller.Node),
			zap.String("node", rep.Node), zap.String("instance-id", rep.InstanceID), zap.String("reason", msg))
		writeError(w, code, msg)
		return
	}
	if !s.cfg.Cluster.IsLeader() {
		s.forward(w, r, rep, body)
		return
	}
	ack, err := s.commit(r.Context(), rep)
	switch {
	case errors.Is(err, cluster.ErrNotLeader):
		s.unavailable(w, rep, "leadership changed, retry", err)
		return
	case errors.Is(err, fsm.ErrTooManyReports):
		s.cfg.Metrics.report(ResultThrottled)
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, s.cfg.RetryAfter/time.Second))))
		writeError(w, http.StatusTooManyRequests, "too many unhandled interruption reports, retry")
		return
	case errors.Is(err, fsm.ErrInvalidCommand):
		s.cfg.Metrics.report(ResultInvalid)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.cfg.Metrics.report(ResultError)
		s.log.Error("committing interruption report", zap.String("notice", rep.ID), zap.Error(err))
		writeError(w, http.StatusInternalServerError, "committing report failed, retry")
		return
	}
	if ack.Duplicate {
		s.cfg.Metrics.report(ResultDuplicate)
	} else {
		s.cfg.Metrics.report(ResultCommitted)
		s.log.Info("committed interruption report", zap.String("notice", rep.ID), zap.String("kind", rep.Kind),
			zap.String("instance-id", rep.InstanceID), zap.String("node", rep.Node), zap.Uint64("index", ack.Index))
	}
	writeJSON(w, http.StatusOK, ack)
}

// authenticate answers 401, 429 or 503 itself when the caller is not
// known.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	if s.cfg.Authenticate == nil {
		return Identity{User: "anonymous (insecure)"}, true
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, err := s.cfg.Authenticate(r.Context(), token)
	switch {
	case err == nil:
		return id, true
	case errors.Is(err, ErrUnauthenticated):
		s.cfg.Metrics.report(ResultUnauthorized)
		w.Header().Set("WWW-Authenticate", `Bearer realm="joiner"`)
		writeError(w, http.StatusUnauthorized, "missing or rejected bearer token")
	case errors.Is(err, ErrBusy):
		s.cfg.Metrics.report(ResultThrottled)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many authentications, retry")
	default:
		s.cfg.Metrics.report(ResultUnavailable)
		s.log.Warn("authenticating a report", zap.Error(err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "cannot authenticate now, retry")
	}
	return Identity{}, false
}

// authorize: an agent reports only about its own node and that node's
// instance. It returns 0 when the report may go on, else the status and
// why (503: the node is not known here yet, retry).
func (s *Server) authorize(caller Identity, rep agentv1.Report) (int, string) {
	if s.cfg.Authenticate == nil || caller.AnyNode {
		return 0, ""
	}
	if caller.Node == "" {
		return http.StatusForbidden, fmt.Sprintf("user %s is not bound to a node", caller.User)
	}
	if rep.Node != caller.Node {
		return http.StatusForbidden, fmt.Sprintf("node %q: an agent of node %s reports only about its own node", rep.Node, caller.Node)
	}
	if s.cfg.NodeInstance == nil {
		return http.StatusForbidden, "no node lookup wired: cannot check the instance"
	}
	inst, ok := s.cfg.NodeInstance(caller.Node)
	if !ok {
		return http.StatusServiceUnavailable, "node " + caller.Node + " not known yet"
	}
	if rep.InstanceID != inst {
		return http.StatusForbidden, fmt.Sprintf("instanceID %q: node %s runs instance %q", rep.InstanceID, caller.Node, inst)
	}
	return 0, ""
}

// peer reports whether the request comes from a coordinator or a tool
// holding a certificate from the coordinators' CA (or security is off).
func (s *Server) peer(r *http.Request) bool {
	if s.cfg.Authenticate == nil {
		return true
	}
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// decodeReport parses and validates the body; errors name the field.
func decodeReport(body []byte) (agentv1.Report, error) {
	var rep agentv1.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		var te *json.UnmarshalTypeError
		var pe *time.ParseError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return rep, fmt.Errorf("%s: want a %s, got %s", te.Field, te.Type, te.Value)
		case errors.As(err, &pe):
			return rep, fmt.Errorf("time field %q: want RFC 3339: %v", pe.Value, err)
		default:
			return rep, fmt.Errorf("body: %v", err)
		}
	}
	if err := rep.Validate(); err != nil {
		return rep, err
	}
	return rep, nil
}

// commit upserts rep on the leader and returns the ack. A report already
// committed with the same content is answered from the FSM without a new
// entry.
func (s *Server) commit(ctx context.Context, rep agentv1.Report) (agentv1.Ack, error) {
	want := fsm.InterruptionReport{
		ID: rep.ID, InstanceID: rep.InstanceID, NodeName: rep.Node, Kind: rep.Kind,
		NoticeTime: rep.NoticeTime, Deadline: rep.Deadline, ReceivedAt: s.cfg.Now().UTC(),
	}
	if old, ok := s.cfg.Reports.Interruption(rep.ID); ok && sameReport(old, want) {
		return agentv1.Ack{ID: rep.ID, Index: old.ModifyIndex, Duplicate: true}, nil
	}
	cmd, err := fsm.Encode(fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: want})
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("encoding interruption report %s: %w", rep.ID, err)
	}
	index, err := s.cfg.Cluster.Commit(ctx, cmd)
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("committing interruption report %s: %w", rep.ID, err)
	}
	// The FSM keeps the original entry's index when the upsert was a no-op
	// (a concurrent repeat committed first).
	got, ok := s.cfg.Reports.Interruption(rep.ID)
	if ok && got.ModifyIndex != 0 && got.ModifyIndex < index {
		return agentv1.Ack{ID: rep.ID, Index: got.ModifyIndex, Duplicate: true}, nil
	}
	return agentv1.Ack{ID: rep.ID, Index: index}, nil
}

// sameReport compares the fields a report carries (not receipt or handling).
func sameReport(a, b fsm.InterruptionReport) bool {
	return a.ID == b.ID && a.InstanceID == b.InstanceID && a.NodeName == b.NodeName && a.Kind == b.Kind &&
		a.NoticeTime.Equal(b.NoticeTime) && a.Deadline.Equal(b.Deadline)
}

// forward relays the request to the leader and its answer to the caller.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rep agentv1.Report, body []byte) {
	if r.Header.Get(forwardedHeader) != "" {
		s.unavailable(w, rep, "not the leader", nil)
		return
	}
	leader := s.cfg.Cluster.Leader()
	if leader == "" {
		s.unavailable(w, rep, "no raft leader known", nil)
		return
	}
	base, ok := "", false
	if s.cfg.Resolve != nil {
		base, ok = s.cfg.Resolve(leader)
	}
	if !ok {
		s.unavailable(w, rep, "leader "+leader+" has no known HTTP address", nil)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimSuffix(base, "/")+agentv1.Path, bytes.NewReader(body))
	if err != nil {
		s.unavailable(w, rep, "forwarding to the leader", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, "1")
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		s.unavailable(w, rep, "forwarding to the leader", err)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		s.unavailable(w, rep, "reading the leader's answer", err)
		return
	}
	s.cfg.Metrics.report(ResultForwarded)
	s.log.Debug("forwarded interruption report", zap.String("notice", rep.ID), zap.String("leader", leader), zap.Int("status", resp.StatusCode))
	for _, h := range []string{"Content-Type", "Retry-After", "WWW-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func (s *Server) unavailable(w http.ResponseWriter, rep agentv1.Report, msg string, err error) {
	s.cfg.Metrics.report(ResultUnavailable)
	if err != nil {
		msg = fmt.Sprintf("%s: %v", msg, err)
	}
	s.log.Debug("interruption report not accepted now", zap.String("notice", rep.ID), zap.String("reason", msg))
	secs := int((s.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusServiceUnavailable, msg)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, agentv1.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
