package perf

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/test/harness"
)

// quiet is how long NodeClaims must stay unchanged for a disruption phase
// to count as done: more than consolidateAfter (30 s) plus the 15 s
// re-validation of a consolidation decision.
const quiet = 90 * time.Second

// scaleOut creates deps and waits until want pods run.
func (r *Run) scaleOut(ctx context.Context, name string, want int, timeout time.Duration, gate, target string, deps ...*appsv1.Deployment) (Result, error) {
	p := r.startPhase(ctx, name)
	if err := r.create(ctx, deps...); err != nil {
		return Result{}, err
	}
	done, newest, err := r.waitRunning(ctx, want, timeout)
	res := Result{Pods: want, Gate: gate, Target: target}
	if err != nil {
		res.Note = err.Error()
		return p.finish(ctx, res), nil
	}
	res.Total, res.AfterLastPod = done.Sub(p.started), done.Sub(newest)
	return p.finish(ctx, res), nil
}

// consolidate scales deployments and waits until the fleet settles; the
// time is to the last NodeClaim change.
func (r *Run) consolidate(ctx context.Context, name string, replicas map[string]int32, want int, timeout time.Duration,
	gate, target string, done func(*harness.State) bool) (Result, error) {
	p := r.startPhase(ctx, name)
	if err := r.scale(ctx, replicas); err != nil {
		return Result{}, err
	}
	res := Result{Pods: want, Gate: gate, Target: target}
	if _, _, err := r.waitRunning(ctx, want, 5*time.Minute); err != nil {
		res.Note = err.Error()
		return p.finish(ctx, res), nil
	}
	before, err := r.podUIDs(ctx)
	if err != nil {
		return Result{}, err
	}
	last, err := r.settle(ctx, want, quiet, timeout, done)
	if err != nil {
		res.Note = err.Error()
	} else {
		res.Total = last.Sub(p.started)
	}
	res.Disrupted = r.gone(ctx, before)
	return p.finish(ctx, res), nil
}

// basic is Karpenter's basic_test.go: two deployments of 500 pods (900m /
// 3100Mi and 3500m / 28Gi), then a scale-in to 350 + 350.
func basic(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 1000, 15*time.Minute, "< 2m, cpu > 53%, mem > 65%", "<= 20s after the last pod, >= 80%",
		deployment("small-resource-app", 500, "900m", "3100Mi"), deployment("large-resource-app", 500, "3500m", "28Gi"))
	if err != nil {
		return nil, err
	}
	cons, err := r.consolidate(ctx, "consolidation", map[string]int32{"small-resource-app": 350, "large-resource-app": 350}, 700,
		20*time.Minute, "< 20m", "<= 3m", nil)
	return []Result{out, cons}, err
}

// singleDeployment is the workload that stalled provisioning at 1000 pods:
// one deployment of 1000 replicas of 900m / 3100Mi.
func singleDeployment(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 1000, 15*time.Minute, "-", "every pod runs",
		deployment("inflate", 1000, "900m", "3100Mi"))
	return []Result{out}, err
}

// hostnameSpreading is Karpenter's host_name_spreading_test.go scale-out.
func hostnameSpreading(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 1000, 15*time.Minute, "< 5m, cpu > 38%, mem > 40%", "<= 45s after the last pod",
		deployment("small-resource-app", 500, "900m", "3100Mi", hostnameSpread), deployment("large-resource-app", 500, "3500m", "28Gi"))
	return []Result{out}, err
}

// selfAntiAffinity is Karpenter's interference_test.go first phase: 500
// pods with hostname self-anti-affinity.
func selfAntiAffinity(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 500, 15*time.Minute, "< 5m, cpu > 38%, mem > 40%", "<= 45s after the last pod",
		deployment("small-resource-app", 500, "900m", "3100Mi", antiAffinityHostname))
	return []Result{out}, err
}

