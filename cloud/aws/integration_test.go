package aws_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/testenv"
	"github.com/joiner-dev/joiner/userdata"
)

// TestLaunchRegistersNodeAndInterruption launches a NodeClaim through the
// AWS provider against the sim with a real control plane: the instance
// becomes a Node whose labels and taints match the NodeClaim, and a
// triggered spot interruption shows on the instance's IMDS path.
func TestLaunchRegistersNodeAndInterruption(t *testing.T) {
	kenv := testenv.Start(t, testenv.Options{})
	cfg := sim.DefaultConfig()
	cfg.BootDelay = sim.Duration{Duration: 100 * time.Millisecond}
	e := newEnvOn(t, sim.New(sim.Options{Config: cfg, Kube: kenv.Client}))
	s := e.sim
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { _ = s.Run(ctx); close(runDone) }()
	t.Cleanup(func() { cancel(); <-runDone })

	p := e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion, Now: time.Now})
	nc := nodeClass()
	r, err := p.Resolve(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", Labels: map[string]string{
		karpv1.LabelNodePool: "default", karpv1.LabelCapacityType: "spot", "team": "platform",
	}}}
	claim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"m5.large"}},
		{Key: "workload", Operator: karpv1.OpIn, Values: []string{"batch"}},
	}
	claim.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	claim.Spec.StartupTaints = []corev1.Taint{{Key: "joiner.io/not-ready", Effect: corev1.TaintEffectNoExecute}}
	entry, _ := catalog.Lookup("m5.large")
	ud, err := userdata.Render(userdata.FromNodeClaim(nc, claim, userdata.BuildOptions{
		Cluster:         userdata.Cluster{Name: "test", Endpoint: "https://127.0.0.1:6443", ServiceCIDR: "10.96.0.0/12"},
		InstanceMaxPods: int32(entry.MaxPods), VCPU: int32(entry.VCPU),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sgs := []string{}
	for _, g := range r.SecurityGroups {
		sgs = append(sgs, g.ID)
	}
	inst, err := p.Launch(ctx, cloud.LaunchRequest{LaunchID: "intent-1", Attempt: 1, Spec: cloud.LaunchSpec{
		NodeClaim: claim.Name, NodePool: "default", NodeClass: nc.Name, Candidates: []cloud.Candidate{cand("m5.large", "us-east-1a", "spot")},
		Subnets: cloud.SubnetPerZone(r.Subnets), SecurityGroupIDs: sgs, UserData: ud, InstanceProfile: r.InstanceProfile,
	}})
	if err != nil {
		t.Fatal(err)
	}

	node := waitForNode(t, kenv, inst.ProviderID())
	for k, v := range claim.Labels {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	for _, req := range claim.Spec.Requirements {
		if node.Labels[req.Key] != req.Values[0] {
			t.Errorf("node label %s = %q, want %q", req.Key, node.Labels[req.Key], req.Values[0])
		}
	}
	for _, want := range append(claim.Spec.Taints, claim.Spec.StartupTaints...) {
		found := false
		for _, got := range node.Spec.Taints {
			found = found || (got.Key == want.Key && got.Value == want.Value && got.Effect == want.Effect)
		}
		if !found {
			t.Errorf("node taints %v lack %v", node.Spec.Taints, want)
		}
	}
	if node.Labels[corev1.LabelTopologyZone] != "us-east-1a" || node.Status.Allocatable.Pods().Value() != int64(entry.MaxPods) {
		t.Errorf("zone %q, allocatable pods %v", node.Labels[corev1.LabelTopologyZone], node.Status.Allocatable.Pods())
	}

	// Spot interruption through the control API, seen on IMDS with IMDSv2.
	imds := e.endpoint + "/imds/" + inst.ID + "/latest"
	token := imdsToken(t, imds)
	if code, _ := imdsGet(t, imds+"/meta-data/spot/instance-action", token); code != http.StatusNotFound {
		t.Fatalf("instance-action before the interruption: %d, want 404", code)
	}
	resp, err := http.Post(e.endpoint+"/control/instances/"+inst.ID+"/interrupt", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("interrupt: %v %v", resp, err)
	}
	resp.Body.Close()
	code, body := imdsGet(t, imds+"/meta-data/spot/instance-action", token)
	var action struct{ Action, Time string }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &action) != nil || action.Action != "terminate" || action.Time == "" {
		t.Fatalf("instance-action after the interruption: %d %q", code, body)
	}
	if code, body := imdsGet(t, imds+"/meta-data/instance-id", token); code != http.StatusOK || body != inst.ID {
		t.Errorf("instance-id: %d %q", code, body)
	}
	if code, _ := imdsGet(t, imds+"/meta-data/instance-id", ""); code != http.StatusUnauthorized {
		t.Errorf("IMDSv1 GET: %d, want 401", code)
	}

	// Terminating the instance deletes its Node.
	if err := p.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	waitForNoNode(t, kenv, node.Name)
}

func waitForNode(t *testing.T, kenv *testenv.Env, providerID string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	kubetest.WaitFor(t, time.Minute, "a Node with providerID "+providerID, func() bool {
		nodes, err := kenv.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; n.Spec.ProviderID == providerID && len(n.Status.Conditions) > 0 {
				node = n
				return true
			}
		}
		return false
	})
	return node
}

func waitForNoNode(t *testing.T, kenv *testenv.Env, name string) {
	t.Helper()
	kubetest.WaitFor(t, time.Minute, "Node "+name+" to go after its instance terminated", func() bool {
		_, err := kenv.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func imdsToken(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Fatalf("IMDS token: %d %q", resp.StatusCode, b)
	}
	return string(b)
}

func imdsGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("X-aws-ec2-metadata-token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
