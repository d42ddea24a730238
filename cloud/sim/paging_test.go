package sim

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// errorOf is the code and message of an EC2 error body.
func errorOf(t *testing.T, body string) (string, string) {
	t.Helper()
	var e xErrorResponse
	if err := xml.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body is not EC2 XML: %v: %s", err, body)
	}
	return e.Code, e.Message
}

// TestMaxResultsRefusals: each action refuses a MaxResults out of its
// range, or beside its ID list, with AWS's code and words, and a
// NextToken it did not hand out with InvalidPaginationToken.
func TestMaxResultsRefusals(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	tests := []struct {
		action string
		params url.Values
		code   string
		msg    string
	}{
		{"DescribeInstances", url.Values{"MaxResults": {"2"}}, "InvalidParameterValue",
			"Value ( 2 ) for parameter maxResults is invalid. Expecting a value greater than 5."},
		{"DescribeInstances", url.Values{"MaxResults": {"5"}, "InstanceId.1": {"i-0123456789abcdef0"}}, "InvalidParameterCombination",
			"The parameter instancesSet cannot be used with the parameter maxResults"},
		{"DescribeInstances", url.Values{"MaxResults": {"2"}, "InstanceId.1": {"i-0123456789abcdef0"}}, "InvalidParameterCombination",
			"The parameter instancesSet cannot be used with the parameter maxResults"},
		{"DescribeInstanceTypes", url.Values{"MaxResults": {"101"}}, "InvalidMaxResults",
			"Value ( 101 ) for parameter maxResults is invalid. Expecting a value from ( 5 ) to  ( 100 )."},
		{"DescribeInstanceTypeOfferings", url.Values{"MaxResults": {"4"}}, "InvalidMaxResults",
			"Value ( 4 ) for parameter maxResults is invalid. Expecting a value from ( 5 ) to  ( 1000 )."},
		{"DescribeLaunchTemplates", url.Values{"MaxResults": {"0"}}, "InvalidParameterValue", "Maximum results allowed are between 1 and 200"},
		{"DescribeLaunchTemplates", url.Values{"MaxResults": {"201"}}, "InvalidParameterValue", "Maximum results allowed are between 1 and 200"},
		{"DescribeCapacityReservations", url.Values{"MaxResults": {"1001"}}, "InvalidParameterValue",
			"1001 is an invalid value for MaxResults. MaxResults must be null, or between 1 and 1000."},
		{"DescribeLaunchTemplates", url.Values{"NextToken": {"bm90LWEtdG9rZW4"}}, "InvalidPaginationToken",
			"The specified pagination token is not valid or is expired."},
	}
	for _, tc := range tests {
		t.Run(tc.action+"/"+tc.params.Encode(), func(t *testing.T) {
			tc.params.Set("Action", tc.action)
			status, body := call(t, h, tc.params)
			code, msg := errorOf(t, body)
			if status != http.StatusBadRequest || code != tc.code || msg != tc.msg {
				t.Errorf("%d %s %q, want 400 %s %q", status, code, msg, tc.code, tc.msg)
			}
		})
	}
	for _, ok := range []url.Values{
		{"Action": {"DescribeInstances"}, "MaxResults": {"5000"}},
		{"Action": {"DescribeInstanceTypes"}, "MaxResults": {"100"}},
		{"Action": {"DescribeLaunchTemplates"}, "MaxResults": {"200"}},
		{"Action": {"DescribeSpotPriceHistory"}, "MaxResults": {"2000"}},
	} {
		if status, body := call(t, h, ok); status != http.StatusOK {
			t.Errorf("%v: %d %s", ok, status, body)
		}
	}
}

