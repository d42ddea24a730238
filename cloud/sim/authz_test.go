package sim

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	iampolicy "github.com/joiner-dev/joiner/packaging/iam"
)

// testCluster is the cluster whose controller the raw-request tests play.
const testCluster = "test"

// clusterTags are the tags Joiner's creates carry for testCluster, the
// ones the shipped policy requires.
func clusterTags() map[string]string {
	return map[string]string{"kubernetes.io/cluster/" + testCluster: "owned", "eks:eks-cluster-name": testCluster,
		"joiner.io/cluster": testCluster, "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default"}
}

// addTagSpec adds a TagSpecification (prefix ends in the list's name) at
// index n for resource type kind.
func addTagSpec(v url.Values, prefix string, n int, kind string, tags map[string]string) {
	p := prefix + "." + strconv.Itoa(n) + "."
	v.Set(p+"ResourceType", kind)
	i := 1
	for _, k := range sortedKeys(tags) {
		v.Set(p+"Tag."+strconv.Itoa(i)+".Key", k)
		v.Set(p+"Tag."+strconv.Itoa(i)+".Value", tags[k])
		i++
	}
}

// asController makes a raw request as Joiner's controller makes it under
// the shipped policy: creates tag what they create for testCluster
// (added at high indexes, so a test's own tag specifications merge).
func asController(params url.Values) url.Values {
	v := url.Values{}
	for k, vals := range params {
		v[k] = append([]string(nil), vals...)
	}
	switch v.Get("Action") {
	case "CreateLaunchTemplate":
		addTagSpec(v, "TagSpecification", 9, "launch-template", clusterTags())
		addTagSpec(v, "LaunchTemplateData.TagSpecification", 9, "network-interface", clusterTags())
	case "CreateFleet":
		for i, kind := range []string{"instance", "volume", "fleet"} {
			addTagSpec(v, "TagSpecification", 7+i, kind, clusterTags())
		}
	}
	return v
}

// callAs makes a raw request signed by accessKey (no tags added).
func callAs(t *testing.T, h http.Handler, accessKey string, params url.Values) (int, string) {
	t.Helper()
	return call(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sign(r, accessKey, "us-east-1")
		h.ServeHTTP(w, r)
	}), params)
}

// sign gives req a SigV4 Authorization header of accessKey for region
// (the sim reads the credential scope, not the signature).
func sign(req *http.Request, accessKey, region string) {
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+accessKey+"/20260101/"+region+"/ec2/aws4_request, SignedHeaders=host, Signature=0")
}

