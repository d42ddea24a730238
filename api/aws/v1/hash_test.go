package v1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/test/yamltest"
)

const testCABundle = "test-ca-bundle"

// hashBase is the EC2NodeClass of Karpenter v1.14.1's own hash test
// (pkg/apis/v1/ec2nodeclass_hash_test.go in the AWS provider): the numbers
// below are the ones that test pins, so a NodeClaim Karpenter launched is
// judged by the hash Karpenter wrote on it.
func hashBase() *EC2NodeClass {
	return &EC2NodeClass{Spec: EC2NodeClassSpec{
		Role:                     "role-1",
		Tags:                     map[string]string{"keyTag-1": "valueTag-1", "keyTag-2": "valueTag-2"},
		Context:                  ptr("fake-context"),
		DetailedMonitoring:       ptr(false),
		AssociatePublicIPAddress: ptr(false),
		MetadataOptions: &MetadataOptions{HTTPEndpoint: ptr("disabled"), HTTPProtocolIPv6: ptr("disabled"),
			HTTPPutResponseHopLimit: ptr(int64(1)), HTTPTokens: ptr("optional")},
		BlockDeviceMappings: []*BlockDeviceMapping{
			{DeviceName: ptr("map-device-1"), EBS: &BlockDevice{DeleteOnTermination: ptr(false), Encrypted: ptr(false),
				IOPS: ptr(int64(0)), KMSKeyID: ptr("fakeKMSKeyID"), SnapshotID: ptr("fakeSnapshot"), Throughput: ptr(int64(0)),
				VolumeSize: resource.NewScaledQuantity(2, resource.Giga), VolumeType: ptr("standard")}},
			{DeviceName: ptr("map-device-2")},
		},
		UserData: ptr("userdata-test-1"),
	}}
}

