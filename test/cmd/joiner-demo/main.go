// Command joiner-demo is `make demo`: it runs Joiner's embedded default on
// this machine (a Kubernetes control plane, a simulated EC2 region, three
// raft coordinators and one agent per simulated node; see internal/harness),
// applies examples/ with a 30-replica Deployment, and shows provisioning, a
// spot interruption with drain and replacement, and consolidation after a
// scale-down. It stops every process it started, also on Ctrl-C and on
// failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/testenv"
)

const (
	namespace  = "default"
	deployment = "inflate"
	selector   = "app=inflate"
)

type config struct {
	joiner       string
	examples     string
	replicas     int
	scaleDown    int
	keep         bool
	tick         time.Duration
	provisionMax time.Duration
	interruptMax time.Duration
	consolidate  time.Duration
	notice       time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.joiner, "joiner", "", "joiner binary (default: build ./cmd/joiner into the run dir)")
	flag.StringVar(&c.examples, "examples", "", "examples directory (default: <repo>/examples)")
	flag.IntVar(&c.replicas, "replicas", 30, "replicas of the example Deployment")
	flag.IntVar(&c.scaleDown, "scale-down", 6, "replicas after the scale-down phase")
	flag.BoolVar(&c.keep, "keep", false, "keep the run directory (logs, data) after a successful run")
	flag.DurationVar(&c.tick, "tick", 3*time.Second, "status line interval")
	flag.DurationVar(&c.provisionMax, "provision-timeout", 60*time.Second, "time allowed for every pod to be bound")
	flag.DurationVar(&c.interruptMax, "interruption-timeout", 50*time.Second, "time allowed for the interruption phase")
	flag.DurationVar(&c.consolidate, "consolidation-timeout", 60*time.Second, "time allowed for consolidation to show")
	flag.DurationVar(&c.notice, "interruption-notice", 30*time.Second, "sim time from a spot interruption notice to termination")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, c, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// demo is one run.
type demo struct {
	c     config
	h     *harness.Harness
	out   io.Writer
	start time.Time
	rows  []row
}

// row is a line of the summary table.
type row struct {
	phase, result string
	took          time.Duration
	st            *harness.State
}

