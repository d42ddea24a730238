package sim

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
)

// errOf is the error of a call's results.
func errOf[T any](_ T, err error) error { return err }

// TestIAMInstanceProfiles drives the sim's IAM through the real SDK
// (unrestricted caller): IAM's shapes and error codes for instance
// profiles and roles.
func TestIAMInstanceProfiles(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IAM.Roles = []string{"node", "other"}
	cfg.IAM.InstanceProfiles = []InstanceProfile{{Name: "made-by-hand", Role: "node"}}
	cfg.IAM.Unrestricted = true
	srv := httptest.NewServer(New(Options{Config: cfg}).Handler())
	t.Cleanup(srv.Close)
	c := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("admin", "x", "")})
	ctx := context.Background()
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	name := aws.String("p1")
	created, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: name, Path: aws.String("/karpenter/x/"),
		Tags: []iamtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := created.InstanceProfile; aws.ToString(p.Arn) != "arn:aws:iam::123456789012:instance-profile/karpenter/x/p1" ||
		aws.ToString(p.Path) != "/karpenter/x/" || len(p.Roles) != 0 || len(p.Tags) != 1 || p.CreateDate == nil ||
		len(aws.ToString(p.InstanceProfileId)) != 21 {
		t.Errorf("created %+v", p)
	}
	steps := []struct {
		name string
		call func() error
		want string
	}{
		{"create again", func() error {
			return errOf(c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: name}))
		}, "EntityAlreadyExists"},
		{"bad name", func() error {
			return errOf(c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("a b")}))
		}, "ValidationError"},
		{"bad path", func() error {
			return errOf(c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("p2"), Path: aws.String("x")}))
		}, "ValidationError"},
		{"unknown role", func() error {
			return errOf(c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("nope")}))
		}, "NoSuchEntity"},
		{"add role", func() error {
			return errOf(c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("node")}))
		}, ""},
		{"a second role", func() error {
			return errOf(c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("other")}))
		}, "LimitExceeded"},
		{"delete with a role", func() error {
			return errOf(c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name}))
		}, "DeleteConflict"},
		{"remove a role it lacks", func() error {
			return errOf(c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("other")}))
		}, "NoSuchEntity"},
		{"tag", func() error {
			return errOf(c.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: name, Tags: []iamtypes.Tag{{Key: aws.String("k2"), Value: aws.String("v2")}}}))
		}, ""},
		{"get role", func() error {
			out, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("node")})
			if err == nil && aws.ToString(out.Role.Arn) != "arn:aws:iam::123456789012:role/node" {
				t.Errorf("role %+v", out.Role)
			}
			return err
		}, ""},
		{"get unknown role", func() error { return errOf(c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("nope")})) }, "NoSuchEntity"},
	}
	for _, s := range steps {
		if got := code(s.call()); got != s.want {
			t.Errorf("%s: error code %q, want %q", s.name, got, s.want)
		}
	}
	got, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	if err != nil || len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != "node" ||
		len(got.InstanceProfile.Tags) != 2 {
		t.Fatalf("GetInstanceProfile = %+v, %v", got, err)
	}
	// Listing by path, a page at a time.
	var names []string
	pages := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/"), MaxItems: aws.Int32(1)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.InstanceProfiles {
			names = append(names, aws.ToString(p.InstanceProfileName))
		}
	}
	if len(names) != 2 || names[0] != "made-by-hand" || names[1] != "p1" {
		t.Errorf("listed %v", names)
	}
	if out, err := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/karpenter/")}); err != nil || len(out.InstanceProfiles) != 1 {
		t.Errorf("listed under /karpenter/: %+v, %v", out, err)
	}
	// Remove the role, delete; then it is gone.
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("node")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name}); code(err) != "NoSuchEntity" {
		t.Errorf("deleted profile: %v", err)
	}
}
