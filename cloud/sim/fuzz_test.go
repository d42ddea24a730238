package sim

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzParseQuery feeds arbitrary bodies to the Query-protocol parser, its
// accessors and the API handler: no panic, and every 200 answer is XML.
func FuzzParseQuery(f *testing.F) {
	for _, seed := range []string{
		"Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=tag:karpenter.sh/discovery&Filter.1.Value.1=sim",
		"Action=CreateFleet&Version=2016-11-15&Type=instant&ClientToken=t&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=x&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large&LaunchTemplateConfigs.1.Overrides.1.SubnetId=subnet-0sim0001&TargetCapacitySpecification.TotalTargetCapacity=1&TargetCapacitySpecification.DefaultTargetCapacityType=spot",
		"Action=CreateLaunchTemplate&Version=2016-11-15&LaunchTemplateName=a&LaunchTemplateData.ImageId=ami-0sim2023x86&LaunchTemplateData.UserData=aGk%3D&TagSpecification.1.ResourceType=launch-template&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v",
		"Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-1&Filter.1.Name=tag:a&Filter.1.Value.2=*",
		"Action=DescribeSpotPriceHistory&Version=2016-11-15&InstanceType.1=m5.large",
		"Action=TerminateInstances&Version=2016-11-15&InstanceId.99999999999999999999=x",
		"%zz&Action",
		"Action=CreateTags&Version=2016-11-15&ResourceId.1=lt-1&Tag.1.Key=a",
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{Config: DefaultConfig()})
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := ParseQuery(body); err == nil {
			_ = r.Filters()
			_ = r.TagSpecs("TagSpecification")
			for _, c := range r.Sub("LaunchTemplateConfigs") {
				_ = c.Sub("Overrides")
			}
			_ = r.Strings("InstanceId")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
		if rec.Code == http.StatusOK {
			var v struct{}
			if err := xml.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("200 answer is not XML: %v\n%s", err, rec.Body.String())
			}
		}
	})
}
