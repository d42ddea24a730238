package nodeclass_test

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Port of Karpenter's "NodeClass Hash Controller" suite
// (nodeclass/hash/suite_test.go): the karpenter.k8s.aws/ec2nodeclass-hash
// and -hash-version annotations of a class, and of its NodeClaims when the
// class's recorded hash version is not the current one. The hash itself
// (Karpenter's numbers) is pinned by api/aws/v1's hash tests.

const caBundle = "ca-bundle"

// wantHash is the hash the loop writes for nc.
func wantHash(nc *awsv1.EC2NodeClass, ca string) string {
	c := nc.DeepCopy()
	c.SetDefaults()
	return c.Hash(ca)
}

func hashWorld(t *testing.T, ca string) *world {
	return newWorld(t, func(ws *worldSetup) { ws.loop.CABundle = ca })
}

// Karpenter's table "should update the drift hash when static field is
// updated".
func TestHashOfStaticFieldsAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		entry  string
		change func(*awsv1.EC2NodeClass)
	}{
		{"UserData Drift", func(nc *awsv1.EC2NodeClass) { nc.Spec.UserData = new("userdata-test-2") }},
		{"Tags Drift", func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"keyTag-test-3": "valueTag-test-3"} }},
		{"BlockDeviceMappings Drift", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: new("map-device-test-3")}}
		}},
		{"DetailedMonitoring Drift", func(nc *awsv1.EC2NodeClass) { nc.Spec.DetailedMonitoring = new(true) }},
		{"MetadataOptions Drift", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPEndpoint: new("disabled")}
		}},
		{"Context Drift", func(nc *awsv1.EC2NodeClass) { nc.Spec.Context = new("context-2") }},
		{"CPUOptions Drift", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: new("enabled")}
		}},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			w := hashWorld(t, caBundle)
			nc := ec2NodeClass("default")
			w.apply(nc)
			w.reconcile()
			first := w.class("default").Annotations[karpv1.AnnotationEC2NodeClassHash]
			if first != wantHash(nc, caBundle) {
				t.Fatalf("hash %q, want %q", first, wantHash(nc, caBundle))
			}
			tc.change(nc)
			w.apply(nc)
			w.step(time.Second)
			second := w.class("default").Annotations[karpv1.AnnotationEC2NodeClassHash]
			if second != wantHash(nc, caBundle) || second == first {
				t.Errorf("hash after the change %q (before %q), want %q", second, first, wantHash(nc, caBundle))
			}
		})
	}
}

// Karpenter's "should update the drift hash when the CA bundle changes"
// (a coordinator started with another CA bundle) and "should not update
// the drift hash when dynamic field is updated".
func TestHashOfCABundleAndSelectorsAsKarpenter(t *testing.T) {
	t.Run("should update the drift hash when the CA bundle changes", func(t *testing.T) {
		w := hashWorld(t, caBundle)
		nc := ec2NodeClass("default")
		w.apply(nc)
		w.reconcile()
		other := hashWorld(t, "new-ca-bundle")
		other.cache.ClassList = w.cache.ClassList
		other.reconcile()
		got := other.class("default").Annotations[karpv1.AnnotationEC2NodeClassHash]
		if got != wantHash(nc, "new-ca-bundle") || got == wantHash(nc, caBundle) {
			t.Errorf("hash %q, want %q", got, wantHash(nc, "new-ca-bundle"))
		}
	})
	t.Run("should not update the drift hash when dynamic field is updated", func(t *testing.T) {
		w := hashWorld(t, caBundle)
		nc := ec2NodeClass("default")
		w.apply(nc)
		w.reconcile()
		first := w.class("default").Annotations[karpv1.AnnotationEC2NodeClassHash]
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-0sim0001"}}
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0sim0001"}}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0sim2023x86"}}
		nc.Spec.AMIFamily = new(awsv1.AMIFamilyAL2023) // an id term needs a family; al2023@latest implied the same
		w.apply(nc)
		w.step(time.Second)
		if !w.published("default") {
			t.Fatalf("class not ready: %+v", w.class("default").Status.Conditions)
		}
		if got := w.class("default").Annotations[karpv1.AnnotationEC2NodeClassHash]; got != first {
			t.Errorf("hash %q after selector changes, want %q unchanged", got, first)
		}
	})
}

// The hash-version cases: a class whose recorded hash version is not the
// current one (written by another Karpenter or Joiner version) gets the
// current hash and version; so do its NodeClaims of another version, but
// a drifted one keeps its hash (Karpenter cannot tell whether it is still
// drifted), and NodeClaims of the current version are left.
func TestHashVersionAsKarpenter(t *testing.T) {
	claim := func(version string, drifted bool) *karpv1.NodeClaim {
		c := claimWithProfile("claim", "")
		c.Annotations[karpv1.AnnotationEC2NodeClassHash] = "123456"
		c.Annotations[karpv1.AnnotationEC2NodeClassHashVersion] = version
		if drifted {
			c.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "Drifted"}}
		}
		return c
	}
	nc := ec2NodeClass("default")
	current := wantHash(nc, caBundle)
	for _, tc := range []struct {
		karpenter    string
		classVersion string
		claim        *karpv1.NodeClaim // nil: none
		wantClaim    map[string]string
	}{
		{karpenter: "should update ec2nodeclass-hash-version annotation when the ec2nodeclass-hash-version on the NodeClass does not match with the controller hash version",
			classVersion: "test"},
		{karpenter: "should update ec2nodeclass-hash-versions on all NodeClaims when the ec2nodeclass-hash-version does not match with the controller hash version",
			classVersion: "test", claim: claim("test", false),
			wantClaim: map[string]string{karpv1.AnnotationEC2NodeClassHash: current, karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}},
		{karpenter: "should not update ec2nodeclass-hash on all NodeClaims when the ec2nodeclass-hash-version matches the controller hash version",
			classVersion: "test-version", claim: claim(awsv1.EC2NodeClassHashVersion, false),
			wantClaim: map[string]string{karpv1.AnnotationEC2NodeClassHash: "123456", karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}},
		{karpenter: "should not update ec2nodeclass-hash on the NodeClaim if it's drifted and the ec2nodeclass-hash-version does not match the controller hash version",
			classVersion: "test", claim: claim("test", true),
			wantClaim: map[string]string{karpv1.AnnotationEC2NodeClassHash: "123456", karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := hashWorld(t, caBundle)
			c := nc.DeepCopy()
			c.Annotations = map[string]string{karpv1.AnnotationEC2NodeClassHash: "abceduefed", karpv1.AnnotationEC2NodeClassHashVersion: tc.classVersion}
			w.apply(c)
			if tc.claim != nil {
				w.cache.ClaimList = []*karpv1.NodeClaim{tc.claim}
			}
			w.reconcile()
			got := w.class("default").Annotations
			if got[karpv1.AnnotationEC2NodeClassHash] != current || got[karpv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
				t.Errorf("class annotations %v, want hash %s version %s", got, current, awsv1.EC2NodeClassHashVersion)
			}
			if tc.claim == nil {
				return
			}
			gotClaim := map[string]string{}
			for _, k := range []string{karpv1.AnnotationEC2NodeClassHash, karpv1.AnnotationEC2NodeClassHashVersion} {
				gotClaim[k] = w.cache.ClaimList[0].Annotations[k]
			}
			if !maps.Equal(gotClaim, tc.wantClaim) {
				t.Errorf("nodeclaim annotations %v, want %v", gotClaim, tc.wantClaim)
			}
		})
	}
}
