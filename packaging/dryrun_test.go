package packaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/joiner-dev/joiner/test/testenv"
)

// TestChartServerSideDryRun applies everything `helm template` renders (the
// CRDs are templates, crds.install) (default and full values) to a real API server with server-side
// apply, dryRun=All and strict field validation: the manifests must pass the
// built-in OpenAPI schemas, admission and the CRD schemas that server serves.
// Kinds the server does not know (ServiceMonitor without the Prometheus
// Operator) are reported and skipped.
func TestChartServerSideDryRun(t *testing.T) {
	tool(t, "helm")
	env := testenv.Start(t, testenv.Options{CRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "joiner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace joiner: %v", err)
	}
	dc := env.Dynamic()
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))

	// Karpenter's own values file too (with the cluster name its chart
	// requires as well).
	for _, values := range []string{filepath.Join(chartDir, "ci", "default-values.yaml"), filepath.Join(chartDir, "ci", "full-values.yaml"), karpenterValues} {
		t.Run(filepath.Base(values), func(t *testing.T) {
			out, err := render(t, []string{values}, "image.tag=test", "settings.clusterName=dry-run")
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			applied := 0
			for _, o := range objects(t, out) {
				err := dryRunApply(ctx, dc, mapper, o)
				switch {
				case errors.Is(err, errUnknownKind):
					t.Logf("skipped %s %s: the API server does not serve this kind", o.GetKind(), o.GetName())
				case err != nil:
					t.Errorf("%s %s rejected by the API server: %v", o.GetKind(), o.GetName(), err)
				default:
					applied++
				}
			}
			if applied < 15 {
				t.Errorf("only %d objects applied", applied)
			}
			t.Logf("%d objects pass a server-side dry-run apply", applied)
		})
	}

	// The check can fail: an unknown field in a rendered object is rejected.
	t.Run("unknown field rejected", func(t *testing.T) {
		out, err := render(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")})
		if err != nil {
			t.Fatal(err)
		}
		sts := find(objects(t, out), "StatefulSet", "")
		if err := unstructured.SetNestedField(sts.Object, "x", "spec", "notAField"); err != nil {
			t.Fatal(err)
		}
		err = dryRunApply(ctx, dc, mapper, sts)
		if err == nil || !strings.Contains(err.Error(), "notAField") {
			t.Errorf("dry-run apply of a StatefulSet with spec.notAField: %v, want an error naming the field", err)
		}
	})
}

// errUnknownKind: the API server serves no resource for the object's kind.
var errUnknownKind = errors.New("kind not served")

func dryRunApply(ctx context.Context, dc dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return errUnknownKind
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		ns := o.GetNamespace()
		if ns == "" {
			ns = "joiner"
		}
		ri = dc.Resource(m.Resource).Namespace(ns)
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager:    "joiner-chart-test",
		Force:           &force,
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: "Strict",
	})
	return err
}
