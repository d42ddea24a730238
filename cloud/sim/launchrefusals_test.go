package sim

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/test/fakeclock"
)

// TestUserDataLimit: EC2 takes 16384 bytes of user data and refuses more
// with InvalidUserData.Malformed (Karpenter's IsUserDataTooLarge reads
// the message).
func TestUserDataLimit(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	for _, tc := range []struct {
		size int
		code string
	}{{16384, ""}, {16385, "InvalidUserData.Malformed"}} {
		ud := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", tc.size)))
		status, body := call(t, h, ltParams("ud-"+strconv.Itoa(tc.size), map[string]string{"UserData": ud}))
		if tc.code == "" {
			if status != http.StatusOK {
				t.Errorf("%d bytes: %d %s", tc.size, status, body)
			}
			continue
		}
		code, msg := errorOf(t, body)
		if status != http.StatusBadRequest || code != tc.code || msg != "User data is limited to 16384 bytes" {
			t.Errorf("%d bytes: %d %s %q", tc.size, status, code, msg)
		}
	}
}

// TestInstanceProfileAtLaunch: a launch whose template names an instance
// profile EC2 does not know fails per override with EC2's
// InvalidParameterValue "Invalid IAM Instance Profile name": one that does
// not exist, and one created less than IAM.PropagationDelay ago; the
// config's profiles are known from the start.
func TestInstanceProfileAtLaunch(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.IAM.InstanceProfiles = []InstanceProfile{{Name: "by-hand", Role: "node"}}
	cfg.IAM.PropagationDelay = Duration{5 * time.Second}
	s := New(Options{Config: cfg, Now: clk.Now})
	h := s.Handler()
	profileError := func(value, param string) string {
		return "Value (" + value + ") for parameter " + param + " is invalid. Invalid IAM Instance Profile name"
	}
	fleetError := func(out createFleetResponse) (string, string) {
		if len(out.Instances) != 0 || len(out.Errors) != 1 {
			t.Fatalf("want one fleet error and no instance: %+v", out)
		}
		return out.Errors[0].Code, out.Errors[0].Message
	}

	out := launchWith(t, s, "unknown", "m5.large", map[string]string{"IamInstanceProfile.Name": "nope"}, nil)
	if code, msg := fleetError(out); code != "InvalidParameterValue" || msg != profileError("nope", "iamInstanceProfile.name") {
		t.Errorf("unknown profile: %s %q", code, msg)
	}
	arn := "arn:aws:iam::123456789012:instance-profile/x/nope"
	out = launchWith(t, s, "unknown-arn", "m5.large", map[string]string{"IamInstanceProfile.Arn": arn}, nil)
	if code, msg := fleetError(out); code != "InvalidParameterValue" || msg != profileError(arn, "iamInstanceProfile.arn") {
		t.Errorf("unknown profile ARN: %s %q", code, msg)
	}
	if out := launchWith(t, s, "by-hand", "m5.large", map[string]string{"IamInstanceProfile.Name": "by-hand"}, nil); len(out.Instances) != 1 {
		t.Errorf("config profile: %+v", out)
	}

	if status, body := call(t, h, url.Values{"Version": {iamVersion}, "Action": {"CreateInstanceProfile"},
		"InstanceProfileName": {"fresh"}}); status != http.StatusOK {
		t.Fatalf("CreateInstanceProfile: %d %s", status, body)
	}
	out = launchWith(t, s, "fresh", "m5.large", map[string]string{"IamInstanceProfile.Name": "fresh"}, nil)
	if code, msg := fleetError(out); code != "InvalidParameterValue" || msg != profileError("fresh", "iamInstanceProfile.name") {
		t.Errorf("profile created just now: %s %q", code, msg)
	}
	clk.Add(5 * time.Second)
	p := fleetParams("tok-fresh-later", "m5.large")
	p.Set("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName", "fresh")
	status, body := call(t, h, p)
	var later createFleetResponse
	if err := xml.Unmarshal([]byte(body), &later); err != nil || status != http.StatusOK || len(later.Instances) != 1 {
		t.Errorf("profile after the propagation delay: %d %s", status, body)
	}
}

