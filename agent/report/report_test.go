package report_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"

	"go.uber.org/zap/zaptest"

	"github.com/joiner-dev/joiner/agent/report"
	"github.com/joiner-dev/joiner/agent/report/reporttest"
)

func notice(i int) agentv1.Report {
	t := time.Date(2026, 11, 21, 12, 0, i, 0, time.UTC)
	return agentv1.Report{
		ID: fmt.Sprintf("i-%03d/spot-interruption/%s", i, t.Format(time.RFC3339)), Kind: "spot-interruption",
		InstanceID: fmt.Sprintf("i-%03d", i), Node: fmt.Sprintf("node-%d", i), Action: "terminate",
		NoticeTime: t, Deadline: t, ObservedAt: t,
	}
}

// Every notice is acknowledged and committed exactly once although half the
// requests fail (some after their commit) and the whole coordinator restarts.
func TestDeliverUnreliableCoordinator(t *testing.T) {
	c := reporttest.NewCluster(t, 3, 42)
	c.SetDropRate(0.5)
	c.Token = "s3cret"
	cl, err := report.NewClient(zaptest.NewLogger(t), report.Options{
		Endpoints: c.Endpoints(), Token: "s3cret", RetryBase: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 40
	acks := make([]agentv1.Ack, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i >= n/2 {
				time.Sleep(100 * time.Millisecond) // some start while the coordinator is down
			}
			acks[i], errs[i] = cl.Deliver(ctx, notice(i))
		}()
	}
	// Restart every replica once, mid-way.
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < 3; i++ {
		c.Replica(i).Stop()
	}
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := c.Replica(i).Start(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// The same notices again (agent restart): harmless duplicates.
	for i := 0; i < 5; i++ {
		ack, err := cl.Deliver(ctx, notice(i))
		if err != nil || !ack.Duplicate || ack.Index != acks[i].Index {
			t.Errorf("redelivery of %d: %+v, %v; want duplicate of index %d", i, ack, err, acks[i].Index)
		}
	}
	log := c.Log()
	count := map[string]int{}
	index := map[string]uint64{}
	for _, e := range log {
		count[e.Report.ID]++
		index[e.Report.ID] = e.Index
	}
	for i := 0; i < n; i++ {
		id := notice(i).ID
		if errs[i] != nil {
			t.Errorf("notice %d: %v", i, errs[i])
		}
		if count[id] != 1 {
			t.Errorf("notice %s committed %d times, want 1", id, count[id])
		}
		if acks[i].Index != index[id] {
			t.Errorf("notice %s acked at index %d, committed at %d", id, acks[i].Index, index[id])
		}
	}
	if len(log) != n {
		t.Errorf("log has %d entries, want %d", len(log), n)
	}
	t.Logf("%d notices, %d requests (drop rate 0.5, one full restart)", n, c.Requests())
}

func TestDeliverStopsWithContext(t *testing.T) {
	c := reporttest.NewCluster(t, 1, 1)
	c.SetDropRate(1)
	cl, _ := report.NewClient(zaptest.NewLogger(t), report.Options{Endpoints: c.Endpoints(), RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cl.Deliver(ctx, notice(1)); err == nil {
		t.Fatal("Deliver succeeded against a coordinator that drops everything")
	}
}

func TestDeliverRejectsInvalidReport(t *testing.T) {
	cl, _ := report.NewClient(zaptest.NewLogger(t), report.Options{Endpoints: []string{"http://127.0.0.1:1"}})
	if _, err := cl.Deliver(context.Background(), agentv1.Report{ID: "x"}); err == nil {
		t.Fatal("want a validation error")
	}
	if _, err := report.NewClient(zaptest.NewLogger(t), report.Options{Endpoints: []string{"127.0.0.1:80"}}); err == nil {
		t.Fatal("want an endpoint error")
	}
}

func waitFor(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	var last string
	for i := 0; i < 200; i++ {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("condition not met in 10 s: %s", last)
}
