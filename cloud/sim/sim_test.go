package sim

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/fakeclock"
	"github.com/joiner-dev/joiner/userdata"
)

func call(t *testing.T, h http.Handler, params url.Values) (int, string) {
	t.Helper()
	if params.Get("Version") == "" {
		params.Set("Version", APIVersion)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e xErrorResponse
	if err := xml.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body is not EC2 XML: %v: %s", err, body)
	}
	if e.RequestID == "" {
		t.Errorf("error without RequestID: %s", body)
	}
	return e.Code
}

func TestErrorsAreEC2XML(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	tests := []struct {
		name   string
		params url.Values
		code   string
	}{
		{"unknown action", url.Values{"Action": {"RunInstances"}}, "InvalidAction"},
		{"wrong version", url.Values{"Action": {"DescribeSubnets"}, "Version": {"2014-01-01"}}, "MalformedQueryString"},
		{"unknown subnet", url.Values{"Action": {"DescribeSubnets"}, "SubnetId.1": {"subnet-nope"}}, "InvalidSubnetID.NotFound"},
		{"unknown instance", url.Values{"Action": {"TerminateInstances"}, "InstanceId.1": {"i-0123456789abcdef0"}}, "InvalidInstanceID.NotFound"},
		{"unknown short instance", url.Values{"Action": {"DescribeInstances"}, "InstanceId.1": {"i-0123abcd"}}, "InvalidInstanceID.NotFound"},
		{"malformed instance", url.Values{"Action": {"TerminateInstances"}, "InstanceId.1": {"i-nope"}}, "InvalidInstanceID.Malformed"},
		{"malformed instance described", url.Values{"Action": {"DescribeInstances"}, "InstanceId.1": {"i-0123456789abcdef"}}, "InvalidInstanceID.Malformed"},
		{"unknown instance tagged", url.Values{"Action": {"CreateTags"}, "ResourceId.1": {"i-0123456789abcdef0"}, "Tag.1.Key": {"k"}},
			"InvalidInstanceID.NotFound"},
		{"unknown launch template", url.Values{"Action": {"DescribeLaunchTemplates"}, "LaunchTemplateName.1": {"x"}},
			"InvalidLaunchTemplateName.NotFoundException"},
		{"unknown image in template", url.Values{"Action": {"CreateLaunchTemplate"}, "LaunchTemplateName": {"x"},
			"LaunchTemplateData.ImageId": {"ami-nope"}}, "InvalidAMIID.NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := call(t, h, tt.params)
			if status != http.StatusBadRequest || errorCode(t, body) != tt.code {
				t.Errorf("status %d body %s, want 400 %s", status, body, tt.code)
			}
		})
	}
}

func fleetParams(token, itype string) url.Values {
	return url.Values{
		"Action": {"CreateFleet"}, "Type": {"instant"}, "ClientToken": {token},
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName": {"lt"},
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType":                       {itype},
		"LaunchTemplateConfigs.1.Overrides.1.SubnetId":                           {"subnet-0sim0001"},
		"TargetCapacitySpecification.TotalTargetCapacity":                        {"1"},
		"TargetCapacitySpecification.DefaultTargetCapacityType":                  {"on-demand"},
		"TagSpecification.1.ResourceType":                                        {"instance"},
		"TagSpecification.1.Tag.1.Key":                                           {"k"},
		"TagSpecification.1.Tag.1.Value":                                         {"v"},
	}
}

