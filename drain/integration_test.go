package drain_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/testenv"
)

func ptr[T any](v T) *T { return &v }

// A node with a 6-replica Deployment under a PDB (maxUnavailable 1), a
// DaemonSet pod and a do-not-disrupt pod drains before a 60 s deadline on a
// real control plane: the PDB is never violated, the DaemonSet pod stays and
// the do-not-disrupt pod is left alone.
func TestDrainRealControlPlane(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true, Scheduler: true, Controllers: []string{"*", "-node-lifecycle-controller"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := env.Client
	const ns, target, spare = "drain", "node-target", "node-spare"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.RegisterNode(ctx, t, c, target, "", nil)
	kl := &kubetest.Kubelet{Client: c, Namespace: ns, Nodes: map[string]bool{target: true, spare: true}, TerminateAfter: 300 * time.Millisecond, Logf: t.Logf}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); kl.Run(ctx) }()

	kubetest.CreateWeb(ctx, t, c, ns, 6)
	container := kubetest.PauseContainers()
	dsLabels := map[string]string{"app": "agent"}
	if _, err := c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLabels},
				Spec: corev1.PodSpec{Containers: container, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Annotations: map[string]string{corekarp.AnnotationDoNotDisrupt: "true"}},
		Spec:       corev1.PodSpec{Containers: container, NodeName: target},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Everything running and ready on the target node, PDB computed.
	kubetest.WaitFor(t, 3*time.Minute, "6 web pods, the DaemonSet pod and the batch pod ready on the target", func() bool {
		return kubetest.ReadyOn(ctx, c, ns, target) == 8
	})
	kubetest.WaitFor(t, 3*time.Minute, "PDB allows one disruption", func() bool {
		p, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 6 && p.Status.DisruptionsAllowed == 1
	})
	kubetest.RegisterNode(ctx, t, c, spare, "", nil)

	// Watch the Deployment's ready replicas for the whole drain.
	minReady := kubetest.MinReadyReplicas(ctx, t, c, ns, "web", 6)

	d := drain.New(c, zaptest.NewLogger(t), drain.Options{RetryBase: 200 * time.Millisecond, RetryMax: time.Second})
	start := time.Now()
	// The test checks PDB safety, not speed: a generous deadline.
	deadline := start.Add(5 * time.Minute)
	res, err := d.Drain(ctx, drain.Request{Node: target, Reason: "spot-interruption", Message: "test", Deadline: deadline, Evict: true})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Drain: %v (result %+v)", err, res)
	}
	t.Logf("drained in %s: evicted %d, skipped %v, left %v", took, len(res.Evicted), res.Skipped, res.Left)
	if len(res.Evicted) != 6 {
		t.Errorf("evicted %v, want the 6 web pods", res.Evicted)
	}
	for _, e := range res.Evicted {
		if !strings.HasPrefix(e, ns+"/web-") {
			t.Errorf("evicted %s, want only web pods", e)
		}
	}
	if len(res.Left) != 1 || res.Left[0] != ns+"/batch" {
		t.Errorf("left %v, want [%s/batch]", res.Left, ns)
	}
	// What remains on the target: the DaemonSet pod and the batch pod, untouched.
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", target).String()})
	if err != nil {
		t.Fatal(err)
	}
	var remain []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s is being deleted; want it left alone", p.Name)
		}
		remain = append(remain, p.Name)
	}
	sort.Strings(remain)
	if len(remain) != 2 || remain[0] != "agent-"+remain[0][len("agent-"):] || remain[1] != "batch" {
		t.Errorf("pods left on the target: %v, want the DaemonSet pod and batch", remain)
	}
	// The deployment recovers on the spare node; the PDB was never violated.
	kubetest.WaitFor(t, 3*time.Minute, "6 ready web replicas again", func() bool {
		dep, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && dep.Status.ReadyReplicas == 6
	})
	least := minReady()
	if least < 5 {
		t.Errorf("ready replicas fell to %d during the drain: PDB (maxUnavailable 1) violated", least)
	}
	t.Logf("minimum ready replicas during the drain: %d", least)
	n, err := c.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || len(n.Spec.Taints) < 2 {
		t.Errorf("target node spec %+v: want cordoned and tainted", n.Spec)
	}
	found := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == drain.ConditionType && cond.Reason == "Drained" {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s=Drained condition on the node: %+v", drain.ConditionType, n.Status.Conditions)
	}
}
