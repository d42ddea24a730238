package launcher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/launcher/fake"
)

// crashPoint is where the chaos test kills the leader.
type crashPoint string

const (
	beforePlanCommit   crashPoint = "before-plan-commit"
	afterPlanCommit    crashPoint = "after-plan-commit"
	afterAttemptStart  crashPoint = "after-attempt-start"
	afterCloudLaunch   crashPoint = "after-cloud-launch"
	duringLaunchResult crashPoint = "during-launch-result"
)

// TestChaosLeaderKills runs a 3-replica raft cluster (InmemTransport) with a
// trivial planner (one intent per podsPerIntent pending pods) and the real
// launcher against the fake cloud, and kills the leader at one protocol
// point per subtest, kills times at seeded random occurrences. A killed
// replica is disconnected at once (it can commit nothing more) and restarts
// from its stores. At the end every pod is on exactly one launched intent,
// no intent ever got a second instance, every running instance belongs to a
// launched intent after GC, and all replicas hold byte-identical state.
func TestChaosLeaderKills(t *testing.T) {
	pods, kills := 200, 20
	if testing.Short() {
		pods, kills = 60, 4
	}
	var all []time.Duration
	for i, p := range []crashPoint{beforePlanCommit, afterPlanCommit, afterAttemptStart, afterCloudLaunch, duringLaunchResult} {
		t.Run(string(p), func(t *testing.T) {
			lat := runChaos(t, p, pods, kills, int64(1000+i))
			all = append(all, lat...)
		})
	}
	if len(all) > 0 {
		t.Logf("all points: kill -> new leader's first launch: %s", distribution(all))
	}
}

