package aws_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	iampolicy "github.com/joiner-dev/joiner/packaging/iam"
)

// resolveStatus resolves nc and applies the result to its status, as the
// nodeclass loop does; it returns the InstanceProfileReady condition.
func resolveStatus(t *testing.T, e *env, nc *awsv1.EC2NodeClass) (cloud.Resolved, metav1.Condition) {
	t.Helper()
	r, err := e.provider.Resolve(context.Background(), nc)
	cloud.ApplyStatus(nc, r, err, metav1.Now())
	c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionInstanceProfileReady)
	if c == nil {
		t.Fatal("no InstanceProfileReady condition")
	}
	return r, *c
}

// TestInstanceProfileForRole: a class naming a role gets an instance
// profile named and pathed as Karpenter's, tagged for the cluster and
// holding the role, through the real SDK against the sim's IAM; it is
// reused (no second create), a profile of that name holding another role
// gets the class's role, a new role makes a new profile (running nodes
// keep theirs), a Karpenter-made profile in the status is kept, and
// finalizing the class deletes every profile at its path.
func TestInstanceProfileForRole(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nc := nodeClass()
	r, ready := resolveStatus(t, e, nc)
	name := joineraws.InstanceProfileName("test", "us-east-1", nc, "KarpenterNodeRole-test")
	if ready.Status != metav1.ConditionTrue || r.InstanceProfile != name || nc.Status.InstanceProfile != name {
		t.Fatalf("InstanceProfileReady %+v, profile %q (status %q), want %q", ready, r.InstanceProfile, nc.Status.InstanceProfile, name)
	}
	if !strings.HasPrefix(name, "test_") {
		t.Errorf("name %q: want <cluster>_<hash>", name)
	}
	prof := e.sim.InstanceProfiles()[name]
	wantTags := map[string]string{"kubernetes.io/cluster/test": "owned", "eks:eks-cluster-name": "test",
		"karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": "us-east-1"}
	if prof.Path != "/karpenter/us-east-1/test/uid-default/" || prof.Role != "KarpenterNodeRole-test" || !maps.Equal(prof.Tags, wantTags) {
		t.Errorf("profile %+v", prof)
	}
	if _, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue || e.sim.Calls("CreateInstanceProfile") != 1 {
		t.Errorf("second resolution: %+v, %d creates", ready, e.sim.Calls("CreateInstanceProfile"))
	}

	// Launches carry the profile (and pass iam:PassRole on its role).
	req := e.spec(t, "profile", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	e.launch(t, req)
	if lt, _ := e.sim.LastRequest("CreateLaunchTemplate"); lt.Get("LaunchTemplateData.IamInstanceProfile.Name") != name {
		t.Errorf("launch template profile %q, want %q", lt.Get("LaunchTemplateData.IamInstanceProfile.Name"), name)
	}

	// Someone swapped the role of Joiner's profile: the class's comes back.
	iamc := e.clientsAs("admin").IAM
	e.sim.SetAccess(sim.Access{Callers: map[string]sim.Caller{"admin": {Unrestricted: true}}})
	if err := swapRole(ctx, iamc, name, "KarpenterNodeRole-test", "Intruder"); err != nil {
		t.Fatal(err)
	}
	if _, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue || e.sim.InstanceProfiles()[name].Role != "KarpenterNodeRole-test" {
		t.Errorf("after the role was swapped: %+v, role %q", ready, e.sim.InstanceProfiles()[name].Role)
	}

	// A new role: a new profile; the old one keeps its role.
	nc.Spec.Role = "path/OtherRole"
	r, ready = resolveStatus(t, e, nc)
	other := joineraws.InstanceProfileName("test", "us-east-1", nc, "OtherRole")
	if ready.Status != metav1.ConditionTrue || r.InstanceProfile != other || other == name ||
		e.sim.InstanceProfiles()[other].Role != "OtherRole" || e.sim.InstanceProfiles()[name].Role != "KarpenterNodeRole-test" {
		t.Errorf("role change: %+v, profile %q, profiles %v", ready, r.InstanceProfile, e.sim.InstanceProfiles())
	}

	// Karpenter's profile of the class (its name is random) is kept.
	karpenter := sim.InstanceProfile{Name: "test_12345", Path: joineraws.InstanceProfilePath("us-east-1", "test", nc), Role: "OtherRole", Tags: wantTags}
	if err := createProfile(ctx, iamc, karpenter); err != nil {
		t.Fatal(err)
	}
	nc.Status.InstanceProfile = karpenter.Name
	creates := e.sim.Calls("CreateInstanceProfile")
	if r, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue || r.InstanceProfile != karpenter.Name ||
		e.sim.Calls("CreateInstanceProfile") != creates {
		t.Errorf("Karpenter's profile in the status: %+v, profile %q", ready, r.InstanceProfile)
	}

	// spec.instanceProfile is used as given, without IAM calls.
	calls := e.sim.Calls("GetInstanceProfile")
	given := nodeClass()
	given.Spec.Role, given.Spec.InstanceProfile = "", aws.String("operator-made")
	if r, ready := resolveStatus(t, e, given); ready.Status != metav1.ConditionTrue || r.InstanceProfile != "operator-made" ||
		e.sim.Calls("GetInstanceProfile") != calls {
		t.Errorf("spec.instanceProfile: %+v, %q", ready, r.InstanceProfile)
	}

	// Finalizing deletes the class's profiles (Karpenter's too) and launch
	// templates; again is fine.
	e.sim.SetAccess(sim.Access{})
	for i := 0; i < 2; i++ {
		if err := e.provider.FinalizeNodeClass(ctx, nc); err != nil {
			t.Fatalf("FinalizeNodeClass %d: %v", i, err)
		}
	}
	if left := e.sim.InstanceProfiles(); len(left) != 0 {
		t.Errorf("profiles left: %v", left)
	}
	if left := e.sim.LaunchTemplateNames(); len(left) != 0 {
		t.Errorf("launch templates left: %v", left)
	}
}

// TestInstanceProfileNotReady: InstanceProfileReady is False with IAM's
// error when the role does not exist (the profile is made, then kept for
// the next try), and turns True once the role exists; when the policy
// refuses the call it is left as it was (Unknown on a new class), as
// Karpenter's reconciler returns the error, which names the refusal.
func TestInstanceProfileNotReady(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.IAM.Roles = []string{"KarpenterNodeRole-test"}
	e := newEnvWith(t, cfg)
	nc := nodeClass()
	nc.Spec.Role = "Missing"
	_, ready := resolveStatus(t, e, nc)
	if ready.Status != metav1.ConditionFalse || ready.Reason != "InstanceProfileNotFound" ||
		!strings.Contains(ready.Message, "NoSuchEntity: The role with name Missing cannot be found.") || strings.Contains(ready.Message, "RequestID") {
		t.Errorf("missing role: %+v", ready)
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v", c)
	}
	nc.Spec.Role = "KarpenterNodeRole-test"
	if _, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue {
		t.Errorf("existing role: %+v", ready)
	}

	// A policy without IAM grants.
	e.sim.SetAccess(sim.Access{Policy: []byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["ec2:Describe*","ssm:GetParameter"],"Resource":"*"}]}`)})
	other := nodeClass()
	other.Name, other.UID = "other", "uid-other"
	_, err := e.provider.Resolve(context.Background(), other)
	_, ready = resolveStatus(t, e, other)
	if ready.Status != metav1.ConditionUnknown || ready.Reason != "AwaitingReconciliation" || err == nil ||
		!strings.Contains(err.Error(), "AccessDenied: User: ") || !strings.Contains(err.Error(), "iam:GetInstanceProfile") {
		t.Errorf("denied: %+v, error %v", ready, err)
	}
}

// TestLaunchTagsAsKarpenter: instances, volumes and the fleet carry
// Karpenter's tags (eks:eks-cluster-name, karpenter.sh/nodepool,
// karpenter.k8s.aws/ec2nodeclass, kubernetes.io/cluster/<c>) with Joiner's
// launch ID and attempt; launch templates and their network interfaces
// carry Karpenter's tags and joiner.io/cluster; spot launches use a
// template that tags spot requests, on-demand ones one that does not.
func TestLaunchTagsAsKarpenter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	karpenter := map[string]string{"kubernetes.io/cluster/test": "owned", "eks:eks-cluster-name": "test",
		"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default", "team": "platform"}
	withAll := func(extra map[string]string) map[string]string {
		out := maps.Clone(karpenter)
		maps.Copy(out, extra)
		return out
	}
	for _, capType := range []string{"on-demand", "spot"} {
		req := e.spec(t, capType, []cloud.Candidate{cand("m5.large", "us-east-1a", capType)})
		if _, err := e.provider.Launch(ctx, req); err != nil {
			t.Fatalf("%s: %v", capType, err)
		}
		fleet, _ := e.sim.LastRequest("CreateFleet")
		specs := fleet.TagSpecs("TagSpecification")
		instance := withAll(map[string]string{"Name": req.Spec.NodeClaim, "karpenter.sh/nodeclaim": req.Spec.NodeClaim,
			"joiner.io/launch-id": req.LaunchID, "joiner.io/attempt": "1"})
		for _, kind := range []string{"instance", "volume", "fleet"} {
			if !maps.Equal(specs[kind], instance) {
				t.Errorf("%s: %s tags %v, want %v", capType, kind, specs[kind], instance)
			}
		}
		lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
		if got, want := lt.TagSpecs("TagSpecification")["launch-template"], withAll(map[string]string{"joiner.io/cluster": "test"}); !maps.Equal(got, want) {
			t.Errorf("%s: launch template tags %v, want %v", capType, got, want)
		}
		data := lt.Struct("LaunchTemplateData").TagSpecs("TagSpecification")
		if !maps.Equal(data["network-interface"], karpenter) {
			t.Errorf("%s: network interface tags %v", capType, data["network-interface"])
		}
		if spot, ok := data["spot-instances-request"]; (capType == "spot") != ok || (ok && !maps.Equal(spot, karpenter)) {
			t.Errorf("%s: spot request tags %v (present %v)", capType, spot, ok)
		}
	}
	if n := len(e.sim.LaunchTemplateNames()); n != 2 {
		t.Errorf("%d launch templates, want one per capacity type", n)
	}
}

// TestShippedPolicyRefusesUntaggedLaunch: under the sim's default policy
// (the shipped one) a CreateFleet from Joiner's own launch template whose
// instances miss eks:eks-cluster-name fails with UnauthorizedOperation,
// as it would on AWS; with the tag it launches.
func TestShippedPolicyRefusesUntaggedLaunch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	req := e.spec(t, "untagged", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	e.launch(t, req)
	fleet, _ := e.sim.LastRequest("CreateFleet")
	tags := fleet.TagSpecs("TagSpecification")["instance"]
	c := e.clients().EC2
	// launch sends Joiner's request with the instances tagged instanceTags.
	launch := func(token string, instanceTags map[string]string) *ec2.CreateFleetOutput {
		out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String(token),
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
					LaunchTemplateName: aws.String(e.sim.LaunchTemplateNames()[0]), Version: aws.String("$Latest")},
				Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String("subnet-0sim0001")}}}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
				DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: joineraws.EC2Tags(instanceTags)},
				{ResourceType: ec2types.ResourceTypeVolume, Tags: joineraws.EC2Tags(tags)}, {ResourceType: ec2types.ResourceTypeFleet, Tags: joineraws.EC2Tags(tags)}},
		})
		if err != nil {
			t.Fatalf("CreateFleet %s: %v", token, err)
		}
		return out
	}
	without := maps.Clone(tags)
	delete(without, "eks:eks-cluster-name")
	out := launch("without", without)
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "UnauthorizedOperation" ||
		!strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "ec2:RunInstances on resource: arn:aws:ec2:us-east-1:123456789012:instance/*") {
		t.Errorf("launch without eks:eks-cluster-name: %+v", out.Errors)
	}
	if out := launch("with", tags); len(out.Instances) != 1 {
		t.Errorf("launch with Joiner's tags: %+v", out.Errors)
	}
	if e.sim.Denied("ec2:RunInstances") != 1 {
		t.Errorf("denied RunInstances = %d, want 1", e.sim.Denied("ec2:RunInstances"))
	}
}

// TestKarpenterV1PolicyCoversJoiner: under Karpenter v1.14's controller
// policy (its CloudFormation template's statements, testdata), which
// users migrating from Karpenter keep, Joiner resolves a class (making its
// instance profile), launches on-demand and spot, terminates, deletes
// unused launch templates and finalizes the class.
func TestKarpenterV1PolicyCoversJoiner(t *testing.T) {
	doc, err := os.ReadFile("testdata/karpenter-v1-controller-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.IAM.Access = sim.Access{Policy: doc, Cluster: "test", NodeRole: "KarpenterNodeRole-test"}
	if err := sim.ValidateAccess(cfg.IAM.Access, cfg.Region); err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg)
	ctx := context.Background()
	nc := nodeClass()
	if _, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue {
		t.Fatalf("InstanceProfileReady %+v", ready)
	}
	for _, capType := range []string{"on-demand", "spot"} {
		inst, err := e.provider.Launch(ctx, e.spec(t, "karpenter-"+capType, []cloud.Candidate{cand("m5.large", "us-east-1b", capType)}))
		if err != nil {
			t.Fatalf("%s launch under Karpenter's policy: %v", capType, err)
		}
		if err := e.provider.Terminate(ctx, inst.ID); err != nil {
			t.Fatalf("terminate under Karpenter's policy: %v", err)
		}
	}
	e.clock.Add(2 * time.Hour)
	if deleted, err := e.provider.DeleteUnusedLaunchTemplates(ctx); err != nil || len(deleted) != 2 {
		t.Fatalf("DeleteUnusedLaunchTemplates = %v, %v", deleted, err)
	}
	if err := e.provider.FinalizeNodeClass(ctx, nc); err != nil || len(e.sim.InstanceProfiles()) != 0 {
		t.Fatalf("FinalizeNodeClass: %v, profiles left %v", err, e.sim.InstanceProfiles())
	}
	for _, a := range []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "iam:CreateInstanceProfile", "iam:PassRole"} {
		if n := e.sim.Denied(a); n != 0 {
			t.Errorf("%s denied %d times", a, n)
		}
	}
}

// swapRole replaces a profile's role as an administrator would.
func swapRole(ctx context.Context, c *iam.Client, profile, from, to string) error {
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
		InstanceProfileName: aws.String(profile), RoleName: aws.String(from)}); err != nil {
		return err
	}
	_, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(to)})
	return err
}

// createProfile makes a profile holding its role.
func createProfile(ctx context.Context, c *iam.Client, p sim.InstanceProfile) error {
	var tags []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(p.Tags)) {
		tags = append(tags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(p.Tags[k])})
	}
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(p.Name), Path: aws.String(p.Path),
		Tags: tags}); err != nil {
		return err
	}
	_, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(p.Name), RoleName: aws.String(p.Role)})
	return err
}

// TestFinalizeInIsolatedVPC: with IsolatedVPC (no IAM endpoint) finalizing
// a class makes no IAM call and leaves its instance profiles, as
// Karpenter's finalizer skips their clean-up; its launch templates go.
func TestFinalizeInIsolatedVPC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nc := nodeClass()
	if _, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue {
		t.Fatalf("InstanceProfileReady %+v", ready)
	}
	e.launch(t, e.spec(t, "isolated", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}))
	// IAM cannot be reached: every IAM call would fail.
	e.sim.SetAccess(sim.Access{Policy: []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}`)})
	p := e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion, IsolatedVPC: true})
	calls := e.sim.Calls("ListInstanceProfiles") + e.sim.Calls("GetInstanceProfile")
	if err := p.FinalizeNodeClass(ctx, nc); err != nil {
		t.Fatalf("FinalizeNodeClass: %v", err)
	}
	if n := e.sim.Calls("ListInstanceProfiles") + e.sim.Calls("GetInstanceProfile") - calls; n != 0 || e.sim.Denied("iam:ListInstanceProfiles") != 0 {
		t.Errorf("%d IAM calls, want none", n)
	}
	if len(e.sim.InstanceProfiles()) != 1 || len(e.sim.LaunchTemplateNames()) != 0 {
		t.Errorf("profiles %v (want the class's left), launch templates %v (want none)", e.sim.InstanceProfiles(), e.sim.LaunchTemplateNames())
	}
}

