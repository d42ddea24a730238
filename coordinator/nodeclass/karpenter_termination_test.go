package nodeclass_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/test/observe"
)

// Port of Karpenter's "NodeClass Termination" suite (suite_test.go): a
// deleted class waits for its NodeClaims, then its instance profiles (at
// its path, and Karpenter's legacy one) and launch templates are deleted
// and its finalizer removed; a failed clean-up keeps the class.

// launchTemplate makes a launch template as an administrator would,
// tagged for the cluster as Joiner tags its own and, unless class is "",
// for the class (the tags Joiner's clean-up looks for and its policy lets
// it delete).
func launchTemplate(t *testing.T, w *world, name, class string) {
	t.Helper()
	tags := []ec2types.Tag{{Key: aws.String(karpv1.TagLaunchTemplateCluster), Value: aws.String("test")},
		{Key: aws.String(karpv1.TagClusterPrefix + "test"), Value: aws.String("owned")}}
	if class != "" {
		tags = append(tags, ec2types.Tag{Key: aws.String(karpv1.TagNodeClass), Value: aws.String(class)})
	}
	if _, err := w.admin().EC2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{},
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}}); err != nil {
		t.Fatal(err)
	}
}

func TestClassTerminationAsKarpenter(t *testing.T) {
	nc := ec2NodeClass("default")
	legacy := joineraws.LegacyInstanceProfileName("test", "us-east-1", "default")
	iamCalls := func(w *world) int {
		return w.sim.Calls("GetInstanceProfile") + w.sim.Calls("DeleteInstanceProfile") + w.sim.Calls("RemoveRoleFromInstanceProfile")
	}
	for _, tc := range []struct {
		karpenter string
		setup     func(*worldSetup)
		class     func(*awsv1.EC2NodeClass)
		before    func(t *testing.T, w *world) // once the class resolved, before its deletion
		gone      bool                         // the class is gone after one pass
		after     func(t *testing.T, w *world)
	}{
		{karpenter: "should not delete the NodeClass if launch template deletion fails",
			before: func(t *testing.T, w *world) {
				launchTemplate(t, w, "lt-of-default", "default")
				w.faults.fail("DeleteLaunchTemplate", "ServiceUnavailable", 0)
			},
			after: func(t *testing.T, w *world) {
				if events := observe.EventsText(w.rec); !strings.Contains(events, "FailedCleanup") {
					t.Errorf("events %q, want FailedCleanup", events)
				}
				w.faults.clear("DeleteLaunchTemplate")
				w.step(time.Second)
				if w.class("default") != nil || len(w.sim.LaunchTemplateNames()) != 0 {
					t.Errorf("after the retry: class %v, launch templates %v", w.class("default") != nil, w.sim.LaunchTemplateNames())
				}
			}},
		{karpenter: "should not delete the launch template not associated with the nodeClass", gone: true,
			before: func(t *testing.T, w *world) { launchTemplate(t, w, "lt-of-the-cluster", "") },
			after: func(t *testing.T, w *world) {
				if got := w.sim.LaunchTemplateNames(); !slices.Equal(got, []string{"lt-of-the-cluster"}) {
					t.Errorf("launch templates %v", got)
				}
			}},
		{karpenter: "should succeed to delete the launch template", gone: true,
			before: func(t *testing.T, w *world) {
				launchTemplate(t, w, "lt-one", "default")
				launchTemplate(t, w, "lt-two", "default")
			},
			after: func(t *testing.T, w *world) {
				if got := w.sim.LaunchTemplateNames(); len(got) != 0 {
					t.Errorf("launch templates %v", got)
				}
			}},
		{karpenter: "should succeed to delete the instance profile with no NodeClaims", gone: true,
			before: func(t *testing.T, w *world) {
				if got := w.profiles(); !slices.Equal(got, []string{profileName(nc, "KarpenterNodeRole-test") + "=KarpenterNodeRole-test"}) {
					t.Fatalf("profiles %v", got)
				}
			},
			after: noProfiles},
		{karpenter: "should succeed to delete the instance profile when no roles exist with no NodeClaims", gone: true,
			before: func(t *testing.T, w *world) {
				name := w.class("default").Status.InstanceProfile
				if _, err := w.admin().IAM.RemoveRoleFromInstanceProfile(context.Background(), removeRole(name, "KarpenterNodeRole-test")); err != nil {
					t.Fatal(err)
				}
			},
			after: noProfiles},
		{karpenter: "should succeed to delete the NodeClass when the instance profile doesn't exist", gone: true,
			before: func(t *testing.T, w *world) {
				if _, err := w.admin().IAM.RemoveRoleFromInstanceProfile(context.Background(), removeRole(w.class("default").Status.InstanceProfile,
					"KarpenterNodeRole-test")); err != nil {
					t.Fatal(err)
				}
				if _, err := w.admin().IAM.DeleteInstanceProfile(context.Background(), deleteProfile(w.class("default").Status.InstanceProfile)); err != nil {
					t.Fatal(err)
				}
			},
			after: noProfiles},
		{karpenter: "should succeed to delete both legacy and current instance profiles if the NodeClass is deleted", gone: true,
			setup: withProfiles(sim.InstanceProfile{Name: legacy, Path: "/", Role: "fake-role", Tags: map[string]string{
				"kubernetes.io/cluster/test": "owned", "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": "us-east-1"}}),
			before: func(t *testing.T, w *world) {
				if got := w.profiles(); len(got) != 2 {
					t.Fatalf("profiles %v, want the legacy one and the class's", got)
				}
			},
			after: noProfiles},
		{karpenter: "should not call the IAM API when deleting a NodeClass with an instanceProfile specified", gone: true,
			setup: withProfiles(sim.InstanceProfile{Name: "test-instance-profile", Role: "fake-role"}),
			class: func(nc *awsv1.EC2NodeClass) {
				p := "test-instance-profile"
				nc.Spec.Role, nc.Spec.InstanceProfile = "", &p
			},
			after: func(t *testing.T, w *world) {
				if got := w.profiles(); !slices.Equal(got, []string{"test-instance-profile=fake-role"}) ||
					w.sim.Calls("DeleteInstanceProfile")+w.sim.Calls("RemoveRoleFromInstanceProfile") != 0 {
					t.Errorf("profiles %v, %d deletes, %d role removals", got, w.sim.Calls("DeleteInstanceProfile"), w.sim.Calls("RemoveRoleFromInstanceProfile"))
				}
			}},
		{karpenter: "should skip legacy instance profile cleanup when the synthesized name is not IAM-valid", gone: true,
			setup: func(ws *worldSetup) { ws.provider.Cluster = "aws:12345678910:eu-central-1:kubernetes" },
			class: func(nc *awsv1.EC2NodeClass) {
				p := "test-instance-profile"
				nc.Spec.Role, nc.Spec.InstanceProfile = "", &p
			},
			before: func(t *testing.T, w *world) {
				if n := iamCalls(w); n != 0 {
					t.Fatalf("%d IAM calls before the deletion", n)
				}
			},
			after: func(t *testing.T, w *world) {
				if n := iamCalls(w); n != 0 {
					t.Errorf("%d GetInstanceProfile, DeleteInstanceProfile and RemoveRoleFromInstanceProfile calls, want none", n)
				}
			}},
		{karpenter: "should skip instance profile cleanup in isolated VPCs", gone: true,
			setup: func(ws *worldSetup) { ws.provider.IsolatedVPC = true },
			after: func(t *testing.T, w *world) {
				if got := w.profiles(); len(got) != 1 || w.sim.Calls("DeleteInstanceProfile")+w.sim.Calls("RemoveRoleFromInstanceProfile") != 0 {
					t.Errorf("profiles %v (want the class's left), %d deletes", got, w.sim.Calls("DeleteInstanceProfile"))
				}
			}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := newWorld(t, func(ws *worldSetup) {
				if tc.setup != nil {
					tc.setup(ws)
				}
			})
			c := nc.DeepCopy()
			if tc.class != nil {
				tc.class(c)
			}
			w.apply(c)
			w.reconcile()
			if !slices.Contains(w.class("default").Finalizers, karpv1.NodeClassTerminationFinalizer) {
				t.Fatalf("finalizers %v", w.class("default").Finalizers)
			}
			if tc.before != nil {
				tc.before(t, w)
			}
			w.delete("default")
			w.step(time.Second)
			if gone := w.class("default") == nil; gone != tc.gone {
				t.Fatalf("class gone: %v, want %v", gone, tc.gone)
			}
			if tc.after != nil {
				tc.after(t, w)
			}
		})
	}
}

