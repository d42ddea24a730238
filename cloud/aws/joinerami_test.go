package aws_test

import (
	"context"
	"testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// TestJoinerImageTag: an image tagged joiner.io/ami=true (as
// packaging/packer tags its builds) resolves as a Joiner image; the stock
// images of an alias, an untagged image and one tagged "false" do not.
func TestJoinerImageTag(t *testing.T) {
	cfg := sim.DefaultConfig()
	for _, im := range []sim.Image{
		{ID: "ami-0joiner", Name: "joiner-eks-al2023-x86_64-1.32-1", Tags: map[string]string{karpv1.TagJoinerAMI: "true"}},
		{ID: "ami-0joinerno", Name: "joiner-eks-al2023-x86_64-1.32-2", Tags: map[string]string{karpv1.TagJoinerAMI: "false"}},
		{ID: "ami-0plain", Name: "my-own-al2023"},
	} {
		im.Owner, im.Arch, im.Family, im.CreationDate = "self", "x86_64", "AL2023", "2026-01-02T00:00:00.000Z"
		cfg.Images = append(cfg.Images, im)
	}
	e := newEnvWith(t, cfg)
	for _, tc := range []struct {
		term awsv1.AMISelectorTerm
		want map[string]bool // image ID -> Joiner
	}{
		{awsv1.AMISelectorTerm{ID: "ami-0joiner"}, map[string]bool{"ami-0joiner": true}},
		{awsv1.AMISelectorTerm{Tags: map[string]string{karpv1.TagJoinerAMI: "true"}}, map[string]bool{"ami-0joiner": true}},
		{awsv1.AMISelectorTerm{ID: "ami-0joinerno"}, map[string]bool{"ami-0joinerno": false}},
		{awsv1.AMISelectorTerm{ID: "ami-0plain"}, map[string]bool{"ami-0plain": false}},
		{awsv1.AMISelectorTerm{Alias: "al2023@latest"}, nil},
	} {
		nc := nodeClass()
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{tc.term}
		r, err := e.provider.Resolve(context.Background(), nc)
		if err != nil {
			t.Fatalf("%+v: %v", tc.term, err)
		}
		if len(r.AMIs) == 0 {
			t.Fatalf("%+v: no AMIs", tc.term)
		}
		var ids []string
		for _, a := range r.AMIs {
			ids = append(ids, a.ID)
			if want := tc.want[a.ID]; a.Joiner != want {
				t.Errorf("%+v: %s Joiner = %v, want %v", tc.term, a.ID, a.Joiner, want)
			}
		}
		if want := tc.want[ids[0]] && len(ids) == 1; r.JoinerImages(ids) != want {
			t.Errorf("%+v: JoinerImages(%v) = %v, want %v", tc.term, ids, !want, want)
		}
	}
}