func distribution(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(f float64) time.Duration { return s[int(f*float64(len(s)-1))] }
	return fmt.Sprintf("n=%d min=%v p50=%v p90=%v p99=%v max=%v", len(s), s[0].Round(time.Millisecond),
		q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond), q(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

type chaosNode struct {
	id     raft.ServerID
	addr   raft.ServerAddress
	store  *raft.InmemStore
	snaps  *raft.InmemSnapshotStore
	trans  *raft.InmemTransport
	fsm    *fsm.FSM
	raft   *raft.Raft
	cancel context.CancelFunc
	done   chan struct{}
	alive  bool
}

type chaos struct {
	t       *testing.T
	point   crashPoint
	rng     *rand.Rand
	cloud   *fake.Cloud
	podKeys []string
	perInt  int

	mu       sync.Mutex
	nodes    []*chaosNode
	seen     int          // occurrences of the crash point on a leader
	killAt   map[int]bool // occurrences to kill at
	kills    int
	killing  bool
	killedAt time.Time
	killed   *raft.Raft
	waitLat  bool
	lat      []time.Duration
	intentN  int
	wg       sync.WaitGroup
}

func runChaos(t *testing.T, point crashPoint, pods, kills int, seed int64) []time.Duration {
	c := &chaos{t: t, point: point, rng: rand.New(rand.NewSource(seed)), cloud: fake.New("chaos", nil), perInt: 2, killAt: map[int]bool{}}
	for i := range pods {
		c.podKeys = append(c.podKeys, fmt.Sprintf("default/pod-%03d", i))
	}
	// Kill at `kills` distinct occurrences among the first 2*kills; every
	// intent passes each point at least once and there are pods/perInt
	// >= 2*kills intents.
	for _, k := range c.rng.Perm(2 * kills)[:kills] {
		c.killAt[k] = true
	}
	var cfg raft.Configuration
	for i := range 3 {
		n := &chaosNode{id: raft.ServerID(fmt.Sprintf("node-%d", i)), addr: raft.ServerAddress(fmt.Sprintf("node-%d", i)),
			store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		c.nodes = append(c.nodes, n)
		cfg.Servers = append(cfg.Servers, raft.Server{ID: n.id, Address: n.addr, Suffrage: raft.Voter})
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	if err := c.nodes[0].raft.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.mu.Lock()
		for _, n := range c.nodes {
			if n.alive {
				c.stopLocked(n)
			}
		}
		c.mu.Unlock()
		c.wg.Wait()
	}()

	// Fail only when the run stops making progress (no kill and no pod
	// launched for a minute and a half): on a loaded machine elections
	// take longer and extra ones happen, which this test must survive.
	progress := func() (int, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.kills + c.launchedPods(), fmt.Sprintf("%s: not finished: %d/%d kills, %d occurrences, %d/%d pods launched",
			point, c.kills, kills, c.seen, c.launchedPods(), len(c.podKeys))
	}
	last, _ := progress()
	stalled := time.Now()
	for !c.finished() {
		if p, msg := progress(); p != last {
			last, stalled = p, time.Now()
		} else if time.Since(stalled) > 90*time.Second {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
	leader := c.converge()
	c.check(leader)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lat) > 0 {
		t.Logf("%s: %d kills, kill -> new leader's first launch: %s (cloud: %d launch calls, %d instances)",
			point, c.kills, distribution(c.lat), c.cloud.LaunchCalls, c.cloud.Created)
	}
	return c.lat
}

func testRaftConfig(id raft.ServerID) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = id
	// Scaled-down timings (raft's own test values x2) keep 100 failovers
	// within the test budget; production uses raft's defaults.
	conf.HeartbeatTimeout = 100 * time.Millisecond
	conf.ElectionTimeout = 100 * time.Millisecond
	conf.LeaderLeaseTimeout = 100 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	// Snapshot often so restarts restore from snapshots and lagging
	// followers get InstallSnapshot.
	conf.SnapshotThreshold = 32
	conf.SnapshotInterval = 50 * time.Millisecond
	conf.TrailingLogs = 16
	conf.Logger = hclog.NewNullLogger()
	return conf
}

// start (re)starts a node from its stores and connects it to the others.
// Callers hold no lock on first start; restart holds c.mu.
func (c *chaos) start(n *chaosNode) {
	_, n.trans = raft.NewInmemTransport(n.addr)
	for _, o := range c.nodes {
		if o != n && o.alive {
			n.trans.Connect(o.addr, o.trans)
			o.trans.Connect(n.addr, n.trans)
		}
	}
	n.fsm = fsm.New()
	r, err := raft.NewRaft(testRaftConfig(n.id), n.fsm, n.store, n.store, n.snaps, n.trans)
	if err != nil {
		c.t.Errorf("starting %s: %v", n.id, err)
		return
	}
	n.raft, n.alive = r, true
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		cluster.MonitorLeadership(ctx, r, 5*time.Second, func(ctx context.Context) { c.lead(ctx, n) }, zap.NewNop())
	}()
}

// stopLocked disconnects a node at once (so it cannot commit anything more)
// and shuts it down in the background.
func (c *chaos) stopLocked(n *chaosNode) {
	n.alive = false
	n.trans.DisconnectAll()
	for _, o := range c.nodes {
		if o != n && o.trans != nil {
			o.trans.Disconnect(n.addr)
		}
	}
	n.cancel()
	r := n.raft
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = r.Shutdown().Error()
	}()
}

// maybeKill counts an occurrence of the crash point on the leader n and kills
// n if this occurrence was drawn. It reports whether n was killed.
func (c *chaos) maybeKill(n *chaosNode, async bool) bool {
	c.mu.Lock()
	if c.killing || c.waitLat || !n.alive || c.kills >= len(c.killAt) {
		c.mu.Unlock()
		return false
	}
	k := c.seen
	c.seen++
	if !c.killAt[k] {
		c.mu.Unlock()
		return false
	}
	c.killing = true
	c.mu.Unlock()
	kill := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.kills++
		c.killedAt, c.killed, c.waitLat = time.Now(), n.raft, true
		c.stopLocked(n)
		// Restart once the old raft is down, like a pod coming back.
		old := n.done
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			<-old
			time.Sleep(time.Duration(c.jitter(50)) * time.Millisecond)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.start(n)
			c.killing = false
		}()
	}
	if async {
		// Race the kill with the command in flight.
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			time.Sleep(time.Duration(c.jitter(3000)) * time.Microsecond)
			kill()
		}()
		return false
	}
	kill()
	return true
}

func (c *chaos) jitter(max int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Intn(max)
}

var errKilled = errors.New("killed by chaos test")