// TestSpotPriceGaps: Config.NoSpotPrice leaves type and zone pairs out of
// the spot price history, and a spot launch there fails with Unsupported;
// DescribeSpotPriceHistory honours its product, type, zone and filter
// parameters.
func TestSpotPriceGaps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NoSpotPrice = []TypeZone{{InstanceType: "m5.large", Zone: "us-east-1b"}, {InstanceType: "c5.large"}}
	s := New(Options{Config: cfg})
	h := s.Handler()
	prices := func(params url.Values) []string {
		t.Helper()
		params.Set("Action", "DescribeSpotPriceHistory")
		status, body := call(t, h, params)
		var out describeSpotPriceHistoryResponse
		if err := xml.Unmarshal([]byte(body), &out); err != nil || status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		var got []string
		for _, p := range out.Prices {
			got = append(got, p.InstanceType+"/"+p.AvailabilityZone+"/"+p.ProductDescription)
		}
		return got
	}
	tests := []struct {
		name   string
		params url.Values
		want   []string
	}{
		{"gap in one zone", url.Values{"InstanceType.1": {"m5.large"}},
			[]string{"m5.large/us-east-1a/Linux/UNIX", "m5.large/us-east-1c/Linux/UNIX"}},
		{"gap in every zone", url.Values{"InstanceType.1": {"c5.large"}}, nil},
		{"zone", url.Values{"InstanceType.1": {"m5.xlarge"}, "AvailabilityZone": {"us-east-1b"}}, []string{"m5.xlarge/us-east-1b/Linux/UNIX"}},
		{"filters", url.Values{"Filter.1.Name": {"instance-type"}, "Filter.1.Value.1": {"m5.*"}, "Filter.2.Name": {"availability-zone"},
			"Filter.2.Value.1": {"us-east-1c"}, "Filter.3.Name": {"product-description"}, "Filter.3.Value.1": {"Linux/UNIX"},
			"InstanceType.1": {"m5.large"}, "InstanceType.2": {"m5.xlarge"}},
			[]string{"m5.large/us-east-1c/Linux/UNIX", "m5.xlarge/us-east-1c/Linux/UNIX"}},
		{"another product", url.Values{"ProductDescription.1": {"Windows"}, "InstanceType.1": {"m5.large"}}, nil},
		{"Linux products", url.Values{"ProductDescription.1": {"Linux/UNIX"}, "ProductDescription.2": {"Linux/UNIX (Amazon VPC)"},
			"InstanceType.1": {"m5.xlarge"}, "AvailabilityZone": {"us-east-1a"}}, []string{"m5.xlarge/us-east-1a/Linux/UNIX"}},
	}
	for _, tc := range tests {
		if got := prices(tc.params); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	spotIn := func(subnet string) url.Values {
		return url.Values{"TargetCapacitySpecification.DefaultTargetCapacityType": {"spot"},
			"LaunchTemplateConfigs.1.Overrides.1.SubnetId": {subnet}}
	}
	out := launchWith(t, s, "spot-b", "m5.large", nil, spotIn("subnet-0sim0002"))
	if len(out.Instances) != 0 || len(out.Errors) != 1 || out.Errors[0].Code != "Unsupported" {
		t.Errorf("spot launch without a spot price: %+v", out)
	}
	if out := launchWith(t, s, "spot-a", "m5.large", nil, spotIn("subnet-0sim0001")); len(out.Instances) != 1 {
		t.Errorf("spot launch with a spot price: %+v", out)
	}
	if out := launchWith(t, s, "od-b", "m5.large", nil, url.Values{"LaunchTemplateConfigs.1.Overrides.1.SubnetId": {"subnet-0sim0002"}}); len(out.Instances) != 1 {
		t.Errorf("on-demand launch without a spot price: %+v", out)
	}
}

// TestTagLimit: EC2 refuses more than 50 tags on one resource in a tag
// specification of CreateLaunchTemplate (the template's, or the
// instances' in its data) or CreateFleet with TagLimitExceeded.
func TestTagLimit(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	tags := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["k"+strconv.Itoa(i)] = "v"
		}
		return m
	}
	lt := func(prefix, kind string, n int) url.Values {
		v := ltParams("lt-"+kind+strconv.Itoa(n), nil)
		addTagSpec(v, prefix, 1, kind, tags(n))
		return v
	}
	fleet := func(n int) url.Values {
		v := fleetParams("tok-"+strconv.Itoa(n), "m5.large")
		addTagSpec(v, "TagSpecification", 2, "volume", tags(n))
		return v
	}
	if status, body := call(t, h, ltParams("lt", nil)); status != http.StatusOK {
		t.Fatalf("CreateLaunchTemplate: %d %s", status, body)
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		code   string
	}{
		{"template with 50", lt("TagSpecification", "launch-template", 50), ""},
		{"template with 51", lt("TagSpecification", "launch-template", 51), "TagLimitExceeded"},
		{"template data with 51", lt("LaunchTemplateData.TagSpecification", "instance", 51), "TagLimitExceeded"},
		{"fleet with 50", fleet(50), ""},
		{"fleet with 51", fleet(51), "TagLimitExceeded"},
	} {
		status, body := call(t, h, tc.params)
		switch {
		case tc.code == "" && status != http.StatusOK:
			t.Errorf("%s: %d %s", tc.name, status, body)
		case tc.code != "" && (status != http.StatusBadRequest || errorCode(t, body) != tc.code):
			t.Errorf("%s: %d %s, want %s", tc.name, status, body, tc.code)
		}
	}
}