// TestPagingThroughSDK: the SDK's paginators get every item of the paged
// actions, a page at a time, and a listing resumes after the last item it
// was handed even when items went away between pages (collect, then
// delete, as Karpenter deletes a class's launch templates).
func TestPagingThroughSDK(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Unrestricted = true
	s := New(Options{Config: cfg})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("admin", "x", "")})
	ctx := context.Background()

	var names []string
	for i := range 7 {
		name := fmt.Sprintf("lt-%02d", i)
		names = append(names, name)
		if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0sim2023x86")},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
				Tags: []ec2types.Tag{{Key: aws.String("owner"), Value: aws.String("me")}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	in := &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(3),
		Filters: []ec2types.Filter{{Name: aws.String("tag:owner"), Values: []string{"me"}}}}
	var got []string
	pages := 0
	for p := ec2.NewDescribeLaunchTemplatesPaginator(c, in); p.HasMorePages(); pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, lt := range page.LaunchTemplates {
			got = append(got, aws.ToString(lt.LaunchTemplateName))
		}
	}
	if pages != 3 || !slices.Equal(got, names) {
		t.Errorf("%d pages of %v, want 3 of %v", pages, got, names)
	}
	first, err := c.DescribeLaunchTemplates(ctx, in)
	if err != nil || len(first.LaunchTemplates) != 3 || first.NextToken == nil {
		t.Fatalf("first page: %+v %v", first, err)
	}
	for _, gone := range []string{"lt-02", "lt-03"} { // the last handed out, the next due
		if _, err := c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(gone)}); err != nil {
			t.Fatal(err)
		}
	}
	next := *in
	next.NextToken = first.NextToken
	second, err := c.DescribeLaunchTemplates(ctx, &next)
	if err != nil || len(second.LaunchTemplates) != 3 || aws.ToString(second.LaunchTemplates[0].LaunchTemplateName) != "lt-04" {
		t.Errorf("page after deletions: %+v %v", second, err)
	}
	other := *in
	other.Filters = nil
	other.NextToken = first.NextToken
	if _, err := c.DescribeLaunchTemplates(ctx, &other); err == nil {
		t.Errorf("a token of another request was taken")
	}

	// Instance types page by 100 without MaxResults; the paginator gets
	// them all.
	firstTypes, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	if err != nil || len(firstTypes.InstanceTypes) != 100 || firstTypes.NextToken == nil {
		t.Fatalf("first page of instance types: %d, %v, %v", len(firstTypes.InstanceTypes), firstTypes.NextToken, err)
	}
	types := map[string]bool{}
	for p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.InstanceTypes {
			types[string(it.InstanceType)] = true
		}
	}
	if len(types) != len(s.types) {
		t.Errorf("%d instance types paged, the sim has %d", len(types), len(s.types))
	}

	// Spot prices: every type in every zone, 500 a page.
	spot := map[string]bool{}
	pages = 0
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(c, &ec2.DescribeSpotPriceHistoryInput{MaxResults: aws.Int32(500),
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}}); p.HasMorePages(); pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range page.SpotPriceHistory {
			spot[string(sp.InstanceType)+"/"+aws.ToString(sp.AvailabilityZone)] = true
		}
	}
	if want := len(s.types) * len(cfg.Zones); len(spot) != want || pages != (want+499)/500 {
		t.Errorf("%d spot prices in %d pages, want %d", len(spot), pages, want)
	}

	// Instances page in launch order.
	h := s.Handler()
	if code, body := call(t, h, ltParams("lt", nil)); code != http.StatusOK {
		t.Fatalf("CreateLaunchTemplate: %d %s", code, body)
	}
	var launched []string
	for i := range 7 {
		code, body := call(t, h, fleetParams(fmt.Sprintf("tok-%d", i), "m5.large"))
		var out createFleetResponse
		if err := xml.Unmarshal([]byte(body), &out); err != nil || code != http.StatusOK || len(out.Instances) != 1 {
			t.Fatalf("CreateFleet: %d %s", code, body)
		}
		launched = append(launched, out.Instances[0].InstanceIDs...)
	}
	var listed []string
	pages = 0
	for p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)}); p.HasMorePages(); pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				listed = append(listed, aws.ToString(in.InstanceId))
			}
		}
	}
	if pages != 2 || !slices.Equal(listed, launched) {
		t.Errorf("%d pages of %v, want 2 of %v", pages, listed, launched)
	}
}