// lead runs the leader loops of node n: the trivial planner and the launcher.
func (c *chaos) lead(ctx context.Context, n *chaosNode) {
	r := n.raft
	prop := cluster.RaftProposer{Raft: r, Timeout: 10 * time.Second}
	hooks := launcher.Hooks{
		At: func(p launcher.Point, _ string) error {
			c.gate(ctx)
			switch {
			case p == launcher.AfterAttemptStart && c.point == afterAttemptStart,
				p == launcher.AfterCloudLaunch && c.point == afterCloudLaunch:
				if c.maybeKill(n, false) {
					return errKilled
				}
			case p == launcher.BeforeLaunchResult && c.point == duringLaunchResult:
				c.maybeKill(n, true)
			}
			return nil
		},
		Launched: func(string, string) { c.observeLaunch(r) },
	}
	// One intent at a time: the kill schedule counts occurrences of the
	// crash point, which a concurrent pass would use up in its first round
	// (TestPassIsConcurrent covers concurrency).
	l := launcher.New(launcher.Config{Cluster: "chaos", Interval: 5 * time.Millisecond, GCInterval: -1, Hooks: hooks, Concurrency: 1},
		launcher.Deps{Cloud: c.cloud, Raft: prop, State: n.fsm})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = l.Run(ctx) }()
	go func() { defer wg.Done(); c.plan(ctx, n, prop, l) }()
	wg.Wait()
}