// TestLegacyInstanceProfile: a profile Karpenter made before v1.7
// (CLUSTER_<hash of region and class name> at "/") in status.instanceProfile
// is kept while it holds the class's role, whatever its path, as Karpenter
// v1.14 keeps it; finalizing the class deletes it too. Under Joiner's own
// policy (which manages profiles at /karpenter/ only) the refused deletion
// is logged and the class is finalized anyway.
func TestLegacyInstanceProfile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nc := nodeClass()
	legacy := joineraws.LegacyInstanceProfileName("test", "us-east-1", nc.Name)
	if !regexp.MustCompile(`^test_[0-9]+$`).MatchString(legacy) {
		t.Fatalf("legacy name %q, want test_<number>", legacy)
	}
	e.sim.SetAccess(sim.Access{Callers: map[string]sim.Caller{"admin": {Unrestricted: true}}})
	tags := map[string]string{"kubernetes.io/cluster/test": "owned", "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": "us-east-1"}
	if err := createProfile(ctx, e.clientsAs("admin").IAM, sim.InstanceProfile{Name: legacy, Path: "/", Role: "KarpenterNodeRole-test", Tags: tags}); err != nil {
		t.Fatal(err)
	}
	nc.Status.InstanceProfile = legacy
	creates := e.sim.Calls("CreateInstanceProfile")
	if r, ready := resolveStatus(t, e, nc); ready.Status != metav1.ConditionTrue || r.InstanceProfile != legacy || e.sim.Calls("CreateInstanceProfile") != creates {
		t.Fatalf("legacy profile in the status: %+v, profile %q, %d creates; want it kept", ready, r.InstanceProfile, e.sim.Calls("CreateInstanceProfile")-creates)
	}
	nc.Spec.Role = "OtherRole" // a new role: a profile of Joiner's at the class's path
	if r, _ := resolveStatus(t, e, nc); r.InstanceProfile == legacy || len(e.sim.InstanceProfiles()) != 2 {
		t.Fatalf("role change: profile %q, profiles %v", r.InstanceProfile, e.sim.InstanceProfiles())
	}

	// A policy that may not delete it (Joiner's before it allowed
	// CLUSTER_* profiles): the class's path profile goes, the legacy one
	// stays, and the class is not held.
	e.sim.SetAccess(sim.Access{Policy: withoutStatement(t, iampolicy.ControllerPolicy(), "DeleteLegacyClusterInstanceProfiles")})
	if err := e.provider.FinalizeNodeClass(ctx, nc); err != nil {
		t.Fatalf("FinalizeNodeClass under a policy without the legacy statement: %v", err)
	}
	if left := e.sim.InstanceProfiles(); len(left) != 1 || left[legacy].Name == "" {
		t.Errorf("profiles left %v, want the legacy one", left)
	}
	// Joiner's policy, as Karpenter's v1 policy, allows it: it goes.
	e.sim.SetAccess(sim.Access{})
	if err := e.provider.FinalizeNodeClass(ctx, nc); err != nil {
		t.Fatalf("FinalizeNodeClass under Joiner's policy: %v", err)
	}
	if left := e.sim.InstanceProfiles(); len(left) != 0 {
		t.Errorf("profiles left %v", left)
	}
}

// withoutStatement is a policy document without the statement of that Sid.
func withoutStatement(t *testing.T, doc []byte, sid string) []byte {
	t.Helper()
	var pol map[string]any
	if err := json.Unmarshal(doc, &pol); err != nil {
		t.Fatal(err)
	}
	stmts, _ := pol["Statement"].([]any)
	kept := stmts[:0]
	for _, st := range stmts {
		if m, _ := st.(map[string]any); m["Sid"] != sid {
			kept = append(kept, st)
		}
	}
	if len(kept) == len(stmts) {
		t.Fatalf("no statement %s", sid)
	}
	pol["Statement"] = kept
	out, err := json.Marshal(pol)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
