package convert

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml and *.warnings.txt")

// TestGolden converts every testdata/*.in.yaml and compares the output and
// the warnings with the golden files; each converted document must decode
// strictly into its v1 type and pass validation.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			out, err := Convert(src, func(w string) { warnings = append(warnings, w) })
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			warnText := strings.Join(warnings, "\n") + "\n"
			goldenOut := filepath.Join("testdata", name+".golden.yaml")
			goldenWarn := filepath.Join("testdata", name+".warnings.txt")
			golden.Check(t, goldenOut, out, *update)
			golden.Check(t, goldenWarn, []byte(warnText), *update)
			// Deterministic: a second run gives the same bytes.
			again, err := Convert(src, nil)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second conversion differs (err %v)", err)
			}
			checkV1(t, out)
		})
	}
}

// checkV1 decodes every Karpenter document of a converted stream strictly
// into its v1 type and validates it.
func checkV1(t *testing.T, out []byte) {
	t.Helper()
	for _, d := range splitDocuments(out) {
		var tm typeMeta
		if err := yaml.Unmarshal(d.raw, &tm); err != nil {
			continue
		}
		var obj any
		switch {
		case tm.APIVersion == "karpenter.sh/v1" && tm.Kind == "NodePool":
			obj = &karpv1.NodePool{}
		case tm.APIVersion == "karpenter.k8s.aws/v1" && tm.Kind == "EC2NodeClass":
			obj = &awsv1.EC2NodeClass{}
		default:
			if strings.HasPrefix(tm.APIVersion, "karpenter.") {
				t.Errorf("document %d: %s %s left unconverted", d.index, tm.APIVersion, tm.Kind)
			}
			continue
		}
		if err := yaml.UnmarshalStrict(d.raw, obj); err != nil {
			t.Errorf("document %d (%s %s): does not decode strictly into v1: %v", d.index, tm.Kind, tm.Metadata.Name, err)
			continue
		}
		if errs := ValidateObject(obj); len(errs) > 0 {
			t.Errorf("document %d (%s %s): invalid v1: %v", d.index, tm.Kind, tm.Metadata.Name, errors.Join(errs...))
		}
	}
}
