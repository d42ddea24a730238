package sim

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestDescribeInstanceTypesHardwareThroughSDK: the sim's DescribeInstanceTypes
// answer decodes through the SDK with the processor's manufacturer and
// sustained clock, EBS optimization (EbsOptimizedInfo only where a type
// can be EBS-optimized) and encryption in transit of the catalogue's model.
func TestDescribeInstanceTypesHardwareThroughSDK(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Unrestricted = true
	srv := httptest.NewServer(New(Options{Config: cfg}).Handler())
	t.Cleanup(srv.Close)
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("admin", "x", "")})
	type want struct {
		manufacturer string
		ghz          float64
		ebsSupport   ec2types.EbsOptimizedSupport
		ebsMbps      int32 // 0: no EbsOptimizedInfo
		encryption   bool
	}
	cases := map[string]want{
		"m5.large":  {"Intel", 3.1, ec2types.EbsOptimizedSupportDefault, 4750, false},
		"m6g.large": {"AWS", 2.5, ec2types.EbsOptimizedSupportDefault, 10000, false},
		"m5a.large": {"AMD", 2.5, ec2types.EbsOptimizedSupportDefault, 4750, false},
		"m6i.large": {"Intel", 3.5, ec2types.EbsOptimizedSupportDefault, 10000, true},
		"t2.micro":  {"Intel", 2.5, ec2types.EbsOptimizedSupportUnsupported, 0, false},
		"m3.medium": {"Intel", 2.5, ec2types.EbsOptimizedSupportSupported, 500, false},
	}
	var names []ec2types.InstanceType
	for n := range cases {
		names = append(names, ec2types.InstanceType(n))
	}
	out, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.InstanceTypes) != len(cases) {
		t.Fatalf("%d types, want %d", len(out.InstanceTypes), len(cases))
	}
	for _, it := range out.InstanceTypes {
		w := cases[string(it.InstanceType)]
		pi := it.ProcessorInfo
		if pi == nil || aws.ToString(pi.Manufacturer) != w.manufacturer || aws.ToFloat64(pi.SustainedClockSpeedInGhz) != w.ghz {
			t.Errorf("%s: processor %+v, want %s at %v GHz", it.InstanceType, pi, w.manufacturer, w.ghz)
		}
		if it.EbsInfo == nil || it.EbsInfo.EbsOptimizedSupport != w.ebsSupport {
			t.Errorf("%s: ebs info %+v, want support %s", it.InstanceType, it.EbsInfo, w.ebsSupport)
		} else if oi := it.EbsInfo.EbsOptimizedInfo; (oi == nil) != (w.ebsMbps == 0) || (oi != nil && aws.ToInt32(oi.MaximumBandwidthInMbps) != w.ebsMbps) {
			t.Errorf("%s: ebs optimized info %+v, want max %d Mbps", it.InstanceType, oi, w.ebsMbps)
		}
		if it.NetworkInfo == nil || it.NetworkInfo.EncryptionInTransitSupported == nil || *it.NetworkInfo.EncryptionInTransitSupported != w.encryption {
			t.Errorf("%s: network info %+v, want encryption in transit %v", it.InstanceType, it.NetworkInfo, w.encryption)
		}
	}
}
