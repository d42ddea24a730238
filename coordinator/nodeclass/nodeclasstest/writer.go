// Package nodeclasstest fakes the API writes of the nodeclass loop. Test
// code only.
package nodeclasstest

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Writer records the writes of the nodeclass loop (nodeclass.Writer) in
// order: NodePool and EC2NodeClass status updates, and annotations as
// "resource/name map[key:value]". Read the fields once the loop is idle.
type Writer struct {
	mu        sync.Mutex
	Pools     []*karpv1.NodePool
	Classes   []*awsv1.EC2NodeClass
	Annotated []string
}

// UpdateNodePoolStatus records np.
func (w *Writer) UpdateNodePoolStatus(_ context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Pools = append(w.Pools, np)
	return np, nil
}

// UpdateEC2NodeClassStatus records nc.
func (w *Writer) UpdateEC2NodeClassStatus(_ context.Context, nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Classes = append(w.Classes, nc)
	return nc, nil
}

// Annotate records the annotations of the object name of gvr.
func (w *Writer) Annotate(_ context.Context, gvr schema.GroupVersionResource, name string, a map[string]string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Annotated = append(w.Annotated, fmt.Sprintf("%s/%s %v", gvr.Resource, name, a))
	return nil
}