func TestCreateFleet(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	kube := fake.NewSimpleClientset()
	cfg := DefaultConfig()
	s := New(Options{Config: cfg, Kube: kube, Now: clk.Now, Logger: zaptest.NewLogger(t)})
	h := s.Handler()
	al2 := awsv1.AMIFamilyAL2
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: &al2}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}}}
	claim.Spec.Taints = []corev1.Taint{{Key: "d", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	maxPods := int32(17)
	nc.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: &maxPods}
	raw, err := userdata.Render(userdata.FromNodeClaim(nc, claim, userdata.BuildOptions{
		Cluster: userdata.Cluster{Name: "c", Endpoint: "https://127.0.0.1", ServiceCIDR: "10.96.0.0/12"}}))
	if err != nil {
		t.Fatal(err)
	}
	ud := base64.StdEncoding.EncodeToString(raw)
	if status, body := call(t, h, url.Values{"Action": {"CreateLaunchTemplate"}, "LaunchTemplateName": {"lt"},
		"LaunchTemplateData.ImageId": {"ami-0simal2x86"}, "LaunchTemplateData.UserData": {ud}}); status != http.StatusOK {
		t.Fatalf("CreateLaunchTemplate: %d %s", status, body)
	}
	status, first := call(t, h, fleetParams("tok", "m5.large"))
	if status != http.StatusOK || !strings.Contains(first, "<instanceIds><item>i-") {
		t.Fatalf("CreateFleet: %d %s", status, first)
	}
	if _, again := call(t, h, fleetParams("tok", "m5.large")); again[strings.Index(again, "<fleetId>"):] != first[strings.Index(first, "<fleetId>"):] {
		t.Errorf("same token, different answer:\n%s\n%s", first, again)
	}
	if status, body := call(t, h, fleetParams("tok", "c5.large")); status != http.StatusBadRequest || errorCode(t, body) != "IdempotentParameterMismatch" {
		t.Errorf("same token, other params: %d %s", status, body)
	}
	// Injected capacity errors come back per override.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/control/capacity-errors",
		strings.NewReader(`{"instanceType":"c5.large","zone":"us-east-1a","capacityType":"on-demand","code":"InsufficientInstanceCapacity"}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("inject: %d %s", rec.Code, rec.Body)
	}
	if _, body := call(t, h, fleetParams("tok2", "c5.large")); !strings.Contains(body, "<errorCode>InsufficientInstanceCapacity</errorCode>") ||
		strings.Contains(body, "<fleetInstanceSet><item>") {
		t.Errorf("CreateFleet with an injected capacity error: %s", body)
	}
	if len(s.Instances()) != 1 {
		t.Fatalf("instances: %v", s.Instances())
	}

	// Boot: the Node appears with the user data's labels, taints, max pods.
	ctx := context.Background()
	s.step(ctx)
	if nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Fatalf("node registered before the boot delay")
	}
	clk.Add(cfg.BootDelay.Duration)
	s.step(ctx)
	id := s.Instances()[0].ID
	nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 1 {
		t.Fatalf("nodes after boot: %d", len(nodes.Items))
	}
	n := nodes.Items[0]
	if n.Spec.ProviderID != "aws:///us-east-1a/"+id || n.Labels["team"] != "a" || n.Labels[corev1.LabelInstanceTypeStable] != "m5.large" ||
		len(n.Spec.Taints) == 0 || n.Spec.Taints[0].Key != "d" || n.Status.Capacity.Pods().Value() != 17 {
		t.Errorf("node %+v", n)
	}
	beat := n.Status.Conditions[0].LastHeartbeatTime
	clk.Add(heartbeatEvery)
	s.step(ctx)
	got, _ := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if !got.Status.Conditions[0].LastHeartbeatTime.After(beat.Time) {
		t.Errorf("heartbeat not renewed: %v", got.Status.Conditions)
	}
	// Spot-style interruption terminates at the action time; terminate
	// deletes the Node.
	if _, err := s.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	clk.Add(cfg.InterruptionNotice.Duration)
	s.step(ctx)
	if nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Errorf("node of a terminated instance still exists")
	}
	if st := s.Instances()[0].State; st != "terminated" {
		t.Errorf("state %s after the interruption time", st)
	}
}

func TestControlAPIErrors(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/control/capacity-errors", `{`},
		{http.MethodPost, "/control/capacity-errors", `{"instanceType":"m5.large"}`},
		{http.MethodPost, "/control/instances/i-nope/interrupt", ``},
		{http.MethodGet, "/control/nope", ``},
		{http.MethodGet, "/imds/i-nope/latest/meta-data/instance-id", ``},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		if rec.Code < 400 {
			t.Errorf("%s %s %s: %d", tc.method, tc.path, tc.body, rec.Code)
		}
	}
}

func TestFailedRegistrationIsRetried(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	kube := fake.NewSimpleClientset()
	s := New(Options{Config: DefaultConfig(), Kube: kube, Now: clk.Now})
	// User data the sim cannot read: no Node at boot.
	bad := base64.StdEncoding.EncodeToString([]byte("not mime"))
	launchWith(t, s, "lt", "m5.large", map[string]string{"ImageId": "ami-0simal2x86", "UserData": bad}, nil)
	ctx := context.Background()
	clk.Add(time.Minute)
	s.Step(ctx)
	if nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Fatalf("node registered from unreadable user data")
	}
	// Fix the instance's user data (as if a transient API error cleared)
	// and let the retry interval pass.
	s.mu.Lock()
	s.instances[s.order[0]].UserData = nil
	s.instances[s.order[0]].ImageID = "ami-0sim2023x86"
	s.mu.Unlock()
	s.Step(ctx)
	if nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Fatalf("registration retried before the retry interval")
	}
	clk.Add(registerRetry)
	s.Step(ctx)
	if nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 1 {
		t.Fatalf("registration not retried: %d nodes", len(nodes.Items))
	}
}

// Another writer (the coordinator adding labels and its finalizer) can
// change the Node between the sim's create and its status write: the sim
// re-reads and writes the status again instead of leaving a Node without
// capacity or a Ready condition.
func TestRegistrationRetriesStatusConflict(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	kube := fake.NewSimpleClientset()
	conflicts := 2
	kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n", errors.New("modified"))
	})
	s := New(Options{Config: DefaultConfig(), Kube: kube, Now: clk.Now})
	launchWith(t, s, "lt", "m5.large", nil, nil)
	ctx := context.Background()
	clk.Add(time.Minute)
	s.Step(ctx)
	nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 1 || conflicts != 0 {
		t.Fatalf("%d nodes, %d conflicts left", len(nodes.Items), conflicts)
	}
	n := nodes.Items[0]
	if len(n.Status.Conditions) == 0 || n.Status.Allocatable.Cpu().IsZero() {
		t.Fatalf("node %s registered without its status: %+v", n.Name, n.Status)
	}
}

// TestFilterMatch: EC2 filter values' wildcards: * any run of characters,
// "/" included (Karpenter's default selector {"*": "*"} matches the tag
// key karpenter.sh/discovery), ? one character, backslash escapes.
func TestFilterMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, v string
		want       bool
	}{
		{"*", "karpenter.sh/discovery", true},
		{"*", "", true},
		{"kubernetes.io/cluster/*", "kubernetes.io/cluster/test", true},
		{"sim-*-us-east-1?", "sim-private-us-east-1a", true},
		{"sim-*-us-east-1?", "sim-private-us-east-1", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{`\*amazon\?`, "*amazon?", true},
		{`\*amazon\?`, "xamazonx", false},
	} {
		if got := filterMatch(tc.pattern, tc.v); got != tc.want {
			t.Errorf("filterMatch(%q, %q) = %v, want %v", tc.pattern, tc.v, got, tc.want)
		}
	}
}