func TestEC2NodeClassHashMatchesKarpenter(t *testing.T) {
	const base = "2608468723537941485"
	ebs := func(f func(*BlockDevice)) func(*EC2NodeClass) {
		return func(nc *EC2NodeClass) { f(nc.Spec.BlockDeviceMappings[0].EBS) }
	}
	for _, tc := range []struct {
		name   string
		change func(*EC2NodeClass)
		want   string
	}{
		{"unchanged", func(*EC2NodeClass) {}, base},
		{"userData", func(nc *EC2NodeClass) { nc.Spec.UserData = ptr("userdata-test-2") }, "2153344579995979450"},
		{"a tag added", func(nc *EC2NodeClass) { nc.Spec.Tags["keyTag-test-3"] = "valueTag-test-3" }, "4608386791045313156"},
		{"context", func(nc *EC2NodeClass) { nc.Spec.Context = ptr("context-2") }, "11612053647989098410"},
		{"detailedMonitoring", func(nc *EC2NodeClass) { nc.Spec.DetailedMonitoring = ptr(true) }, "11845605438531206428"},
		{"instanceStorePolicy", func(nc *EC2NodeClass) { nc.Spec.InstanceStorePolicy = ptr(InstanceStorePolicyRAID0) }, "6430637013089544585"},
		{"associatePublicIPAddress", func(nc *EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = ptr(true) }, "6811176403923819181"},
		{"httpEndpoint", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPEndpoint = ptr("enabled") }, "8158886403801636337"},
		{"httpProtocolIPv6", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPProtocolIPv6 = ptr("enabled") }, "12355196004817691031"},
		{"httpPutResponseHopLimit", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPPutResponseHopLimit = ptr(int64(10)) }, "8968306366664488826"},
		{"httpTokens", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPTokens = ptr("required") }, "12408995450371615650"},
		{"deviceName", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].DeviceName = ptr("map-device-test-3") }, "13986335469721503441"},
		{"rootVolume", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].RootVolume = true }, "14242690863945643402"},
		{"deleteOnTermination", ebs(func(b *BlockDevice) { b.DeleteOnTermination = ptr(true) }), "12316454167870753581"},
		{"encrypted", ebs(func(b *BlockDevice) { b.Encrypted = ptr(true) }), "17753517657333560591"},
		{"iops", ebs(func(b *BlockDevice) { b.IOPS = ptr(int64(10)) }), "2249322442135400321"},
		{"kmsKeyID", ebs(func(b *BlockDevice) { b.KMSKeyID = ptr("test") }), "12259594419287406661"},
		{"snapshotID", ebs(func(b *BlockDevice) { b.SnapshotID = ptr("test") }), "1149563513090550380"},
		{"throughput", ebs(func(b *BlockDevice) { b.Throughput = ptr(int64(10)) }), "12068199760789564545"},
		{"volumeType", ebs(func(b *BlockDevice) { b.VolumeType = ptr("io1") }), "16361719363399715944"},
		{"volumeSize", ebs(func(b *BlockDevice) { b.VolumeSize = resource.NewScaledQuantity(10, resource.Giga) }), "3564293065344858862"},
		{"tcpEstablishedTimeout", func(nc *EC2NodeClass) {
			nc.Spec.ConnectionTracking = &ConnectionTracking{TCPEstablishedTimeout: ptr(int32(300))}
		}, "12177489405137904098"},
		{"udpStreamTimeout", func(nc *EC2NodeClass) {
			nc.Spec.ConnectionTracking = &ConnectionTracking{UDPStreamTimeout: ptr(int32(120))}
		}, "17567831983996427"},
		{"udpTimeout", func(nc *EC2NodeClass) { nc.Spec.ConnectionTracking = &ConnectionTracking{UDPTimeout: ptr(int32(45))} }, "5078825826133662844"},
		{"nestedVirtualization", func(nc *EC2NodeClass) { nc.Spec.CPUOptions = &CPUOptions{NestedVirtualization: ptr("enabled")} }, "17001101224536964682"},
		{"instanceProfile instead of role", func(nc *EC2NodeClass) { nc.Spec.Role = ""; nc.Spec.InstanceProfile = ptr("test-instance-profile") }, "3585768058063247698"},
		// Selectors drift by what they resolve to, not by their text.
		{"AMI selector", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Tags: map[string]string{"": "ami-test-value"}}}
		}, base},
		{"subnet selector", func(nc *EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{Tags: map[string]string{"subnet-test-key": "subnet-test-value"}}}
		}, base},
		{"security group selector", func(nc *EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{Tags: map[string]string{"security-group-test-key": "security-group-test-value"}}}
		}, base},
		{"ipPrefixCount", func(nc *EC2NodeClass) { nc.Spec.IPPrefixCount = ptr(int32(2)) }, base},
		{"block device mappings reordered", func(nc *EC2NodeClass) {
			m := nc.Spec.BlockDeviceMappings
			m[0], m[1] = m[1], m[0]
		}, base},
		{"status", func(nc *EC2NodeClass) { nc.Status.InstanceProfile = "p"; nc.Status.AMIs = []AMI{{ID: "ami-1"}} }, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := hashBase()
			tc.change(nc)
			if got := nc.Hash(testCABundle); got != tc.want {
				t.Errorf("hash = %s, want Karpenter's %s", got, tc.want)
			}
		})
	}
}

// TestEC2NodeClassHashOfStoredObjects hashes EC2NodeClasses as the API
// server stores them; the numbers are what Karpenter v1.14.1's
// EC2NodeClass.Hash returns for the same objects (with and without a CA
// bundle).
func TestEC2NodeClassHashOfStoredObjects(t *testing.T) {
	want := map[string][2]string{
		"default":                 {"1393503615070127504", "13268795794593449862"},
		"default-other-selectors": {"1393503615070127504", "13268795794593449862"},
		"bottlerocket":            {"5983019775075858556", "17903347387410315882"},
		"custom":                  {"2083029946057087496", "13230146262448281630"},
		"full":                    {"14634099946122242672", "6945754604540209254"},
		"full-reordered":          {"14634099946122242672", "6945754604540209254"},
	}
	classes := yamltest.Documents[EC2NodeClass](t, "testdata/hash/ec2nodeclasses.yaml")
	for _, nc := range classes {
		w, ok := want[nc.Name]
		if !ok {
			t.Fatalf("no expected hash for %s", nc.Name)
		}
		if got := nc.Hash(testCABundle); got != w[0] {
			t.Errorf("%s: hash = %s, want Karpenter's %s", nc.Name, got, w[0])
		}
		if got := nc.Hash(""); got != w[1] {
			t.Errorf("%s: hash without CA bundle = %s, want Karpenter's %s", nc.Name, got, w[1])
		}
	}
	if len(classes) != len(want) {
		t.Fatalf("decoded %d classes, want %d", len(classes), len(want))
	}
}
