package launcher_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/launcher/fake"
	"github.com/joiner-dev/joiner/test/fakeclock"
)

// orphanCase is one instance the cloud lists as running, what raft records
// of it and which NodeClaim the cache holds; CollectOrphans runs once, age
// after the instance's launch.
type orphanCase struct {
	name string
	// intent is the state raft records the instance's launch intent in:
	// "" none (tags carries no launch ID, or an ID raft does not know),
	// launching (attempt 1 current), launched (the instance recorded).
	intent fsm.IntentState
	// recorded moves the recorded instance on (launched intents only).
	recorded fsm.InstanceState
	// resultAfter is how long after the instance's launch its launch
	// result was committed (a leader that adopted it late).
	resultAfter time.Duration
	tags        map[string]string
	// claim is the NodeClaim the cache holds (nil: none); noClaims runs
	// without a NodeClaim cache at all (raft alone decides).
	claim    *karpv1.NodeClaim
	noClaims bool
	age      time.Duration
	want     bool // terminated
}

const (
	orphanInst    = "i-0123456789abcdef0"
	orphanPID     = "aws:///us-east-1a/" + orphanInst
	orphanIntent  = "intent-1"
	orphanClaim   = "default-abcde"
	orphanCluster = "test"
)

// joinerTags are the tags cloud/aws puts on an instance of attempt 1 of
// orphanIntent.
func joinerTags() map[string]string {
	t := karpenterTags()
	t[karpv1.TagNodeClaim] = orphanClaim
	t[karpv1.TagLaunchID] = orphanIntent
	t[karpv1.TagAttempt] = "1"
	return t
}

// karpenterTags are the tags Karpenter v1.14 puts on an instance at launch.
func karpenterTags() map[string]string {
	return map[string]string{karpv1.TagClusterPrefix + orphanCluster: "owned", karpv1.TagEKSClusterName: orphanCluster,
		karpv1.TagNodePool: "default", karpv1.TagNodeClass: "default"}
}

func with(tags map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(tags, kv[i])
			continue
		}
		tags[kv[i]] = kv[i+1]
	}
	return tags
}

func claimNamed(name, providerID string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
}

// TestCollectOrphansRules: Karpenter's instance garbage collection
// (terminate what it tagged whose NodeClaim does not exist, past a grace
// period) applied to launched intents and to the instances Karpenter
// launched before Joiner took over, next to the fenced launch protocol's
// own rules; an instance raft records as gone is terminated again.
func TestCollectOrphansRules(t *testing.T) {
	old, young := 3*time.Minute, time.Minute // the default grace is 2 min
	tests := []orphanCase{
		// Launched intents: Karpenter's rule.
		{name: "launched, no nodeclaim: terminated", intent: fsm.IntentLaunched, tags: joinerTags(), age: old, want: true},
		{name: "launched, no nodeclaim, young: kept", intent: fsm.IntentLaunched, tags: joinerTags(), age: young},
		{name: "launched, nodeclaim by provider ID: kept", intent: fsm.IntentLaunched, tags: joinerTags(),
			claim: claimNamed("renamed", orphanPID), age: old},
		{name: "launched, nodeclaim by tag without provider ID: kept", intent: fsm.IntentLaunched, tags: joinerTags(),
			claim: claimNamed(orphanClaim, ""), age: old},
		{name: "launched, untagged, the intent's nodeclaim without provider ID: kept", intent: fsm.IntentLaunched,
			tags: with(joinerTags(), karpv1.TagNodeClaim, ""), claim: claimNamed(orphanClaim, ""), age: old},
		{name: "launched, its nodeclaim names it in another zone spelling: kept", intent: fsm.IntentLaunched, tags: joinerTags(),
			claim: claimNamed(orphanClaim, "aws:///use1-az1/"+orphanInst), age: old},
		{name: "launched, its nodeclaim names another instance: terminated", intent: fsm.IntentLaunched, tags: joinerTags(),
			claim: claimNamed(orphanClaim, "aws:///us-east-1a/i-other"), age: old, want: true},
		{name: "launched, result committed late, no nodeclaim: kept a grace period after the result", intent: fsm.IntentLaunched,
			tags: joinerTags(), resultAfter: 2 * time.Minute, age: old},
		{name: "launched, no nodeclaim cache: kept", intent: fsm.IntentLaunched, tags: joinerTags(), noClaims: true, age: old},
		// Raft records the instance as gone; the cloud lists it running.
		{name: "recorded terminated, backed: terminated again", intent: fsm.IntentLaunched, recorded: fsm.InstanceTerminated,
			tags: joinerTags(), claim: claimNamed(orphanClaim, orphanPID), age: old, want: true},
		{name: "recorded lost, no nodeclaim cache: terminated again", intent: fsm.IntentLaunched, recorded: fsm.InstanceLost,
			tags: joinerTags(), noClaims: true, age: old, want: true},
		{name: "recorded terminated, young: kept", intent: fsm.IntentLaunched, recorded: fsm.InstanceTerminated,
			tags: joinerTags(), noClaims: true, age: young},
		{name: "recorded draining, backed: kept", intent: fsm.IntentLaunched, recorded: fsm.InstanceDraining,
			tags: joinerTags(), claim: claimNamed(orphanClaim, orphanPID), age: old},
		// The fenced launch protocol.
		{name: "launching, current attempt, no nodeclaim: kept", intent: fsm.IntentLaunching, tags: joinerTags(), age: old},
		{name: "launching, another attempt: terminated", intent: fsm.IntentLaunching, tags: with(joinerTags(), karpv1.TagAttempt, "2"),
			claim: claimNamed(orphanClaim, ""), age: old, want: true},
		{name: "unknown intent, nodeclaim by provider ID: kept", tags: joinerTags(), claim: claimNamed(orphanClaim, orphanPID), age: old},
		{name: "unknown intent, no nodeclaim: terminated", tags: joinerTags(), age: old, want: true},
		// Instances Karpenter launched (no launch ID).
		{name: "karpenter's, no nodeclaim: terminated", tags: karpenterTags(), age: old, want: true},
		{name: "karpenter's, young: kept", tags: karpenterTags(), age: young},
		{name: "karpenter's, nodeclaim by provider ID: kept", tags: karpenterTags(), claim: claimNamed("default-x", orphanPID), age: old},
		{name: "karpenter's, tagged nodeclaim without provider ID: kept", tags: with(karpenterTags(), karpv1.TagNodeClaim, "default-x"),
			claim: claimNamed("default-x", ""), age: old},
		{name: "karpenter's, no nodeclaim cache: kept", tags: karpenterTags(), noClaims: true, age: old},
		{name: "karpenter's of another cluster name: kept", tags: with(karpenterTags(), karpv1.TagEKSClusterName, "other"), age: old},
		{name: "without a nodeclass tag: kept", tags: with(karpenterTags(), karpv1.TagNodeClass, ""), age: old},
		{name: "managed node group's: kept", tags: map[string]string{karpv1.TagClusterPrefix + orphanCluster: "owned",
			"eks:cluster-name": orphanCluster, "eks:nodegroup-name": "system"}, age: old},
		{name: "managed node group's with the eks tag Karpenter uses: kept", tags: map[string]string{karpv1.TagClusterPrefix + orphanCluster: "owned",
			karpv1.TagEKSClusterName: orphanCluster, karpv1.TagNodeClass: "default"}, age: old},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := collectOne(t, tc)
			if got != tc.want {
				t.Fatalf("terminated = %v, want %v", got, tc.want)
			}
		})
	}
}

