package launcher_test

import (
	"context"
	"errors"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/simstack"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/launcher"
)

const simCluster = "test"

type env struct {
	sim      *sim.Sim
	endpoint string
	f        *fsm.FSM
	raft     *fsmtest.Direct
	now      time.Time
}

// newEnv starts a sim on loopback; providers reach it through the real SDK.
func newEnv(t *testing.T) *env {
	t.Helper()
	s := sim.New(sim.Options{Config: sim.DefaultConfig()})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	f := fsm.New()
	return &env{sim: s, endpoint: srv.URL, f: f, raft: fsmtest.New(f), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// provider is a fresh AWS provider: a new leader has empty caches.
func (e *env) provider(t *testing.T) *joineraws.Provider {
	t.Helper()
	ac := simstack.Clients(e.endpoint, simstack.AccessKeyID)
	p, err := joineraws.New(joineraws.Options{EC2: ac.EC2, SSM: ac.SSM, IAM: ac.IAM, Cluster: simCluster, Region: "us-east-1",
		KubernetesVersion: sim.DefaultKubernetesVersion, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) launcher(t *testing.T, hooks launcher.Hooks) (*launcher.Launcher, *joineraws.Provider) {
	p := e.provider(t)
	return launcher.New(launcher.Config{Cluster: simCluster, Now: func() time.Time { return e.now }, Hooks: hooks}, launcher.Deps{Cloud: p, Raft: e.raft, State: e.f}), p
}

// commit freezes a spec as the provisioner does (NodeClass resolved into
// subnets, security groups and profile), then commits it in a PlanCommit.
func (e *env) commit(t *testing.T, id string, mutate func(*fsm.LaunchSpec), cands ...cloud.Candidate) {
	t.Helper()
	p := e.provider(t)
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "sim"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Name: "sim-nodes"}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-test",
			Tags:                       map[string]string{"team": "platform"},
		},
	}
	r, err := p.Resolve(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	spec := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClass: nc.Name, NodeClaim: "default-" + id,
		Candidates: cands, Subnets: p.SubnetsByZone(r.Subnets), SecurityGroupIDs: r.SecurityGroupIDs(),
		InstanceProfile: r.InstanceProfile, UserData: []byte("#!/bin/bash\necho hi\n"), Tags: maps.Clone(nc.Spec.Tags)}}
	if mutate != nil {
		mutate(&spec)
	}
	cmd := fsm.PlanCommit{At: e.now, Intents: []fsm.NewIntent{{ID: id, Pods: []string{"pod-" + id}, Spec: spec}}}
	if res := e.f.ApplyCommand(fsm.MustEncode(fsm.PlanCommitType, cmd), 0); res != nil {
		t.Fatal(res)
	}
}

func od(it, zone string, price float64) cloud.Candidate {
	return cloud.Candidate{InstanceType: it, Zone: zone, CapacityType: "on-demand", Price: price, ImageID: "ami-0sim2023x86"}
}

var cands = []cloud.Candidate{od("m5.large", "us-east-1a", 0.096), od("c5.large", "us-east-1b", 0.085), od("m5.xlarge", "us-east-1c", 0.192)}

func (e *env) intent(t *testing.T, id string) fsm.LaunchIntent {
	t.Helper()
	in, ok := e.f.Intent(id)
	if !ok {
		t.Fatalf("no intent %s", id)
	}
	return in
}

func TestLaunchOneInstanceWithAllCandidatesAndTags(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "i1", nil, cands...)
	l, a := e.launcher(t, launcher.Hooks{})
	ctx := context.Background()
	for range 2 {
		if err := l.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	in := e.intent(t, "i1")
	if in.State != fsm.IntentLaunched || in.Attempt != 1 {
		t.Fatalf("intent %s attempt %d, want launched attempt 1", in.State, in.Attempt)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Fatalf("sim has %d instances, want 1", n)
	}
	req, _ := e.sim.LastRequest("CreateFleet")
	n := 0
	for _, cfg := range req.Sub("LaunchTemplateConfigs") {
		n += len(cfg.Sub("Overrides"))
	}
	if n != len(cands) || e.sim.Calls("CreateFleet") != 1 {
		t.Errorf("%d CreateFleet calls, last with %d overrides; want 1 call with all %d candidates", e.sim.Calls("CreateFleet"), n, len(cands))
	}
	if req.Get("ClientToken") != cloud.ClientToken(simCluster, "i1", 1) {
		t.Errorf("ClientToken = %q", req.Get("ClientToken"))
	}
	inst, _ := e.f.Instance(in.InstanceID)
	if inst.InstanceType != "c5.large" || inst.Price != 0.085 {
		t.Errorf("recorded %+v, want the cheapest candidate c5.large at 0.085", inst)
	}
	got, err := a.List(ctx, map[string]string{karpv1.TagLaunchID: "i1"})
	if err != nil || len(got) != 1 || got[0].ID != in.InstanceID {
		t.Fatalf("List(launch-id) = %+v, %v", got, err)
	}
	want := map[string]string{
		"Name": "default-i1", "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "default-i1",
		"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/test": "owned",
		karpv1.TagLaunchID: "i1", karpv1.TagAttempt: "1", "team": "platform",
	}
	for k, v := range want {
		if got[0].Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, got[0].Tags[k], v)
		}
	}
}