func noProfiles(t *testing.T, w *world) {
	t.Helper()
	if got := w.profiles(); len(got) != 0 {
		t.Errorf("profiles left: %v", got)
	}
}

func removeRole(profile, role string) *iam.RemoveRoleFromInstanceProfileInput {
	return &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(role)}
}

func deleteProfile(profile string) *iam.DeleteInstanceProfileInput {
	return &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(profile)}
}

// Karpenter's "should not delete the EC2NodeClass until all associated
// NodeClaims are terminated": the class and its profile stay while one of
// its NodeClaims does; Joiner says so with Karpenter's Event.
func TestClassWaitsForItsNodeClaimsAsKarpenter(t *testing.T) {
	w := newWorld(t)
	w.apply(ec2NodeClass("default"))
	w.reconcile()
	w.cache.ClaimList = []*karpv1.NodeClaim{claimWithProfile("a", ""), claimWithProfile("b", "")}
	w.delete("default")
	for _, left := range [][]*karpv1.NodeClaim{w.cache.ClaimList, w.cache.ClaimList[1:]} {
		w.cache.ClaimList = left
		w.step(time.Second)
		if w.class("default") == nil || len(w.profiles()) != 1 {
			t.Fatalf("with nodeclaims %d: class gone or profiles %v", len(left), w.profiles())
		}
	}
	if events := observe.EventsText(w.rec); !strings.Contains(events, "Waiting on NodeClaim termination for a, b") {
		t.Errorf("events %q", events)
	}
	w.cache.ClaimList = nil
	w.step(time.Second)
	if w.class("default") != nil || len(w.profiles()) != 0 {
		t.Errorf("after the last nodeclaim: class %v, profiles %v", w.class("default") != nil, w.profiles())
	}
}