// TestShippedPolicyGuardsLaunches: under the default config (the shipped
// policy) a launch template without the cluster's tags, a launch whose
// instances miss eks:eks-cluster-name, termination of an instance that is
// not the cluster's and spot request tags on an on-demand launch are
// refused with EC2's codes; the same requests tagged as Joiner tags them
// pass. An unrestricted caller (Access.Callers) is not checked.
func TestShippedPolicyGuardsLaunches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Callers = map[string]Caller{"other": {Unrestricted: true}}
	s := New(Options{Config: cfg})
	h := s.Handler()

	// An untagged launch template is refused at the API.
	code, body := callAs(t, h, "joiner", ltParams("bare", nil))
	if code != http.StatusForbidden || errorCode(t, body) != codeUnauthorized ||
		!strings.Contains(body, "ec2:CreateLaunchTemplate on resource: arn:aws:ec2:us-east-1:123456789012:launch-template/*") ||
		!strings.Contains(body, "Encoded authorization failure message: ") {
		t.Fatalf("untagged CreateLaunchTemplate: %d %s", code, body)
	}
	if s.Denied("ec2:CreateLaunchTemplate") != 1 {
		t.Errorf("denied CreateLaunchTemplate = %d, want 1", s.Denied("ec2:CreateLaunchTemplate"))
	}
	// The unrestricted caller may.
	if code, body := callAs(t, h, "other", ltParams("bare", nil)); code != http.StatusOK {
		t.Fatalf("unrestricted CreateLaunchTemplate: %d %s", code, body)
	}
	if code, body := callAs(t, h, "joiner", asController(ltParams("lt", nil))); code != http.StatusOK {
		t.Fatalf("tagged CreateLaunchTemplate: %d %s", code, body)
	}
	// The untagged template of the other caller cannot launch for Joiner.
	p := asController(fleetParams("t-bare", "m5.large"))
	p.Set("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName", "bare")
	if code, body := callAs(t, h, "joiner", p); code != http.StatusForbidden || !strings.Contains(body, ":launch-template/lt-") {
		t.Errorf("launch from an untagged template: %d %s", code, body)
	}

	launch := func(token string, mutate func(url.Values)) createFleetResponse {
		t.Helper()
		p := asController(fleetParams(token, "m5.large"))
		mutate(p)
		code, body := callAs(t, h, "joiner", p)
		if code != http.StatusOK {
			t.Fatalf("CreateFleet %s: %d %s", token, code, body)
		}
		var out createFleetResponse
		if err := xml.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Instances without eks:eks-cluster-name: the offering fails with
	// UnauthorizedOperation (a fleet error, as EC2 reports RunInstances).
	missing := launch("t-missing", func(v url.Values) {
		for k := range v {
			if strings.HasPrefix(k, "TagSpecification.7.") {
				delete(v, k)
			}
		}
		addTagSpec(v, "TagSpecification", 7, "instance", map[string]string{"kubernetes.io/cluster/test": "owned",
			"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default"})
	})
	if len(missing.Instances) != 0 || len(missing.Errors) != 1 || missing.Errors[0].Code != codeUnauthorized ||
		!strings.Contains(missing.Errors[0].Message, "ec2:RunInstances on resource: arn:aws:ec2:us-east-1:123456789012:instance/*") {
		t.Errorf("launch without eks:eks-cluster-name: %+v", missing)
	}
	// Spot request tags on an on-demand launch are refused.
	ltSpot := asController(ltParams("lt-spot", nil))
	addTagSpec(ltSpot, "LaunchTemplateData.TagSpecification", 8, "spot-instances-request", clusterTags())
	if code, body := callAs(t, h, "joiner", ltSpot); code != http.StatusOK {
		t.Fatalf("CreateLaunchTemplate lt-spot: %d %s", code, body)
	}
	od := launch("t-od-spot-tags", func(v url.Values) {
		v.Set("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName", "lt-spot")
	})
	if len(od.Errors) != 1 || od.Errors[0].Code != "InvalidParameterValue" {
		t.Errorf("on-demand launch with spot request tags: %+v", od)
	}
	// The same template launches spot; a spot launch from a template
	// without spot request tags is refused.
	spot := launch("t-spot", func(v url.Values) {
		v.Set("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName", "lt-spot")
		v.Set("TargetCapacitySpecification.DefaultTargetCapacityType", "spot")
	})
	if len(spot.Instances) != 1 {
		t.Errorf("spot launch with spot request tags: %+v", spot)
	}
	bareSpot := launch("t-spot-bare", func(v url.Values) { v.Set("TargetCapacitySpecification.DefaultTargetCapacityType", "spot") })
	if len(bareSpot.Errors) != 1 || !strings.Contains(bareSpot.Errors[0].Message, ":spot-instances-request/*") {
		t.Errorf("spot launch without spot request tags: %+v", bareSpot)
	}
	ok := launch("t-ok", func(url.Values) {})
	if len(ok.Instances) != 1 {
		t.Fatalf("tagged launch: %+v", ok)
	}
	// The unrestricted caller's instance is not the cluster's: Joiner may
	// not terminate it; Joiner's own it may.
	theirs := asController(fleetParams("t-theirs", "m5.large"))
	for k := range theirs {
		if strings.HasPrefix(k, "TagSpecification.") {
			delete(theirs, k)
		}
	}
	code, body = callAs(t, h, "other", theirs)
	if code != http.StatusOK {
		t.Fatalf("unrestricted CreateFleet: %d %s", code, body)
	}
	var their createFleetResponse
	_ = xml.Unmarshal([]byte(body), &their)
	if len(their.Instances) != 1 {
		t.Fatalf("unrestricted launch: %s", body)
	}
	term := func(id string) (int, string) {
		return callAs(t, h, "joiner", url.Values{"Action": {"TerminateInstances"}, "InstanceId.1": {id}})
	}
	if code, body := term(their.Instances[0].InstanceIDs[0]); code != http.StatusForbidden || errorCode(t, body) != codeUnauthorized {
		t.Errorf("terminating another's instance: %d %s", code, body)
	}
	if code, body := term(ok.Instances[0].InstanceIDs[0]); code != http.StatusOK {
		t.Errorf("terminating the cluster's instance: %d %s", code, body)
	}
	// Describe is limited to the region the request is signed for.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("Action=DescribeSubnets&Version="+APIVersion))
	sign(req, "joiner", "eu-west-1")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("DescribeSubnets signed for eu-west-1: %d %s", rec.Code, rec.Body)
	}
}

