// Package provisioning starts the provisioning half of the leader's work
// on a simstack Runner, for tests outside the packages it starts. Test
// code only.
package provisioning

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/lifecycle"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/userdata"
)

// Stack is the provisioning half of the leader's work, running on
// a Runner against a real control plane and the simulated region: the
// nodeclass loop, launcher, provisioner and lifecycle (which removes the
// startup taints the sim's Nodes carry), over a single-replica raft.
type Stack struct {
	Cloud    *joineraws.Provider
	Clients  *kube.Clients
	Cache    *kube.Cache
	State    *fsm.FSM
	Raft     *fsmtest.Direct
	Registry *prometheus.Registry
	// Provisioner and Views serve loops a test adds (launches, the view).
	Provisioner *provisioner.Provisioner
	Views       *view.Builder
}

// Start starts a Stack for cluster on r: the sim boots an
// instance after bootDelay and registers its Node through kc; cfg reaches
// the API server.
func Start(t testing.TB, r *simstack.Runner, kc kubernetes.Interface, cfg *rest.Config, cluster string, bootDelay time.Duration,
	log *zap.Logger) *Stack {
	t.Helper()
	return StartOn(t, r, simstack.StartCloud(t, r, kc, simstack.SimConfig(bootDelay), cluster, log), cfg, cluster, log)
}

// StartOn is Start on a simulated region the test started.
func StartOn(t testing.TB, r *simstack.Runner, c simstack.SimCloud, cfg *rest.Config, cluster string, log *zap.Logger) *Stack {
	t.Helper()
	s := &Stack{Cloud: c.Provider, State: fsm.New(), Registry: prometheus.NewRegistry()}
	s.Clients, s.Cache = simstack.Kube(t, r, cfg, log)
	raft := fsmtest.New(s.State)
	s.Raft = raft
	rec := events.NewRecorder(r.Ctx, s.Clients.Kube, "")
	catalog, views := simstack.Classes(t, r, s.Clients, s.Cache, s.Cloud, s.State, log)
	s.Views = views
	launch := launcher.New(launcher.Config{Cluster: cluster, Interval: 200 * time.Millisecond},
		launcher.Deps{Cloud: s.Cloud, Raft: raft, State: s.State, Log: log})
	p, err := provisioner.New(provisioner.Config{
		Cluster:   userdata.Cluster{Name: cluster, Endpoint: cfg.Host, ServiceCIDR: "10.100.0.0/16"},
		BatchIdle: 300 * time.Millisecond, BatchMax: 2 * time.Second, Resync: time.Second, Wake: launch.Wake,
	}, provisioner.Deps{Cache: s.Cache, Kube: s.Clients, State: s.State, Raft: raft, Cloud: s.Cloud, Views: views, Classes: catalog,
		Registerer: s.Registry, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Provisioner = p
	lc, err := lifecycle.New(lifecycle.Config{RemoveStartupTaints: true, Resync: time.Second}, lifecycle.Deps{Cache: s.Cache,
		Claims: s.Clients, Nodes: s.Clients.Kube, State: s.State, Raft: raft, Cloud: s.Cloud, Classes: catalog,
		Registerer: s.Registry, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Go(launch.Run)
	r.Go(p.Run)
	r.Go(lc.Run)
	return s
}

// Pods counts the pods of namespace default matching selector: all, bound
// to a node, and not deleting.
func Pods(ctx context.Context, c kubernetes.Interface, selector string) (all, bound, live int, err error) {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, 0, 0, err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
		if p.DeletionTimestamp == nil {
			live++
		}
	}
	return len(pods.Items), bound, live, nil
}
