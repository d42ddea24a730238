package imds

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeIMDS is an IMDSv2-only metadata server with expiring tokens.
type fakeIMDS struct {
	mu     sync.Mutex
	bodies map[string]string // path under /latest/meta-data/ -> body (absent = 404)
	status map[string]int    // forced status per path
	tokens map[string]time.Time
	puts   int
	gets   int
	unauth int
	// grace is how long past its TTL a token is still accepted (the time
	// a request may spend in flight on a loaded machine).
	grace    time.Duration
	failPUT  bool
	nextTok  int
	lastTTLs []string
}

func newFakeIMDS(t *testing.T) (*fakeIMDS, *httptest.Server) {
	f := &fakeIMDS{bodies: map[string]string{}, status: map[string]int{}, tokens: map[string]time.Time{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeIMDS) set(path, body string) { f.mu.Lock(); f.bodies[path] = body; f.mu.Unlock() }

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/latest/api/token" {
		f.puts++
		if r.Method != http.MethodPut || f.failPUT {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		f.lastTTLs = append(f.lastTTLs, r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.nextTok++
		tok := "tok-" + strconv.Itoa(f.nextTok)
		f.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", strconv.Itoa(ttl))
		_, _ = w.Write([]byte(tok))
		return
	}
	f.gets++
	exp, ok := f.tokens[r.Header.Get("X-Aws-Ec2-Metadata-Token")]
	if !ok || time.Now().After(exp.Add(f.grace)) {
		f.unauth++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")
	if s, ok := f.status[p]; ok {
		w.WriteHeader(s)
		return
	}
	b, ok := f.bodies[p]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	_, _ = w.Write([]byte(b))
}
