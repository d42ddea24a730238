package agent

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/agent/report"
	"github.com/joiner-dev/joiner/agent/report/reporttest"
	"github.com/joiner-dev/joiner/test/poll"
)

// fakeIMDS is an imds.Getter over a map (missing paths: 404).
type fakeIMDS struct {
	mu     sync.Mutex
	bodies map[string]string
}

func (f *fakeIMDS) Get(_ context.Context, p string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.bodies[p]
	if !ok {
		return nil, imds.ErrNotFound
	}
	return []byte(b), nil
}

func (f *fakeIMDS) set(p, b string) { f.mu.Lock(); f.bodies[p] = b; f.mu.Unlock() }

// notifySocket listens on a unixgram NOTIFY_SOCKET and collects messages.
func notifySocket(t *testing.T) (<-chan string, func()) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("notify socket: %v", err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	// Watchdog pings arrive every 100 ms for as long as the test runs:
	// keep every message that is not a bare ping, and the latest pings.
	ch := make(chan string, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			msg := string(buf[:n])
			for {
				select {
				case ch <- msg:
				default:
					if msg == "WATCHDOG=1" {
						break // drop a ping rather than block
					}
					<-ch // make room for a state change: drop the oldest
					continue
				}
				break
			}
		}
	}()
	return ch, func() { conn.Close(); <-done }
}

func TestAgentEndToEndWithFakes(t *testing.T) {
	msgs, closeSock := notifySocket(t)
	defer closeSock()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	kube := fake.NewClientset(node, web)
	coord := reporttest.NewCluster(t, 2, 7)
	coord.SetDropRate(0.5)
	im := &fakeIMDS{bodies: map[string]string{imds.PathInstanceID: "i-1"}}
	a, err := New(Config{
		NodeName: "node-1", IMDSGetter: im, Interval: 20 * time.Millisecond, MetricsAddr: "127.0.0.1:0",
		Report: report.Options{Endpoints: coord.Endpoints(), RetryBase: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond},
	}, kube, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()

	// READY=1 first, then watchdog pings.
	got := map[string]bool{}
	deadline := time.After(time.Minute)
	for !got["READY=1"] || !got["WATCHDOG=1"] {
		select {
		case m := <-msgs:
			for _, l := range strings.Split(m, "\n") {
				got[l] = true
			}
		case <-deadline:
			t.Fatalf("sd_notify messages so far: %v; want READY=1 and WATCHDOG=1", got)
		}
	}

	deadlineAt := time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)
	im.set(imds.PathSpotInstanceAction, `{"action":"terminate","time":"`+deadlineAt+`"}`)
	waitFor(t, func() bool {
		n, _ := kube.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return n.Spec.Unschedulable
	}, "node cordoned")
	waitFor(t, func() bool { return len(coord.Log()) == 1 }, "report committed")
	if id := coord.Log()[0].Report.ID; id != "i-1/spot-interruption/"+deadlineAt {
		t.Errorf("reported %s", id)
	}
	// The fake clientset has no eviction subresource semantics: the drain keeps
	// retrying; what matters here is the wiring. Check metrics over HTTP.
	resp, err := http.Get("http://" + a.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	if !strings.Contains(body.String(), `joiner_agent_notices_total{kind="spot-interruption"} 1`) {
		t.Errorf("metrics lack the notice counter:\n%s", body.String())
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after cancel")
	}
	// The message may still be on its way from the socket to the channel.
	for stopping, timeout := false, time.After(time.Minute); !stopping; {
		select {
		case m := <-msgs:
			stopping = strings.Contains(m, "STOPPING=1")
		case <-timeout:
			t.Fatal("no STOPPING=1 on shutdown")
		}
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, time.Minute, 25*time.Millisecond, what, cond)
}
