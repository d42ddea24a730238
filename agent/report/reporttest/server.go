// Package reporttest is a test coordinator that models the server side of
// the agent's interruption report contract (see package report): several
// replicas share one committed log; a report is answered 200 only after it
// is committed; a repeat is answered 200 with duplicate=true; replicas can
// be told to fail requests at random (before commit, or after commit with
// the answer lost) and can be restarted on the same address.
package reporttest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"

	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"
)

// Entry is one committed report.
type Entry struct {
	Index  uint64
	Report agentv1.Report
}

// Cluster is a set of replicas sharing one committed log.
type Cluster struct {
	mu       sync.Mutex
	log      []Entry
	byID     map[string]uint64
	requests int
	// DropRate is the probability [0,1] that a request fails. Half of the
	// failures happen before the commit (503), half after it (connection
	// closed without an answer, so the agent cannot know it was committed).
	DropRate float64
	// Token, when set, is required as a bearer token.
	Token    string
	rng      *rand.Rand
	replicas []*Replica
}

// Replica is one coordinator replica.
type Replica struct {
	c    *Cluster
	addr string
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewCluster starts n replicas on 127.0.0.1; they are stopped at test end.
func NewCluster(t testing.TB, n int, seed uint64) *Cluster {
	c := &Cluster{byID: map[string]uint64{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listening: %v", err)
		}
		r := &Replica{c: c, addr: ln.Addr().String()}
		r.serve(ln)
		c.replicas = append(c.replicas, r)
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.stop()
		}
	})
	return c
}

// Endpoints are the replicas' base URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, r := range c.replicas {
		out = append(out, "http://"+r.addr)
	}
	return out
}

// Replica returns replica i.
func (c *Cluster) Replica(i int) *Replica { return c.replicas[i] }

// Log returns a copy of the committed log.
func (c *Cluster) Log() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Entry(nil), c.log...)
}

// Requests is how many requests reached any replica.
func (c *Cluster) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// SetDropRate changes the failure probability.
func (c *Cluster) SetDropRate(p float64) { c.mu.Lock(); c.DropRate = p; c.mu.Unlock() }

func (r *Replica) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentv1.Path, r.c.handle)
	r.ln = ln
	r.srv = &http.Server{Handler: mux}
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
}

func (r *Replica) stop() {
	if r.srv == nil {
		return
	}
	_ = r.srv.Close()
	<-r.done
	r.srv = nil
}

// Stop takes the replica down (its address refuses connections).
func (r *Replica) Stop() { r.stop() }

// Start brings a stopped replica back on its old address.
func (r *Replica) Start() error {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("restarting replica on %s: %w", r.addr, err)
	}
	r.serve(ln)
	return nil
}

func (c *Cluster) handle(w http.ResponseWriter, req *http.Request) {
	c.mu.Lock()
	c.requests++
	drop := c.rng.Float64() < c.DropRate
	afterCommit := drop && c.rng.IntN(2) == 0
	token := c.Token
	c.mu.Unlock()

	if token != "" && req.Header.Get("Authorization") != "Bearer "+token {
		writeJSON(w, http.StatusUnauthorized, agentv1.ErrorBody{Error: "missing or wrong bearer token"})
		return
	}
	var rep agentv1.Report
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		writeJSON(w, http.StatusBadRequest, agentv1.ErrorBody{Error: "decoding body: " + err.Error()})
		return
	}
	if err := rep.Validate(); err != nil {
		writeJSON(w, http.StatusBadRequest, agentv1.ErrorBody{Error: err.Error()})
		return
	}
	if drop && !afterCommit {
		w.Header().Set("Retry-After", "0")
		writeJSON(w, http.StatusServiceUnavailable, agentv1.ErrorBody{Error: "no leader"})
		return
	}
	c.mu.Lock()
	idx, dup := c.byID[rep.ID]
	if !dup {
		idx = uint64(len(c.log) + 1)
		c.log = append(c.log, Entry{Index: idx, Report: rep})
		c.byID[rep.ID] = idx
	}
	c.mu.Unlock()
	if afterCommit {
		// Committed, but the answer is lost.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, http.StatusOK, agentv1.Ack{ID: rep.ID, Index: idx, Duplicate: dup})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
