package aws_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/test/fakeclock"
)

// TestInstanceProfileNotYetPropagated: EC2 does not know an instance
// profile for seconds after IAM made it; a launch with it then fails with
// EC2's "Invalid IAM Instance Profile name", which the provider reports as
// rejected (nothing made: the launcher tries a new attempt after its
// backoff), not as an invalid spec (given up); the next attempt, once EC2
// knows the profile, launches.
func TestInstanceProfileNotYetPropagated(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.IAM.PropagationDelay = sim.Duration{Duration: 10 * time.Second}
	simClock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnvOn(t, sim.New(sim.Options{Config: cfg, Now: simClock.Now}))
	ctx := context.Background()
	req := e.spec(t, "fresh", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	if req.Spec.InstanceProfile == "" || e.sim.Calls("CreateInstanceProfile") != 1 {
		t.Fatalf("no instance profile made for the role: %q", req.Spec.InstanceProfile)
	}
	_, err := e.provider.Launch(ctx, req)
	if !errors.Is(err, cloud.ErrRejected) || errors.Is(err, cloud.ErrInvalidSpec) ||
		!strings.Contains(err.Error(), "instance profile \""+req.Spec.InstanceProfile+"\" unknown to EC2") {
		t.Fatalf("launch before the profile propagated: %v, want rejected (retried), not an invalid spec", err)
	}
	simClock.Add(10 * time.Second)
	req.Attempt = 2
	if inst := e.launch(t, req); inst.ID == "" {
		t.Errorf("no instance after the profile propagated")
	}

	// A profile that does not exist reads the same (EC2 cannot tell).
	missing := e.spec(t, "missing", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	missing.Spec.InstanceProfile = "no-such-profile"
	if _, err := e.provider.Launch(ctx, missing); !errors.Is(err, cloud.ErrRejected) || errors.Is(err, cloud.ErrInvalidSpec) {
		t.Errorf("launch with a missing profile: %v", err)
	}
}

// TestUserDataTooLarge: EC2 refuses user data over 16384 bytes with
// InvalidUserData.Malformed; the launch fails as an invalid spec (the same
// user data fails the same way) naming the size.
func TestUserDataTooLarge(t *testing.T) {
	e := newEnv(t)
	req := e.spec(t, "big", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	req.Spec.UserData = []byte("#!/bin/bash\n" + strings.Repeat("#", 16384))
	_, err := e.provider.Launch(context.Background(), req)
	if !errors.Is(err, cloud.ErrInvalidSpec) || !strings.Contains(err.Error(), fmt.Sprintf("user data of %d bytes exceeds EC2's limit of 16384 bytes", len(req.Spec.UserData))) {
		t.Errorf("launch with %d bytes of user data: %v, want an invalid spec naming the size", len(req.Spec.UserData), err)
	}
}

// TestMalformedInstanceID: EC2 answers an ID that cannot be an instance's
// with InvalidInstanceID.Malformed; such an instance is gone: Get says not
// found and Terminate has nothing to do.
func TestMalformedInstanceID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"i-nope", "i-0123456789abcdef", "node-1"} {
		if _, err := e.provider.Get(ctx, id); !errors.Is(err, cloud.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want not found", id, err)
		}
		if err := e.provider.Terminate(ctx, id); err != nil {
			t.Errorf("Terminate(%s) = %v", id, err)
		}
	}
	if _, err := e.provider.Get(ctx, "i-0123456789abcdef0"); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("Get of an unknown instance = %v, want not found", err)
	}
}