// wideDeployments is Karpenter's wide_deployments_test.go: 30 deployments
// with fixed requests and counts (1000 pods), all zone-spread, three with
// hostname self-anti-affinity, three with hostname spread.
func wideDeployments(ctx context.Context, r *Run) ([]Result, error) {
	cpus := []string{"240m", "450m", "650m", "900m", "1400m", "1900m", "2400m", "2800m", "3300m", "3700m",
		"2300m", "900m", "1300m", "2800m", "1800m", "1850m", "3300m", "3800m", "225m", "450m",
		"700m", "900m", "1300m", "1800m", "2400m", "2800m", "3400m", "3800m", "3300m", "2800m"}
	mems := []string{"300Mi", "400Mi", "700Mi", "1Gi", "2Gi", "4Gi", "8Gi", "4Gi", "16Gi", "10Gi",
		"64Gi", "30Gi", "32Gi", "32Gi", "30Gi", "20Gi", "30Gi", "300Mi", "500Mi", "750Mi",
		"1Gi", "2Gi", "4Gi", "8Gi", "16Gi", "32Gi", "28Gi", "64Gi", "13Gi", "24Gi"}
	var deps []*appsv1.Deployment
	for i := range 30 {
		name := "wide-deployment-" + strconv.Itoa(i+1)
		replicas := int32(35)
		if i >= 20 {
			replicas = 30
		}
		mods := []func(*corev1.PodTemplateSpec){zoneSpreadOn(name)}
		if i >= 3 && i < 6 {
			mods = append(mods, hostnameSpreadOn(name), labelled("has-hostname-spread", "true"))
		}
		if i < 3 {
			mods = append(mods, labelled("has-anti-affinity", "true"), antiAffinityHostname)
		}
		mods = append(mods, labelled("deployment-index", strconv.Itoa(i+1)))
		deps = append(deps, deployment(name, replicas, cpus[i], mems[i], mods...))
	}
	out, err := r.scaleOut(ctx, "scale-out", 1000, 20*time.Minute, "< 5m, cpu > 20%, mem > 20%", "<= 30s after the last pod", deps...)
	return []Result{out}, err
}

// drift is Karpenter's drift_performance_test.go: 300 hostname-spread pods
// and 300 large pods, then a NodePool template change drifts every node.
func drift(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 600, 20*time.Minute, "< 5m", "-",
		deployment("hostname-spread-app", 300, "900m", "3100Mi", hostnameSpread), deployment("standard-app", 300, "3500m", "28Gi"))
	if err != nil || out.Note != "" {
		return []Result{out}, err
	}
	if _, err := r.settle(ctx, 600, quiet, 10*time.Minute, nil); err != nil {
		return []Result{out}, fmt.Errorf("settling before drift: %w", err)
	}
	st, err := r.H.State(ctx, Namespace, "perf="+Discovery)
	if err != nil {
		return []Result{out}, err
	}
	old := map[string]bool{}
	for _, nc := range st.NodeClaims {
		old[nc.Name] = true
	}
	p := r.startPhase(ctx, "drift")
	before, err := r.podUIDs(ctx)
	if err != nil {
		return []Result{out}, err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"test-drift-trigger":"drift-%d"}}}}}`, time.Now().Unix())
	if _, err := r.H.Env.Dynamic().Resource(harness.NodePoolResource).Patch(ctx, "perf", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return []Result{out}, fmt.Errorf("drifting the nodepool: %w", err)
	}
	res := Result{Pods: 600, Gate: "< 50m (budget 100%)", Target: "-"}
	last, err := r.settle(ctx, 600, quiet, 60*time.Minute, func(s *harness.State) bool {
		for _, nc := range s.NodeClaims {
			if old[nc.Name] {
				return false
			}
		}
		return true
	})
	if err != nil {
		res.Note = err.Error()
	} else {
		res.Total = last.Sub(p.started)
	}
	res.Disrupted = r.gone(ctx, before)
	return []Result{out, p.finish(ctx, res)}, nil
}

// doNotDisruptScenario is Karpenter's do_no_disrupt_test.go: 1100 pods, 100
// of them do-not-disrupt; a scale-in to 600 must leave their nodes alone.
func doNotDisruptScenario(ctx context.Context, r *Run) ([]Result, error) {
	out, err := r.scaleOut(ctx, "scale-out", 1100, 15*time.Minute, "< 4m, cpu > 38%, mem > 40%", "-",
		deployment("small-resource-app", 500, "900m", "3100Mi", hostnameSpread), deployment("large-resource-app", 500, "3500m", "28Gi"),
		deployment("do-not-disrupt-app", 100, "900m", "450Mi", doNotDisrupt))
	if err != nil || out.Note != "" {
		return []Result{out}, err
	}
	protected := map[string]bool{}
	pods, err := r.pods(ctx)
	if err != nil {
		return []Result{out}, err
	}
	for _, p := range pods {
		if p.Labels["app"] == "do-not-disrupt-app" && p.Spec.NodeName != "" {
			protected[p.Spec.NodeName] = true
		}
	}
	cons, err := r.consolidate(ctx, "consolidation", map[string]int32{"small-resource-app": 250, "large-resource-app": 250}, 600,
		25*time.Minute, "< 35m; protected nodes stay", "protected nodes stay", nil)
	if err != nil {
		return []Result{out, cons}, err
	}
	st, err := r.H.State(ctx, Namespace, "perf="+Discovery)
	if err == nil {
		kept := 0
		for _, n := range st.Nodes {
			if protected[n.Name] {
				kept++
			}
		}
		if kept != len(protected) {
			cons.Note += fmt.Sprintf(" %d of %d nodes with do-not-disrupt pods removed", len(protected)-kept, len(protected))
		} else {
			cons.Note += fmt.Sprintf(" all %d nodes with do-not-disrupt pods kept", kept)
		}
	}
	return []Result{out, cons}, nil
}
