package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/simstack"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestClusterOverrides: each cluster flag that is set becomes an override
// (the CA: --cluster-ca-bundle, else --cluster-ca-file, else the
// kubeconfig's), empty ones leave the fact to discovery, and a bad value
// is refused naming its flag.
func TestClusterOverrides(t *testing.T) {
	pem := []byte(sim.DefaultClusterCA)
	other := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, other, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeCA := rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: pem}}
	for _, tc := range []struct {
		name     string
		endpoint string
		leader   leaderFlags
		rc       rest.Config
		want     cloud.Cluster
		wantErr  string
	}{
		{name: "nothing set", want: cloud.Cluster{}},
		{name: "the kubeconfig's CA", rc: kubeCA, want: cloud.Cluster{CABundle: pem}},
		{name: "every flag", endpoint: "https://k8s.example", rc: kubeCA,
			leader: leaderFlags{serviceCIDR: "10.100.0.0/16", k8sVersion: "1.33", caBundle: base64.StdEncoding.EncodeToString(other), caFile: "/nonexistent"},
			want:   cloud.Cluster{Endpoint: "https://k8s.example", ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4", KubernetesVersion: "1.33", CABundle: other}},
		{name: "CA file over the kubeconfig's", rc: kubeCA, leader: leaderFlags{caFile: file}, want: cloud.Cluster{CABundle: other}},
		{name: "IPv6 service CIDR", leader: leaderFlags{serviceCIDR: "fd00::/108"}, want: cloud.Cluster{ServiceIPv6CIDR: "fd00::/108", IPFamily: "ipv6"}},
		{name: "bad service CIDR", leader: leaderFlags{serviceCIDR: "10.100.0.0"}, wantErr: `--service-cidr "10.100.0.0"`},
		{name: "bad version", leader: leaderFlags{k8sVersion: "v1.34"}, wantErr: `--kubernetes-version: kubernetes version "v1.34"`},
		{name: "bad endpoint", endpoint: "k8s.example:443", wantErr: "--cluster-endpoint"},
		{name: "bad CA bundle", leader: leaderFlags{caBundle: "bm90IGEgY2VydGlmaWNhdGU="}, wantErr: "--cluster-ca-bundle: certificate authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &coordinatorFlags{clusterName: "c", clusterEndpoint: tc.endpoint, leader: tc.leader}
			got, err := f.clusterOverrides(&tc.rc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("overrides\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestCoordinatorDiscoversCluster runs `joiner coordinator` in process
// with the cluster name only (no endpoint, service CIDR, CA or version
// flags) against a real control plane and the sim through the real SDK: the
// instance launched for a pending pod boots the Kubernetes 1.34 AL2023
// image and its user data (read back from the sim's IMDS) joins the
// cluster's endpoint with the kube-dns Service's cluster IP as cluster DNS
// (not the 10th address of the service CIDR, 172.20.0.10); `joiner status`
// shows the discovered facts.
func TestCoordinatorDiscoversCluster(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	const kubeDNS = "10.96.0.53" // in the control plane's service range
	dnsClients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dnsClients.Kube.CoreV1().Services("kube-system").Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec:       corev1.ServiceSpec{ClusterIP: kubeDNS, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "") // the sim's dummy credentials
	cfg := sim.DefaultConfig()
	// the class names an operator-made instance profile, which EC2 must know
	cfg.IAM.InstanceProfiles = append(cfg.IAM.InstanceProfiles, sim.InstanceProfile{Name: "sim-nodes", Role: "sim-nodes"})
	s := sim.New(sim.Options{Config: cfg})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ports := freeLoopbackPorts(t, 3)
	httpAddr := "127.0.0.1:" + ports[2]
	logFile := filepath.Join(t.TempDir(), "coordinator.log")
	log, err := fileLogger(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newCoordinatorCmd(&globals{log: log})
	cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--bind", "127.0.0.1:" + ports[0], "--advertise", "127.0.0.1:" + ports[0],
		"--gossip-bind", "127.0.0.1:" + ports[1], "--bootstrap-expect", "1", "--http-addr", httpAddr, "--insecure-dev",
		"--kubeconfig", env.Kubeconfig, "--aws-endpoint", srv.URL, "--region", "us-east-1",
		"--cluster-name", sim.DefaultCluster().Name})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("coordinator log:\n%s", b)
		}
	}()

	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	createPoolAndPendingPod(t, ctx, clients)

	var id string
	waitFor(t, 2*time.Minute, "an instance", func() bool {
		if insts := s.Instances(); len(insts) > 0 {
			id = insts[0].ID
		}
		return id != ""
	})
	ud := imdsUserData(t, srv.URL, id)
	kubeCA, err := os.ReadFile(env.Config.CAFile) // the CA is the kubeconfig's, as Karpenter takes it
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apiServerEndpoint: " + sim.DefaultCluster().Endpoint, "cidr: 172.20.0.0/16", "- " + kubeDNS,
		"certificateAuthority: " + base64.StdEncoding.EncodeToString(kubeCA)} {
		if !strings.Contains(ud, want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
	if image := instanceImageName(t, ctx, srv.URL, id); !strings.Contains(image, "al2023") || !strings.Contains(image, "-1.34-") {
		t.Errorf("instance boots %s, want the AL2023 image for Kubernetes 1.34", image)
	}

	st, err := api.FetchStatus(ctx, &http.Client{}, "http://"+httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Cluster
	if c == nil || c.KubernetesVersion != "1.34" || c.ServiceCIDR != "172.20.0.0/16" || c.ClusterDNS != kubeDNS ||
		c.Endpoint != sim.DefaultCluster().Endpoint || c.IPFamily != "ipv4" || c.DiscoveredAt == nil || len(c.Overridden) != 1 || c.Error != "" {
		t.Errorf("status cluster %+v, want the discovered facts (the CA is the kubeconfig's)", c)
	}
}

// createPoolAndPendingPod creates a NodePool and an AL2023 EC2NodeClass on
// the sim's tagged subnets, and a pod the scheduler found no node for.
func createPoolAndPendingPod(t *testing.T, ctx context.Context, c *kube.Clients) {
	t.Helper()
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"instanceProfile": "sim-nodes", "amiSelectorTerms": []any{map[string]any{"alias": "al2023@latest"}},
				"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]any{sim.DiscoveryTag: "sim"}}},
				"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]any{sim.DiscoveryTag: "sim"}}}}}},
		{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
				"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}}}}}}},
	}
	for _, o := range objs {
		gvr := kube.NodePoolsGVR
		if o.GetKind() == "EC2NodeClass" {
			gvr = kube.EC2NodeClassesGVR
		}
		if _, err := c.Dynamic.Resource(gvr).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", o.GetKind(), err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	pod, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		LastTransitionTime: metav1.Now()}}
	if _, err := c.Kube.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// imdsUserData reads an instance's user data from the sim's IMDS (IMDSv2).
func imdsUserData(t *testing.T, base, id string) string {
	t.Helper()
	imds := base + "/imds/" + id + "/latest/"
	req, _ := http.NewRequest(http.MethodPut, imds+"api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	token := httpBody(t, req)
	req, _ = http.NewRequest(http.MethodGet, imds+"user-data", nil)
	req.Header.Set("X-aws-ec2-metadata-token", token)
	return httpBody(t, req)
}

func httpBody(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s %v", req.Method, req.URL, resp.StatusCode, b, err)
	}
	return string(b)
}

// instanceImageName is the name of the image an instance booted, through
// the SDK.
func instanceImageName(t *testing.T, ctx context.Context, endpoint, id string) string {
	t.Helper()
	ec2c := simstack.Clients(endpoint, simstack.AccessKeyID).EC2
	out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) == 0 || len(out.Reservations[0].Instances) == 0 {
		t.Fatalf("describing %s: %v", id, err)
	}
	image := aws.ToString(out.Reservations[0].Instances[0].ImageId)
	imgs, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{image}})
	if err != nil || len(imgs.Images) != 1 {
		t.Fatalf("describing image %s: %v", image, err)
	}
	return aws.ToString(imgs.Images[0].Name)
}

// freeLoopbackPorts returns n ports free on 127.0.0.1 now.
func freeLoopbackPorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		out = append(out, port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

// fileLogger logs to a file (a test's logger must not outlive the test).
func fileLogger(path string) (*zap.Logger, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(f), zapcore.DebugLevel)), nil
}

// waitFor polls cond every 100 ms until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