// A leader dies after the cloud call; the next leader (fresh provider, no
// caches) retries with the same token and gets the same instance.
func TestSameTokenAfterFailover(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "i1", nil, cands...)
	ctx := context.Background()
	var first string
	crash := launcher.Hooks{At: func(p launcher.Point, _ string) error {
		if p == launcher.AfterCloudLaunch {
			first = e.sim.Instances()[0].ID
			return errors.New("crashed")
		}
		return nil
	}}
	l, _ := e.launcher(t, crash)
	_ = l.Pass(ctx)
	in := e.intent(t, "i1")
	if in.State != fsm.IntentLaunching || first == "" {
		t.Fatalf("after the crash: intent %s, instance %q", in.State, first)
	}
	// The retry the next leader makes when the tag lookup misses.
	_, a := e.launcher(t, launcher.Hooks{})
	got, err := a.Launch(ctx, cloud.LaunchRequest{LaunchID: "i1", Attempt: 1, Spec: in.Spec.LaunchSpec})
	if err != nil || got.ID != first {
		t.Fatalf("same-token retry = %+v, %v; want instance %s", got, err, first)
	}
	// And the next leader's pass records it.
	l2, _ := e.launcher(t, launcher.Hooks{})
	if err := l2.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if in := e.intent(t, "i1"); in.State != fsm.IntentLaunched || in.InstanceID != first {
		t.Fatalf("intent %s instance %q, want launched %s", in.State, in.InstanceID, first)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Fatalf("sim has %d instances, want 1", n)
	}
}

func TestCapacityErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l, _ := e.launcher(t, launcher.Hooks{})

	// The cheapest offering is out of capacity: the same attempt falls
	// back to the next cheapest.
	e.sim.InjectCapacityError("c5.large", "us-east-1b", "on-demand", "InsufficientInstanceCapacity")
	e.commit(t, "cheap", nil, cands...)
	if err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	in := e.intent(t, "cheap")
	inst, _ := e.f.Instance(in.InstanceID)
	if in.State != fsm.IntentLaunched || in.Attempt != 1 || inst.InstanceType != "m5.large" {
		t.Fatalf("intent %s attempt %d on %q, want launched attempt 1 on m5.large", in.State, in.Attempt, inst.InstanceType)
	}

	// Every candidate out of capacity: as Karpenter, the intent fails
	// (its NodeClaim is given up and its pods planned again, on offerings
	// still available); nothing is launched.
	e.commit(t, "none", nil, cands[1])
	if err := l.Drive(ctx, "none"); err != nil {
		t.Fatal(err)
	}
	in = e.intent(t, "none")
	if in.State != fsm.IntentFailed || in.Attempt != 1 || !strings.Contains(in.LastError, "insufficient capacity") {
		t.Fatalf("intent %s attempt %d (%q), want failed after attempt 1 with a capacity error", in.State, in.Attempt, in.LastError)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Errorf("sim has %d instances, want 1", n)
	}
}

// A frozen spec the cloud rejects fails the intent without a launch.
func TestInvalidSpecFailsTheIntent(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "bad", func(s *fsm.LaunchSpec) { s.Subnets = nil }, cands...)
	l, _ := e.launcher(t, launcher.Hooks{})
	if err := l.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in := e.intent(t, "bad"); in.State != fsm.IntentFailed || !strings.Contains(in.LastError, "subnets") {
		t.Fatalf("intent %s (%q), want failed naming subnets", in.State, in.LastError)
	}
	if e.sim.Calls("CreateFleet") != 0 {
		t.Error("an invalid spec reached CreateFleet")
	}
}

func TestTerminateIdempotent(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "i1", nil, cands...)
	l, a := e.launcher(t, launcher.Hooks{})
	ctx := context.Background()
	if err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	id := e.intent(t, "i1").InstanceID
	for i := range 2 {
		if err := a.Terminate(ctx, id); err != nil {
			t.Fatalf("terminate #%d: %v", i+1, err)
		}
	}
	if err := a.Terminate(ctx, "i-0000000000000dead"); err != nil {
		t.Errorf("terminating an unknown instance: %v", err)
	}
	e.sim.Step(ctx) // shutting-down -> terminated
	if err := a.Terminate(ctx, id); err != nil {
		t.Errorf("terminating a terminated instance: %v", err)
	}
	if got, err := a.List(ctx, map[string]string{karpv1.TagLaunchID: "i1"}); err != nil || len(got) != 0 {
		t.Errorf("List after termination = %+v, %v", got, err)
	}
}

// A token reused with other parameters (a spec that was not frozen) is
// refused by EC2 as a parameter mismatch.
func TestParameterMismatch(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "i1", nil, cands...)
	ctx := context.Background()
	l, p := e.launcher(t, launcher.Hooks{})
	if err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	other := e.intent(t, "i1").Spec.LaunchSpec
	other.Candidates = cands[:1]
	if _, err := p.Launch(ctx, cloud.LaunchRequest{LaunchID: "i1", Attempt: 1, Spec: other}); !errors.Is(err, cloud.ErrIdempotentMismatch) {
		t.Fatalf("same token, other parameters: %v, want ErrIdempotentMismatch", err)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Errorf("sim has %d instances, want 1", n)
	}
}