func run(ctx context.Context, c config, out, errOut io.Writer) int {
	d := &demo{c: c, out: out, start: time.Now()}
	root := testenv.RepoRoot()
	if c.examples == "" {
		c.examples = filepath.Join(root, "examples")
		d.c.examples = c.examples
	}
	dir, err := os.MkdirTemp("", "joiner-demo-")
	if err != nil {
		fmt.Fprintf(errOut, "demo: %v\n", err)
		return 1
	}
	d.say("run directory %s (process logs: *.log)", dir)
	if c.joiner == "" {
		d.say("building joiner")
		if d.c.joiner, err = harness.BuildJoiner(ctx, dir); err != nil {
			fmt.Fprintf(errOut, "demo: %v\n", err)
			return 1
		}
	}
	d.say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, joiner sim, 3 coordinators " +
		"(given the cluster name only: the endpoint, service CIDR and Kubernetes version come from the sim's EKS DescribeCluster)")
	// The demo's nodes are spot: consolidating one into a cheaper spot node
	// needs Karpenter's SpotToSpotConsolidation gate, off by default.
	d.h, err = harness.Start(ctx, harness.Options{Dir: dir, JoinerBin: d.c.joiner, Agents: true, Kubelet: true,
		InterruptionNotice: c.notice, CoordinatorArgs: []string{"--feature-gates=SpotToSpotConsolidation=true"}})
	if err != nil {
		fmt.Fprintf(errOut, "demo: %v\n", err)
		if errors.Is(err, testenv.ErrToolsMissing) {
			fmt.Fprintln(errOut, "demo: run `make tools` first (make demo does)")
		}
		fmt.Fprintf(errOut, "demo: logs kept in %s\n", dir)
		return 1
	}
	err = d.phases(ctx)
	pids := d.h.PIDs()
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(errOut, "\ndemo interrupted: %v\n", err)
	case err != nil:
		fmt.Fprintf(errOut, "\ndemo failed: %v\n\nprocess logs (tail):\n%s", err, d.h.Logs(25))
	}
	d.say("stopping every process")
	d.h.Stop()
	alive := 0
	for _, pid := range pids {
		if testenv.ProcessAlive(pid) {
			alive++
		}
	}
	d.say("stopped %d processes, %d left alive", len(pids), alive)
	if err != nil || alive > 0 {
		fmt.Fprintf(errOut, "demo: logs kept in %s\n", dir)
		return 1
	}
	if c.keep {
		d.say("logs kept in %s", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	d.say("done in %s", time.Since(d.start).Round(100*time.Millisecond))
	return 0
}

// phases runs the demo's phases; it returns only real errors (a process
// that died, an API call that failed, provisioning that never happened).
func (d *demo) phases(ctx context.Context) error {
	t0 := time.Now()
	leader, err := d.h.WaitLeader(ctx)
	if err != nil {
		return err
	}
	if err := d.h.WaitReady(ctx); err != nil {
		return err
	}
	d.say("raft cluster formed: leader %s (%s), %d replicas", leader.Name, leader.RaftAddr, len(d.h.Coordinators))
	d.rows = append(d.rows, row{phase: "raft", result: "leader " + leader.Name, took: time.Since(t0)})

	if err := d.provision(ctx); err != nil {
		return err
	}
	if err := d.interrupt(ctx); err != nil {
		return err
	}
	if err := d.consolidation(ctx); err != nil {
		return err
	}
	d.summary()
	return nil
}

// provision applies examples/ and waits until every pod is bound.
func (d *demo) provision(ctx context.Context) error {
	d.phase("provisioning: apply examples/ (NodePool general, EC2NodeClass default, Deployment inflate x%d)", d.c.replicas)
	t0 := time.Now()
	var objs []*unstructured.Unstructured
	for _, f := range []string{"nodepool.yaml", "deployment.yaml"} {
		o, err := testenv.ReadObjects(filepath.Join(d.c.examples, f))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == deployment {
			if err := unstructured.SetNestedField(o.Object, int64(d.c.replicas), "spec", "replicas"); err != nil {
				return err
			}
		}
	}
	if err := d.h.Apply(ctx, objs...); err != nil {
		return err
	}
	d.say("the sim's nodes run no kubelet: the demo marks pods bound to them Running and removes evicted ones")
	st, ok, err := d.watch(ctx, d.c.provisionMax, func(s *harness.State) bool {
		return s.Pods == d.c.replicas && s.Running == d.c.replicas
	})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("provisioning: %d of %d pods running after %s (%d not bound)", st.Running, st.Pods, d.c.provisionMax, st.Pending)
	}
	if dup := st.Duplicates(); len(dup) > 0 {
		return fmt.Errorf("provisioning: duplicate instances: %s", strings.Join(dup, "; "))
	}
	d.say("every pod running: %d nodeclaims, %d nodes (%s), $%.3f/h", len(st.NodeClaims), len(st.Nodes), st.Types(), st.Cost())
	d.rows = append(d.rows, row{phase: "provision", result: fmt.Sprintf("%d/%d pods running", st.Running, st.Pods), took: time.Since(t0), st: st})
	return nil
}