// TestSpotOfferingWithoutPrice: AWS has no spot price for many type and
// zone pairs; once the spot price history has loaded, those spot
// offerings are unavailable (Karpenter's), while before it they carry the
// modelled price and stay available.
func TestSpotOfferingWithoutPrice(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.NoSpotPrice = []sim.TypeZone{{InstanceType: "m5.large", Zone: "us-east-1b"}, {InstanceType: "c5.large"}}
	e := newEnvWith(t, cfg)
	available := func(name, zone, capacityType string) bool {
		t.Helper()
		for _, o := range joineraws.InstanceTypeOf(t, e.provider, nil, name).Offerings {
			if o.Zone == zone && o.CapacityType == capacityType {
				return o.Available
			}
		}
		t.Fatalf("no %s offering of %s in %s", capacityType, name, zone)
		return false
	}
	if !available("m5.large", "us-east-1b", karpv1.CapacityTypeSpot) || !available("c5.large", "us-east-1a", karpv1.CapacityTypeSpot) {
		t.Error("spot offerings unavailable before the spot price history loaded")
	}
	if err := e.provider.RefreshSpotPrices(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, zone, capacityType string
		want                     bool
	}{
		{"m5.large", "us-east-1b", karpv1.CapacityTypeSpot, false},
		{"m5.large", "us-east-1a", karpv1.CapacityTypeSpot, true},
		{"c5.large", "us-east-1a", karpv1.CapacityTypeSpot, false},
		{"c5.large", "us-east-1c", karpv1.CapacityTypeSpot, false},
		{"c5.large", "us-east-1a", karpv1.CapacityTypeOnDemand, true},
		{"m5.large", "us-east-1b", karpv1.CapacityTypeOnDemand, true},
	} {
		if got := available(tc.name, tc.zone, tc.capacityType); got != tc.want {
			t.Errorf("%s %s in %s available = %v, want %v", tc.name, tc.capacityType, tc.zone, got, tc.want)
		}
	}
}

// TestLaunchTemplatesPaged: a class's launch templates are listed a page
// of 200 at a time (Karpenter's), every page before any is deleted, so
// deleting the class's templates and hydrating the cache see all of them.
func TestLaunchTemplatesPaged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.sim.SetAccess(sim.Access{Callers: map[string]sim.Caller{"admin": {Unrestricted: true}}})
	admin := e.clientsAs("admin").EC2
	const ours = 205
	for i := range ours + 3 {
		class := "default"
		if i >= ours {
			class = "other"
		}
		tags := joineraws.EC2Tags(map[string]string{karpv1.TagLaunchTemplateCluster: "test", karpv1.TagClusterPrefix + "test": "owned",
			karpv1.TagEKSClusterName: "test", karpv1.TagNodePool: "default", karpv1.TagNodeClass: class})
		if _, err := admin.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(fmt.Sprintf("joiner-%03d", i)),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0sim2023x86")},
			TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.sim.SetAccess(sim.Access{})
	if err := e.provider.HydrateLaunchTemplates(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(e.provider.LaunchTemplates()); got != ours+3 {
		t.Errorf("hydrated %d launch templates, want %d", got, ours+3)
	}
	calls := e.sim.Calls("DescribeLaunchTemplates")
	if err := e.provider.DeleteLaunchTemplatesFor(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	last, _ := e.sim.LastRequest("DescribeLaunchTemplates")
	if got := e.sim.Calls("DescribeLaunchTemplates") - calls; got != 2 || last.Get("MaxResults") != "200" || last.Get("NextToken") == "" {
		t.Errorf("%d DescribeLaunchTemplates calls, the last %v: want two pages of 200", got, last.Params)
	}
	if left := e.sim.LaunchTemplateNames(); len(left) != 3 || left[0] != fmt.Sprintf("joiner-%03d", ours) {
		t.Errorf("launch templates left: %d %v, want the other class's 3", len(left), left)
	}
}

// TestTooManyTags: EC2 takes at most 50 tags on a resource; a class whose
// tags with the ones Joiner adds are more fails its launch as an invalid
// spec (the same tags fail the same way), not as a rejection retried
// until the launch times out.
func TestTooManyTags(t *testing.T) {
	e := newEnv(t)
	req := e.spec(t, "tags", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	for i := range 46 {
		req.Spec.Tags[fmt.Sprintf("team-%02d", i)] = "x"
	}
	_, err := e.provider.Launch(context.Background(), req)
	if !errors.Is(err, cloud.ErrInvalidSpec) || errors.Is(err, cloud.ErrRejected) || !strings.Contains(err.Error(), "TagLimitExceeded") {
		t.Errorf("launch with %d class tags: %v, want an invalid spec", len(req.Spec.Tags), err)
	}
}
