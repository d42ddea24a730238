// Package crds holds the CustomResourceDefinitions `make generate` writes
// from api/core/v1 and api/aws/v1; the tests check them the way a
// kube-apiserver does when they are applied.
package crds

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/joiner-dev/joiner/test/yamltest"
)

func load(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return yamltest.Load[apiextensionsv1.CustomResourceDefinition](t, name)
}

func TestCRDsAreValid(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("want the 3 CRDs (nodepools, nodeclaims, ec2nodeclasses), got %v", files)
	}
	scheme := runtime.NewScheme()
	apiextensionsinstall.Install(scheme)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			crd := load(t, f)
			if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
				t.Fatalf("apiVersion/kind = %s/%s", crd.APIVersion, crd.Kind)
			}
			scheme.Default(crd)
			var internal apiextensions.CustomResourceDefinition
			if err := scheme.Convert(crd, &internal, nil); err != nil {
				t.Fatal(err)
			}
			// The API server's own create validation: structural schema,
			// defaults, CEL rules compiled with their cost estimated.
			for _, e := range validation.ValidateCustomResourceDefinition(context.Background(), &internal) {
				t.Error(e)
			}
		})
	}
}

func columns(crd *apiextensionsv1.CustomResourceDefinition, wide bool) []string {
	var names []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if (c.Priority == 0) != wide {
			names = append(names, strings.ToUpper(c.Name)+"="+c.JSONPath)
		}
	}
	return names
}

func TestPrinterColumns(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"karpenter.sh_nodepools.yaml", []string{
			"NODECLASS=.spec.template.spec.nodeClassRef.name",
			"NODES=.status.nodes",
			`READY=.status.conditions[?(@.type=="Ready")].status`,
			"AGE=.metadata.creationTimestamp",
		}},
		{"karpenter.sh_nodeclaims.yaml", []string{
			`TYPE=.metadata.labels.node\.kubernetes\.io/instance-type`,
			`CAPACITY=.metadata.labels.karpenter\.sh/capacity-type`,
			`ZONE=.metadata.labels.topology\.kubernetes\.io/zone`,
			"NODE=.status.nodeName",
			`READY=.status.conditions[?(@.type=="Ready")].status`,
			"AGE=.metadata.creationTimestamp",
		}},
		{"karpenter.k8s.aws_ec2nodeclasses.yaml", []string{
			`READY=.status.conditions[?(@.type=="Ready")].status`,
			"AGE=.metadata.creationTimestamp",
		}},
	}
	for _, tc := range cases {
		crd := load(t, tc.file)
		if got := columns(crd, false); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s columns:\n got %v\nwant %v", tc.file, got, tc.want)
		}
	}
}