// interrupt sends a spot interruption notice to one node's instance and
// watches the drain and the replacement.
func (d *demo) interrupt(ctx context.Context) error {
	st, err := d.h.State(ctx, namespace, selector)
	if err != nil {
		return err
	}
	var victim *harness.NodeInfo
	for i, n := range st.Nodes {
		if victim == nil || (n.CapacityType == "spot" && victim.CapacityType != "spot") ||
			(n.CapacityType == victim.CapacityType && n.Pods > victim.Pods) {
			victim = &st.Nodes[i]
		}
	}
	if victim == nil {
		d.rows = append(d.rows, row{phase: "interruption", result: "no node to interrupt"})
		return nil
	}
	instanceID := victim.ProviderID[strings.LastIndex(victim.ProviderID, "/")+1:]
	d.phase("spot interruption: notice for %s (node %s, %s %s, %d pods)", instanceID, victim.Name,
		victim.InstanceType, victim.CapacityType, victim.Pods)
	t0 := time.Now()
	at, err := d.h.Interrupt(ctx, instanceID)
	if err != nil {
		return err
	}
	d.say("the sim terminates %s at %s (in %s)", instanceID, at.Format(time.TimeOnly), time.Until(at).Round(time.Second))
	before := map[string]bool{}
	for _, nc := range st.NodeClaims {
		before[nc.Name] = true
	}
	var saw struct{ tainted, drained, replaced, deleting, terminated bool }
	note := func(flag *bool, format string, args ...any) {
		if !*flag {
			*flag = true
			d.say(format, args...)
		}
	}
	end, ok, err := d.watch(ctx, d.c.interruptMax, func(s *harness.State) bool {
		var node *harness.NodeInfo
		for i := range s.Nodes {
			if s.Nodes[i].Name == victim.Name {
				node = &s.Nodes[i]
			}
		}
		if node != nil && node.Disrupted {
			note(&saw.tainted, "node %s tainted and cordoned", victim.Name)
		}
		if node != nil && node.Pods == 0 && saw.tainted {
			note(&saw.drained, "node %s drained: its pods were evicted", victim.Name)
		}
		for _, nc := range s.NodeClaims {
			if !before[nc.Name] {
				note(&saw.replaced, "replacement nodeclaim %s created", nc.Name)
			}
			if nc.Deleting && strings.HasSuffix(nc.ProviderID, "/"+instanceID) {
				reason := nc.DisruptionReason
				if reason == "" {
					reason = "no reason given"
				}
				note(&saw.deleting, "nodeclaim %s of %s being deleted: %s", nc.Name, instanceID, reason)
			}
		}
		for _, in := range s.Instances {
			if in.ID == instanceID && in.State != "pending" && in.State != "running" {
				note(&saw.terminated, "instance %s %s", instanceID, in.State)
			}
		}
		return saw.terminated && node == nil && s.Running == d.c.replicas && s.Pods == d.c.replicas
	})
	if err != nil {
		return err
	}
	var seen []string
	for _, x := range []struct {
		ok   bool
		what string
	}{{saw.tainted, "tainted"}, {saw.drained, "drained"}, {saw.replaced, "replaced"},
		{saw.deleting, "nodeclaim deleted"}, {saw.terminated, "terminated"}} {
		if x.ok {
			seen = append(seen, x.what)
		}
	}
	result := strings.Join(seen, ", ")
	if result == "" {
		result = "nothing observed"
	}
	if !ok {
		var open []string
		if !saw.terminated {
			open = append(open, "instance still running")
		}
		for _, n := range end.Nodes {
			if n.Name == victim.Name {
				open = append(open, "node "+n.Name+" still registered")
			}
		}
		if end.Running != d.c.replicas || end.Pods != d.c.replicas {
			open = append(open, fmt.Sprintf("%d/%d pods running", end.Running, d.c.replicas))
		}
		result += fmt.Sprintf("; not settled within %s: %s", d.c.interruptMax, strings.Join(open, ", "))
		d.say("interruption: not settled within %s: %s", d.c.interruptMax, strings.Join(open, ", "))
	} else {
		d.say("interruption handled: every pod running again, %d nodes, $%.3f/h", len(end.Nodes), end.Cost())
	}
	if dup := end.Duplicates(); len(dup) > 0 {
		return fmt.Errorf("interruption: duplicate instances: %s", strings.Join(dup, "; "))
	}
	d.rows = append(d.rows, row{phase: "interruption", result: result, took: time.Since(t0), st: end})
	return nil
}

