package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDResource is the apiextensions.k8s.io/v1 customresourcedefinitions resource.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or replaces) every CRD in the *.yaml files of dir
// (documents separated by "---") and waits until each is Established.
// It returns the names of the CRDs installed.
func InstallCRDs(ctx context.Context, c dynamic.Interface, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing CRDs in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD files (*.yaml) in %s", dir)
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		objs, err := ReadObjects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if err := applyCRD(ctx, c, o); err != nil {
				return nil, fmt.Errorf("installing CRD from %s: %w", filepath.Base(f), err)
			}
			names = append(names, o.GetName())
		}
	}
	for _, n := range names {
		if err := waitEstablished(ctx, c, n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// ReadObjects decodes the YAML (or JSON) documents of a file, skipping
// empty ones.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s document %d: %w", path, i, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func applyCRD(ctx context.Context, c dynamic.Interface, o *unstructured.Unstructured) error {
	if o.GetKind() != "CustomResourceDefinition" {
		return fmt.Errorf("%s %q is not a CustomResourceDefinition", o.GetKind(), o.GetName())
	}
	crds := c.Resource(CRDResource)
	cur, err := crds.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err == nil {
		o.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(ctx, o, metav1.UpdateOptions{})
		return err
	}
	_, err = crds.Create(ctx, o, metav1.CreateOptions{})
	return err
}

func waitEstablished(ctx context.Context, c dynamic.Interface, name string) error {
	for {
		o, err := c.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil && conditionTrue(o, "Established") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func conditionTrue(o *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
