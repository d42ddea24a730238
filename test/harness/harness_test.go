package harness

import (
	"testing"
	"time"

	"github.com/joiner-dev/joiner/test/testenv"
)

// TestRaftFailover: three coordinator processes form a raft cluster, a
// leader is elected, killing it elects another, the killed replica rejoins,
// and after Stop no process the harness started is alive.
func TestRaftFailover(t *testing.T) {
	h, ctx := StartReady(t, Options{}, 3*time.Minute)
	first, err := h.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader: %s", first.Name)
	if err := h.Kill(first.Name); err != nil {
		t.Fatal(err)
	}
	second, err := h.WaitLeader(ctx, first.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader after killing %s: %s", first.Name, second.Name)
	if err := h.Restart(first.Name); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if h.IsLeader(ctx, h.Coordinator(first.Name)) && h.IsLeader(ctx, second) {
		t.Fatal("two leaders after the restart")
	}
	pids := h.PIDs()
	h.Stop()
	for _, pid := range pids {
		if testenv.ProcessAlive(pid) {
			t.Errorf("process %d still alive after Stop", pid)
		}
	}
}