// consolidation scales the Deployment down and watches for fewer nodes.
func (d *demo) consolidation(ctx context.Context) error {
	d.phase("consolidation: scale inflate from %d to %d replicas", d.c.replicas, d.c.scaleDown)
	st, err := d.h.State(ctx, namespace, selector)
	if err != nil {
		return err
	}
	startNodes, startCost := len(st.Nodes), st.Cost()
	t0 := time.Now()
	if err := d.h.ScaleDeployment(ctx, namespace, deployment, int32(d.c.scaleDown)); err != nil {
		return err
	}
	before := map[string]bool{}
	wasDeleting := map[string]bool{}
	for _, nc := range st.NodeClaims {
		before[nc.Name] = true
		wasDeleting[nc.Name] = nc.Deleting
	}
	removed, created := map[string]bool{}, map[string]bool{}
	end, ok, err := d.watch(ctx, d.c.consolidate, func(s *harness.State) bool {
		deleting := 0
		for _, nc := range s.NodeClaims {
			if nc.Deleting {
				deleting++
			}
			if nc.Deleting && !wasDeleting[nc.Name] && !removed[nc.Name] {
				removed[nc.Name] = true
				reason := nc.DisruptionReason
				if reason == "" {
					reason = "no reason given"
				}
				d.say("nodeclaim %s (node %s) being removed: %s", nc.Name, nc.NodeName, reason)
			}
			if !before[nc.Name] && !created[nc.Name] {
				created[nc.Name] = true
				d.say("replacement nodeclaim %s created", nc.Name)
			}
		}
		// Settled: something was consolidated, nothing is being deleted,
		// every remaining pod is bound.
		return len(removed) > 0 && deleting == 0 && s.Running == d.c.scaleDown && s.Pods == d.c.scaleDown
	})
	if err != nil {
		return err
	}
	var result string
	switch {
	case ok:
		result = fmt.Sprintf("%d nodeclaim(s) removed, %d created; nodes %d -> %d, $%.3f/h -> $%.3f/h",
			len(removed), len(created), startNodes, len(end.Nodes), startCost, end.Cost())
		d.say("consolidated: %s", result)
	case len(removed) > 0:
		result = fmt.Sprintf("%d nodeclaim(s) being removed, %d created; not settled within %s", len(removed), len(created), d.c.consolidate)
		d.say("consolidation: %s", result)
	default:
		result = fmt.Sprintf("not observed within %s (nodes stay %d, $%.3f/h)", d.c.consolidate, len(end.Nodes), end.Cost())
		d.say("consolidation: %s", result)
	}
	if dup := end.Duplicates(); len(dup) > 0 {
		return fmt.Errorf("consolidation: duplicate instances: %s", strings.Join(dup, "; "))
	}
	d.rows = append(d.rows, row{phase: "consolidation", result: result, took: time.Since(t0), st: end})
	return nil
}

// watch prints a status line every tick until done holds (true), the
// timeout passes (false) or a real error happens.
func (d *demo) watch(ctx context.Context, timeout time.Duration, done func(*harness.State) bool) (*harness.State, bool, error) {
	deadline := time.Now().Add(timeout)
	var last time.Time
	for {
		if err := d.h.CheckAlive(); err != nil {
			return nil, false, err
		}
		st, err := d.h.State(ctx, namespace, selector)
		if err != nil {
			return nil, false, err
		}
		finished := done(st)
		if finished || time.Since(last) >= d.c.tick {
			d.say("%s", st.Line())
			last = time.Now()
		}
		if finished {
			return st, true, nil
		}
		if time.Now().After(deadline) {
			return st, false, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, fmt.Errorf("interrupted: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (d *demo) summary() {
	d.phase("summary")
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tTOOK\tRUNNING\tNODECLAIMS\tNODES\t$/H\tINSTANCE TYPES\tRESULT")
	for _, r := range d.rows {
		if r.st == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t%s\n", r.phase, r.took.Round(100*time.Millisecond), r.result)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\t%.3f\t%s\t%s\n", r.phase, r.took.Round(100*time.Millisecond),
			r.st.Running, r.st.Pods, len(r.st.NodeClaims), len(r.st.Nodes), r.st.Cost(), r.st.Types(), r.result)
	}
	_ = tw.Flush()
}

func (d *demo) phase(format string, args ...any) {
	fmt.Fprintf(d.out, "\n== "+format+"\n", args...)
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] "+format+"\n", append([]any{time.Since(d.start).Seconds()}, args...)...)
}
