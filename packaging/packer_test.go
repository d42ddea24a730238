package packaging_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// packerSchema is the top level of a Packer HCL2 template.
var packerSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "packer"},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "source", LabelNames: []string{"type", "name"}},
	{Type: "build"},
}}

var buildSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "name"}, {Name: "sources", Required: true}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "provisioner", LabelNames: []string{"type"}},
		{Type: "post-processor", LabelNames: []string{"type"}},
	},
}

// TestPackerTemplate parses the AMI template (packer is not available here)
// and checks it builds AL2023 and AL2 images that install the package and
// enable both units.
func TestPackerTemplate(t *testing.T) {
	files, _ := filepath.Glob("packer/*.pkr.hcl")
	if len(files) == 0 {
		t.Fatal("no packer/*.pkr.hcl")
	}
	p := hclparse.NewParser()
	sources := map[string]bool{}
	var builds []*hcl.Block
	for _, f := range files {
		file, diags := p.ParseHCLFile(f)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", f, diags)
		}
		content, diags := file.Body.Content(packerSchema)
		if diags.HasErrors() {
			t.Fatalf("%s: unexpected top-level content: %v", f, diags)
		}
		for _, b := range content.Blocks {
			switch b.Type {
			case "source":
				sources[b.Labels[0]+"."+b.Labels[1]] = true
			case "build":
				builds = append(builds, b)
			}
		}
	}
	for _, want := range []string{"amazon-ebs.al2023", "amazon-ebs.al2"} {
		if !sources[want] {
			t.Errorf("no source %q (have %v)", want, sources)
		}
	}
	if len(builds) != 1 {
		t.Fatalf("want one build block, got %d", len(builds))
	}
	bc, diags := builds[0].Body.Content(buildSchema)
	if diags.HasErrors() {
		t.Fatalf("build block: %v", diags)
	}
	refs := map[string]bool{}
	list, diags := hcl.ExprList(bc.Attributes["sources"].Expr)
	if diags.HasErrors() {
		t.Fatalf("build.sources is not a list: %v", diags)
	}
	for _, tr := range list {
		v, d := tr.Value(nil)
		if d.HasErrors() {
			t.Fatalf("build.sources: %v", d)
		}
		refs[v.AsString()] = true
	}
	for s := range sources {
		if !refs["source."+s] {
			t.Errorf("build does not use source.%s (uses %v)", s, refs)
		}
	}
	src := map[string]string{}
	for _, f := range files {
		src[f] = string(p.Files()[f].Bytes)
	}
	var inline string
	for _, pb := range bc.Blocks {
		if pb.Type != "provisioner" || pb.Labels[0] != "shell" {
			continue
		}
		attrs, d := pb.Body.JustAttributes()
		if d.HasErrors() {
			t.Fatalf("shell provisioner: %v", d)
		}
		if a, ok := attrs["inline"]; ok {
			r := a.Expr.Range()
			inline += src[r.Filename][r.Start.Byte:r.End.Byte]
		}
	}
	for _, want := range []string{"/home/ec2-user/joiner.rpm", "systemctl enable joiner-bootstrap.service joiner-agent.service"} {
		if !strings.Contains(inline, want) {
			t.Errorf("shell provisioner does not run %q:\n%s", want, inline)
		}
	}
}