// gate holds a leader's work while a killed replica restarts, once the new
// leader's first launch has been measured, so the workload lasts for every
// planned kill.
func (c *chaos) gate(ctx context.Context) {
	for ctx.Err() == nil {
		c.mu.Lock()
		blocked := c.killing && !c.waitLat
		c.mu.Unlock()
		if !blocked {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *chaos) observeLaunch(r *raft.Raft) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waitLat && r != c.killed {
		c.lat = append(c.lat, time.Since(c.killedAt))
		c.waitLat = false
	}
}

// plan is the trivial planner: pending pods (not nominated to a live
// intent in the FSM, i.e. in-flight capacity counted) are committed in
// intents of perInt pods.
func (c *chaos) plan(ctx context.Context, n *chaosNode, prop cluster.RaftProposer, l *launcher.Launcher) {
	for ctx.Err() == nil {
		nominated := n.fsm.NominatedPods()
		var pending []string
		for _, p := range c.podKeys {
			if _, ok := nominated[p]; !ok {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		pending = pending[:min(c.perInt, len(pending))]
		c.mu.Lock()
		c.intentN++
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", c.rng.Uint32(), c.intentN)
		c.mu.Unlock()
		cmd := fsm.PlanCommit{At: time.Now(), Intents: []fsm.NewIntent{{ID: id, Pods: pending, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-" + id[:8], Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096}}}}}}}
		c.gate(ctx)
		if c.point == beforePlanCommit && c.maybeKill(n, false) {
			return
		}
		resp, err := prop.Propose(ctx, fsm.MustEncode(fsm.PlanCommitType, cmd))
		if err != nil {
			if errors.Is(err, cluster.ErrNotLeader) || ctx.Err() != nil {
				return // not leader any more
			}
			continue // slow, not deposed: plan again (committed pods are nominated now)
		}
		if rerr, ok := resp.(error); ok {
			c.t.Errorf("plan commit rejected: %v", rerr)
			return
		}
		c.gate(ctx)
		if c.point == afterPlanCommit && c.maybeKill(n, false) {
			return
		}
		l.Wake()
		c.awaitFirstLaunch(ctx)
	}
}

// awaitFirstLaunch holds the planner while the test waits for a new
// leader's first launch. Crash-point occurrences in that window are not
// counted (maybeKill), so a planner that kept committing there could use up
// every pod before all kills had happened, and the run could never finish.
// One commit per window is enough for the new leader to launch.
func (c *chaos) awaitFirstLaunch(ctx context.Context) {
	for ctx.Err() == nil {
		c.mu.Lock()
		waiting := c.waitLat
		c.mu.Unlock()
		if !waiting {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *chaos) leader() *chaosNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.alive && n.raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

// launchedPods counts pods on launched intents (any replica's view: the
// leader's). Caller holds c.mu.
func (c *chaos) launchedPods() int {
	for _, n := range c.nodes {
		if n.alive && n.raft.State() == raft.Leader {
			k := 0
			for _, in := range n.fsm.Intents() {
				if in.State == fsm.IntentLaunched {
					k += len(in.Pods)
				}
			}
			return k
		}
	}
	return 0
}

func (c *chaos) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kills >= len(c.killAt) && !c.killing && c.launchedPods() == len(c.podKeys)
}

// converge waits until every replica has applied the same state and
// returns the leader.
func (c *chaos) converge() *chaosNode {
	deadline := time.Now().Add(90 * time.Second)
	for {
		l := c.leader()
		if l != nil {
			// A barrier on the leader (so it has applied everything), then
			// every replica's state byte-identical to it.
			if err := l.raft.Barrier(15 * time.Second).Error(); err == nil {
				same := true
				var ref []byte
				c.mu.Lock()
				for _, n := range append([]*chaosNode{l}, c.nodes...) {
					var b bytes.Buffer
					n.fsm.WriteTo(&b)
					if ref == nil {
						ref = b.Bytes()
					} else if !bytes.Equal(ref, b.Bytes()) {
						same = false
					}
				}
				c.mu.Unlock()
				if same {
					return l
				}
			}
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			var st []string
			for _, n := range c.nodes {
				var b bytes.Buffer
				n.fsm.WriteTo(&b)
				st = append(st, fmt.Sprintf("%s alive=%v %s applied=%d fsm=%d bytes=%d", n.id, n.alive, n.raft.State(), n.raft.AppliedIndex(), n.fsm.LastIndex(), b.Len()))
			}
			c.mu.Unlock()
			c.t.Fatalf("replicas did not converge: %s", strings.Join(st, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *chaos) check(leader *chaosNode) {
	t := c.t
	// Every pod on exactly one intent, and that intent launched.
	owner := map[string]string{}
	launched := map[string]fsm.LaunchIntent{}
	for _, in := range leader.fsm.Intents() {
		if in.State != fsm.IntentLaunched {
			if in.State.Live() {
				t.Errorf("intent %s left %s", in.ID, in.State)
			}
			continue
		}
		launched[in.ID] = in
		for _, p := range in.Pods {
			if o, ok := owner[p]; ok {
				t.Errorf("pod %s on intents %s and %s", p, o, in.ID)
			}
			owner[p] = in.ID
		}
	}
	if len(owner) != len(c.podKeys) {
		t.Errorf("%d of %d pods have a node", len(owner), len(c.podKeys))
	}
	// No intent launched twice: one instance ever per launch-id tag.
	perIntent := map[string][]string{}
	for _, inst := range c.cloud.Instances() {
		id := inst.Tags[karpv1.TagLaunchID]
		perIntent[id] = append(perIntent[id], inst.ID)
	}
	for id, insts := range perIntent {
		if len(insts) > 1 {
			t.Errorf("intent %s launched %d instances: %v", id, len(insts), insts)
		}
		if in, ok := launched[id]; ok && in.InstanceID != insts[0] {
			t.Errorf("intent %s records %s, cloud has %v", id, in.InstanceID, insts)
		}
	}
	// After GC, every running instance belongs to a launched intent.
	gc := launcher.New(launcher.Config{Cluster: "chaos", GCGrace: time.Nanosecond}, launcher.Deps{Cloud: c.cloud, Raft: cluster.RaftProposer{Raft: leader.raft}, State: leader.fsm})
	orphans, err := gc.CollectOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, inst := range c.cloud.Instances() {
		if inst.Gone() {
			continue
		}
		running = append(running, inst.ID)
		if in, ok := launched[inst.Tags[karpv1.TagLaunchID]]; !ok || in.InstanceID != inst.ID {
			t.Errorf("instance %s without a launched intent after GC", inst.ID)
		}
	}
	sort.Strings(running)
	if len(running) != len(launched) {
		t.Errorf("%d running instances for %d launched intents", len(running), len(launched))
	}
	if len(orphans) > 0 {
		t.Logf("%s: GC terminated %d orphans: %s", c.point, len(orphans), strings.Join(orphans, ","))
	}
}
