package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cmd/joiner/top"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/poll"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestTopHelperProcess is the joiner binary for TestTopInTmux: the test
// binary runs itself with JOINER_TOP_HELPER=1 and joiner's arguments after
// "--" (no separate build).
func TestTopHelperProcess(*testing.T) {
	if os.Getenv("JOINER_TOP_HELPER") != "1" {
		return
	}
	os.Exit(run(flag.Args()))
}

// topCluster is what TestTopInTmux creates, and what it expects to see.
type topCluster struct {
	nodes, launching, pods, pending, disrupting, unpriced int
	perHour                                               float64 // from the catalogue, summed here
}

// TestTopInTmux drives `joiner top` in a tmux pane against a real API
// server holding 200 Nodes, 155 pods, NodeClaims and NodePools (objects
// only: nothing runs them). It waits for the screen to show the totals,
// scrolls to the end, presses q and checks the program exits 0. Set
// JOINER_TOP_CAPTURE=file to keep the first full screen (the README's).
func TestTopInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if testing.Short() {
			t.Skip("tmux is not installed (make deps)")
		}
		t.Fatal("tmux is not installed: run make deps (scripts/install-deps.sh)")
	}
	env := testenv.Start(t, testenv.Options{CRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	want := createTopCluster(ctx, t, env.Config)

	// -o json: one snapshot, the same totals.
	out, err := topHelper("top", "--kubeconfig", env.Kubeconfig, "-o", "json").Output()
	if err != nil {
		t.Fatalf("joiner top -o json: %v\n%s", err, topExitStderr(err))
	}
	var snap top.Snapshot
	if err := json.Unmarshal(out, &snap); err != nil {
		t.Fatalf("joiner top -o json: %v\n%s", err, out)
	}
	got := snap.Totals
	if got.Nodes != want.nodes || got.Launching != want.launching || got.Pods != want.pods || got.Pending != want.pending ||
		got.Disrupting != want.disrupting || got.Cost.Unpriced != want.unpriced || math.Abs(got.Cost.PerHour-want.perHour) > 0.0002 ||
		got.Cost.PerMonth != math.Round(got.Cost.PerHour*top.HoursPerMonth*100)/100 {
		t.Fatalf("totals %+v, want %+v", got, want)
	}

	// The live view in a 200x60 pane. Its own tmux server (socket in the
	// test's directory), killed at the end.
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("JOINER_TOP_HELPER=1 %q -test.run='^TestTopHelperProcess$' -- top --kubeconfig %q --refresh 500ms; echo joiner-top-exit=$?; sleep 600",
		self, env.Kubeconfig)
	if out, err := tm("new-session", "-d", "-x", "200", "-y", "60", "-s", "top", script); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	var screen string
	capture := func() string {
		out, err := tm("capture-pane", "-p", "-t", "top")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, out)
		}
		screen = out
		return out
	}
	header := fmt.Sprintf("Nodes %d (+%d launching)   Pods %d   Pending %d   Disrupting %d   Cost $%.4f/h",
		want.nodes, want.launching, want.pods, want.pending, want.disrupting, got.Cost.PerHour)
	waitScreen := func(what string, cond func(string) bool) {
		t.Helper()
		defer func() {
			if t.Failed() {
				t.Logf("last screen:\n%s", screen)
			}
		}()
		poll.Until(t, 2*time.Minute, 100*time.Millisecond, what, func() bool { return cond(capture()) })
	}
	waitScreen("the totals on screen", func(s string) bool {
		return strings.Contains(s, header) && strings.Contains(s, "PENDING PODS (5)") && strings.Contains(s, "DISRUPTION IN PROGRESS (2)")
	})
	if p := os.Getenv("JOINER_TOP_CAPTURE"); p != "" {
		if err := os.WriteFile(p, []byte(screen), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"NODEPOOL general · 120 nodes", "(none)", "Unschedulable", "Underutilized", "/month",
		"Nominated      joiner  Pod should schedule on: nodeclaim/spot-10"} {
		if !strings.Contains(screen, s) {
			t.Errorf("screen lacks %q:\n%s", s, screen)
		}
	}
	if _, err := tm("send-keys", "-t", "top", "End"); err != nil {
		t.Fatal(err)
	}
	// The last pool, its unpriced node and the price notes.
	waitScreen("the end of the body after End", func(s string) bool {
		return strings.Contains(s, "PRICES") && strings.Contains(s, "x9.mystery") && strings.Contains(s, "NODEPOOL (none) · 10 nodes")
	})
	if _, err := tm("send-keys", "-t", "top", "q"); err != nil {
		t.Fatal(err)
	}
	waitScreen("joiner top to exit after q", func(s string) bool { return strings.Contains(s, "joiner-top-exit=") })
	if !strings.Contains(screen, "joiner-top-exit=0") {
		t.Errorf("joiner top did not exit 0:\n%s", screen)
	}
}

func topHelper(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestTopHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "JOINER_TOP_HELPER=1")
	return cmd
}

func topExitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// createTopCluster creates 200 Nodes: 120 of NodePool general (m5.large
// and m5.xlarge, on-demand), 70 of spot (c6i.xlarge, spot), 10 of none
// (m5.2xlarge, one x9.mystery that has no price); NodeClaims for 10 spot
// nodes (one disrupted: DisruptionReason) and 2 launching; node 5 tainted
// karpenter.sh/disrupted; 150 pods bound one per node and 5 unschedulable.
func createTopCluster(ctx context.Context, t *testing.T, cfg *rest.Config) topCluster {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	kc := kubernetes.NewForConfigOrDie(cfg)
	clients, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, np := range []*karpv1.NodePool{fixture.NodePool("general", "on-demand"), fixture.NodePool("spot", "spot"), fixture.NodePool("idle", "on-demand")} {
		np.TypeMeta = metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"}
		if _, err := dyn.Resource(kube.NodePoolsGVR).Create(ctx, kubetest.Unstructured(t, np), metav1.CreateOptions{}); err != nil {
			t.Fatalf("nodepool %s: %v", np.Name, err)
		}
	}
	want := topCluster{nodes: 200, launching: 2, pods: 150, pending: 5, disrupting: 2, unpriced: 1}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	type spec struct {
		name, pool, typ, capacity, zone, cpu, mem string
		disrupted                                 bool
	}
	specs := make([]spec, 200)
	for i := range specs {
		s := spec{name: fmt.Sprintf("ip-10-0-%d-%d", i/100, i%100), zone: zones[i%3], disrupted: i == 5}
		switch {
		case i < 120 && i%2 == 0:
			s.pool, s.typ, s.capacity, s.cpu, s.mem = "general", "m5.large", "on-demand", "1930m", "7Gi"
		case i < 120:
			s.pool, s.typ, s.capacity, s.cpu, s.mem = "general", "m5.xlarge", "on-demand", "3920m", "14Gi"
		case i < 190:
			s.pool, s.typ, s.capacity, s.cpu, s.mem = "spot", "c6i.xlarge", "spot", "3920m", "7Gi"
		case i < 199:
			s.typ, s.cpu, s.mem = "m5.2xlarge", "7910m", "29Gi"
		default:
			s.typ, s.cpu, s.mem = "x9.mystery", "4", "16Gi"
		}
		specs[i] = s
		if p := (top.CataloguePricer{}).Price(s.typ, s.capacity, "us-east-1", s.zone); p.Known {
			want.perHour += p.PerHour
		}
	}
	topParallel(t, len(specs), func(i int) error {
		s := specs[i]
		labels := map[string]string{karpv1.LabelInstanceType: s.typ, karpv1.LabelZone: s.zone, karpv1.LabelRegion: "us-east-1", karpv1.LabelHostname: s.name}
		if s.pool != "" {
			labels[karpv1.LabelNodePool] = s.pool
			labels[karpv1.LabelCapacityType] = s.capacity
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "aws:///" + s.zone + "/i-" + s.name}}
		if s.disrupted {
			n.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}}
		}
		n, err := kc.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.cpu), corev1.ResourceMemory: resource.MustParse(s.mem), corev1.ResourcePods: resource.MustParse("58")}
		n.Status = corev1.NodeStatus{Capacity: l, Allocatable: l, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		_, err = kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	// NodeClaims: ten of the spot nodes, the first being disrupted; two
	// launching (no node, no instance yet).
	topParallel(t, 12, func(i int) error {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spot-%02d", i), Labels: map[string]string{
			karpv1.LabelNodePool: "spot", karpv1.LabelInstanceType: "c6i.xlarge", karpv1.LabelCapacityType: "spot", karpv1.LabelZone: zones[i%3]}}}
		nc.Spec.NodeClassRef = fixture.NodeClassRef()
		nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{"spot"}}}
		created, err := clients.CreateNodeClaim(ctx, nc)
		if err != nil || i >= 10 {
			return err
		}
		s := specs[120+i]
		created.Status.NodeName, created.Status.ProviderID = s.name, "aws:///"+s.zone+"/i-"+s.name
		if i == 0 {
			created.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionDisruptionReason, Status: metav1.ConditionTrue, Reason: "Underutilized",
				Message: "consolidation: delete", LastTransitionTime: metav1.Now()}}
		}
		_, err = clients.UpdateNodeClaimStatus(ctx, created)
		return err
	})
	topParallel(t, want.pods+want.pending, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", i), Namespace: "default"},
			Spec: corev1.PodSpec{Containers: kubetest.PauseContainers()}}
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		if i < want.pods {
			p.Spec.NodeName = specs[i].name
			_, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			return err
		}
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
		p, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/200 nodes are available: 200 Insufficient cpu.", LastTransitionTime: metav1.Now()}}
		if p, err = kc.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil || i != want.pods+want.pending-1 {
			return err
		}
		// The last one has a newer word than its condition: an event.
		now := metav1.Now()
		_, err = kc.CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: p.Name + ".nominated", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: p.Name, UID: p.UID},
			Reason:         "Nominated", Message: "Pod should schedule on: nodeclaim/spot-10", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "joiner"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}, metav1.CreateOptions{})
		return err
	})
	return want
}

// topParallel runs fn(0..n-1) on 8 workers and fails t with the first error.
func topParallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("object %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func TestTopFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml"}, `--output "yaml"`},
		{[]string{"--refresh", "0s"}, "--refresh 0s"},
		{[]string{"extra"}, "unknown command"},
	} {
		cmd := newTopCmd(&globals{})
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