// collectOne sets up tc and reports whether CollectOrphans terminated its
// instance.
func collectOne(t *testing.T, tc orphanCase) bool {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := fakeclock.New(t0)
	f := fsm.New()
	apply := func(typ fsm.MessageType, cmd any) {
		t.Helper()
		if res := f.ApplyCommand(fsm.MustEncode(typ, cmd), 0); res != nil {
			t.Fatalf("applying %s: %v", typ, res)
		}
	}
	if tc.intent != "" {
		spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClass: "default", NodeClaim: orphanClaim,
			Candidates: []cloud.Candidate{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}}}}
		apply(fsm.PlanCommitType, fsm.PlanCommit{At: t0, Intents: []fsm.NewIntent{{ID: orphanIntent, Pods: []string{"p"}, Spec: spec}}})
		apply(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: orphanIntent, Attempt: 1, At: t0})
	}
	if tc.intent == fsm.IntentLaunched {
		apply(fsm.LaunchResultType, fsm.LaunchResult{IntentID: orphanIntent, Attempt: 1, At: t0.Add(tc.resultAfter),
			Launched: &fsm.Launched{InstanceID: orphanInst, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", LaunchedAt: t0}})
		if tc.recorded != "" {
			apply(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: orphanInst, State: tc.recorded, At: t0.Add(tc.resultAfter)})
		}
	}
	c := fake.New(orphanCluster, clk.Now)
	c.Put(cloud.Instance{ID: orphanInst, InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", State: "running",
		LaunchTime: t0, Tags: tc.tags})
	deps := launcher.Deps{Cloud: c, Raft: fsmtest.New(f), State: f}
	if !tc.noClaims {
		claims := claimsByName{}
		if tc.claim != nil {
			claims[tc.claim.Name] = tc.claim
		}
		deps.Claims = claims
	}
	l := launcher.New(launcher.Config{Cluster: orphanCluster, Now: clk.Now}, deps)
	clk.Add(tc.age)
	got, err := l.CollectOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	terminated := len(got) == 1 && got[0] == orphanInst
	if terminated != (c.Instances()[0].State == "terminated") || len(got) > 1 {
		t.Fatalf("CollectOrphans returned %v, the cloud has %+v", got, c.Instances())
	}
	return terminated
}

// TestCollectLaunchedWithoutNodeClaim: an intent launched through the
// protocol whose NodeClaim is never created (its NodePool was deleted, the
// create kept failing, a finalizer was removed by hand) no longer keeps
// its instance for good: once the grace period has passed since the launch
// result, Karpenter's rule terminates it. Its sibling, whose NodeClaim the
// cache holds without a provider ID yet, is kept.
func TestCollectLaunchedWithoutNodeClaim(t *testing.T) {
	h := newHarness(t, "backed", "bare")
	claims := claimsByName{"nc-backed": claimNamed("nc-backed", "")}
	l := launcher.New(launcher.Config{Cluster: "test", Now: h.clk.Now}, launcher.Deps{Cloud: h.cloud, Raft: h.d, State: h.f, Claims: claims})
	ctx := context.Background()
	if err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	bare, _ := h.f.Intent("bare")
	if bare.State != fsm.IntentLaunched {
		t.Fatalf("intent bare is %s, want launched", bare.State)
	}
	h.clk.Add(time.Minute)
	if got, err := l.CollectOrphans(ctx); err != nil || len(got) != 0 {
		t.Fatalf("inside the grace period: terminated %v (%v)", got, err)
	}
	h.clk.Add(time.Minute)
	got, err := l.CollectOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != bare.InstanceID {
		t.Fatalf("terminated %v, want [%s] (intent bare's)", got, bare.InstanceID)
	}
}