// TestConfigPolicyReplacesTheShippedOne: Access.Policy (with the shipped
// placeholders) is what callers hold; an explicit Deny wins.
func TestConfigPolicyReplacesTheShippedOne(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Policy = []byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*","Condition":{"StringEquals":{"aws:RequestedRegion":"REGION"}}},
		{"Effect":"Deny","Action":"ec2:DescribeImages","Resource":"*"}]}`)
	if err := ValidateAccess(cfg.IAM.Access, cfg.Region); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Config: cfg}).Handler()
	for action, want := range map[string]int{"DescribeSubnets": http.StatusOK, "DescribeImages": http.StatusForbidden,
		"DescribeInstances": http.StatusOK} {
		if code, body := callAs(t, h, "joiner", url.Values{"Action": {action}}); code != want {
			t.Errorf("%s: %d %s, want %d", action, code, body, want)
		}
	}
	code, body := callAs(t, h, "joiner", url.Values{"Action": {"DescribeImages"}})
	if !strings.Contains(body, "with an explicit deny in an identity-based policy") || code != http.StatusForbidden {
		t.Errorf("explicit deny message: %s", body)
	}
	bad := cfg.IAM.Access
	bad.Policy = []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"NumericLessThan":{"a":"1"}}}]}`)
	if err := ValidateAccess(bad, cfg.Region); err == nil || !strings.Contains(err.Error(), "NumericLessThan") {
		t.Errorf("ValidateAccess of an unsupported operator: %v", err)
	}
}

// TestJSONAndEKSRefusals: SSM parameters outside /aws/service/, an SQS
// queue not named for the cluster and another cluster's EKS API are
// refused with AccessDeniedException.
func TestJSONAndEKSRefusals(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Cluster = "sim"
	cfg.Parameters["/team/ami"] = "ami-0sim2023x86"
	h := New(Options{Config: cfg}).Handler()
	post := func(target, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		sign(req, "joiner", "us-east-1")
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("AmazonSSM.GetParameter", `{"Name":"/team/ami"}`); rec.Code != http.StatusBadRequest ||
		rec.Header().Get("X-Amzn-ErrorType") != "AccessDeniedException" || !strings.Contains(rec.Body.String(), "ssm:GetParameter") {
		t.Errorf("GetParameter outside /aws/service/: %d %s", rec.Code, rec.Body)
	}
	param := ""
	for name := range cfg.Parameters {
		if strings.HasPrefix(name, "/aws/service/") {
			param = name
			break
		}
	}
	if rec := post("AmazonSSM.GetParameter", `{"Name":"`+param+`"}`); rec.Code != http.StatusOK {
		t.Errorf("GetParameter %s: %d %s", param, rec.Code, rec.Body)
	}
	if rec := post("AmazonSQS.ReceiveMessage", `{"QueueUrl":"https://sqs.us-east-1.amazonaws.com/123456789012/other"}`); rec.Code != http.StatusBadRequest ||
		rec.Header().Get("X-Amzn-ErrorType") != "AccessDeniedException" {
		t.Errorf("ReceiveMessage on another queue: %d %s", rec.Code, rec.Body)
	}
	for name, want := range map[string]int{"other": http.StatusForbidden} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/clusters/"+name, nil)
		sign(req, "joiner", "us-east-1")
		h.ServeHTTP(rec, req)
		if rec.Code != want || rec.Header().Get("X-Amzn-ErrorType") != "AccessDeniedException" {
			t.Errorf("DescribeCluster %s: %d %s", name, rec.Code, rec.Body)
		}
	}
}

// TestShippedPolicyParses: the embedded document parses with every
// placeholder filled.
func TestShippedPolicyParses(t *testing.T) {
	p, err := ParsePolicy(fillPolicy(iampolicy.ControllerPolicy(), "us-east-1", "", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Statements) < 10 {
		t.Errorf("%d statements", len(p.Statements))
	}
}
