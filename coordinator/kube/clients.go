// Package kube is the coordinator's view of the Kubernetes API: typed
// clients for Joiner's CRDs (NodePool, NodeClaim, EC2NodeClass) on top of
// the dynamic client, and an informer cache of everything the leader loops
// read (pods, nodes, DaemonSets, PDBs and the CRDs).
//
// Objects the Cache returns are shared with the informers: callers DeepCopy
// before they modify one.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Resources of Joiner's CRDs.
var (
	NodePoolsGVR      = karpv1.SchemeGroupVersion.WithResource("nodepools")
	NodeClaimsGVR     = karpv1.SchemeGroupVersion.WithResource("nodeclaims")
	EC2NodeClassesGVR = awsv1.SchemeGroupVersion.WithResource("ec2nodeclasses")
	nodePoolKind      = karpv1.SchemeGroupVersion.WithKind("NodePool")
	nodeClaimKind     = karpv1.SchemeGroupVersion.WithKind("NodeClaim")
	ec2NodeClassKind  = awsv1.SchemeGroupVersion.WithKind("EC2NodeClass")
	defaultQPS        = float32(50)
	defaultBurst      = 100
)

// Clients bundles the typed core client and the dynamic client the CRD
// helpers use.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// NewClients builds both clients from one rest config (QPS 50, burst 100
// unless the config sets them). Every request they send is counted in
// joiner_kube_client_requests_total (see RegisterClientMetrics).
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = defaultQPS, defaultBurst
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building kubernetes client: %w", err)
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building dynamic client: %w", err)
	}
	return &Clients{Kube: k, Dynamic: d}, nil
}

// toUnstructured converts a typed object, stamping its apiVersion/kind.
func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fromUnstructured converts into a typed object.
func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// GetNodeClaim reads a NodeClaim from the API server (not the cache).
func (c *Clients) GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
	u, err := c.Dynamic.Resource(NodeClaimsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting nodeclaim %s: %w", name, err)
	}
	return fromUnstructured[karpv1.NodeClaim](u)
}

// CreateNodeClaim creates a NodeClaim.
func (c *Clients) CreateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return write[karpv1.NodeClaim](ctx, c, NodeClaimsGVR, nodeClaimKind, nc, create)
}

// UpdateNodeClaim writes a NodeClaim's metadata (labels, annotations,
// finalizers). The NodeClaim spec is immutable: never change it.
func (c *Clients) UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return write[karpv1.NodeClaim](ctx, c, NodeClaimsGVR, nodeClaimKind, nc, update)
}

// UpdateNodeClaimStatus writes a NodeClaim's status subresource.
func (c *Clients) UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return write[karpv1.NodeClaim](ctx, c, NodeClaimsGVR, nodeClaimKind, nc, updateStatus)
}

// DeleteNodeClaim deletes a NodeClaim (foreground finalizers run first); a
// NodeClaim that is already gone is not an error.
func (c *Clients) DeleteNodeClaim(ctx context.Context, name string) error {
	_, err := c.DeleteNodeClaimIfExists(ctx, name)
	return err
}

// DeleteNodeClaimIfExists deletes a NodeClaim as DeleteNodeClaim does and
// says whether it was there: false (and no error) when the API server
// answered NotFound, for a caller that counts or announces the deletion
// only when it made one (as Karpenter's interruption controller).
func (c *Clients) DeleteNodeClaimIfExists(ctx context.Context, name string) (bool, error) {
	err := c.Dynamic.Resource(NodeClaimsGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting nodeclaim %s: %w", name, err)
	}
	return true, nil
}

// UpdateNodePoolStatus writes a NodePool's status subresource.
func (c *Clients) UpdateNodePoolStatus(ctx context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error) {
	return write[karpv1.NodePool](ctx, c, NodePoolsGVR, nodePoolKind, np, updateStatus)
}

// UpdateEC2NodeClassStatus writes an EC2NodeClass's status subresource.
func (c *Clients) UpdateEC2NodeClassStatus(ctx context.Context, nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	return write[awsv1.EC2NodeClass](ctx, c, EC2NodeClassesGVR, ec2NodeClassKind, nc, updateStatus)
}

// A write of an object to the API server.
type verb int

const (
	create verb = iota
	update
	updateStatus
)

// write sends obj (a gvr of kind gvk) with v and decodes the object the
// API server returns.
func write[T any](ctx context.Context, c *Clients, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj interface {
	runtime.Object
	GetName() string
}, v verb) (*T, error) {
	u, err := toUnstructured(obj, gvk)
	if err != nil {
		return nil, err
	}
	r := c.Dynamic.Resource(gvr)
	var out *unstructured.Unstructured
	doing := "updating "
	switch v {
	case create:
		doing = "creating "
		out, err = r.Create(ctx, u, metav1.CreateOptions{})
	case update:
		out, err = r.Update(ctx, u, metav1.UpdateOptions{})
	case updateStatus:
		doing = "updating status of "
		out, err = r.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("%s%s %s: %w", doing, strings.ToLower(gvk.Kind), obj.GetName(), err)
	}
	return fromUnstructured[T](out)
}

// Annotate merges annotations into the metadata of the cluster-scoped
// object name of gvr with a JSON merge patch: nothing else is written, so
// fields Joiner's types do not know are never dropped.
func (c *Clients) Annotate(ctx context.Context, gvr schema.GroupVersionResource, name string, annotations map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return fmt.Errorf("annotating %s %s: %w", gvr.Resource, name, err)
	}
	if _, err := c.Dynamic.Resource(gvr).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating %s %s: %w", gvr.Resource, name, err)
	}
	return nil
}

// SetFinalizers replaces the finalizers of the cluster-scoped object name
// of gvr, provided it is still at resourceVersion (the merge patch carries
// the version: a Conflict when the object moved on).
func (c *Clients) SetFinalizers(ctx context.Context, gvr schema.GroupVersionResource, name, resourceVersion string, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": resourceVersion}})
	if err != nil {
		return fmt.Errorf("setting finalizers of %s %s: %w", gvr.Resource, name, err)
	}
	if _, err := c.Dynamic.Resource(gvr).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting finalizers of %s %s: %w", gvr.Resource, name, err)
	}
	return nil
}

// List reads every object of a cluster-scoped gvr from the API server (not
// the cache), decoded as T.
func List[T any](ctx context.Context, c *Clients, gvr schema.GroupVersionResource) ([]*T, error) {
	l, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
	}
	out := make([]*T, 0, len(l.Items))
	for i := range l.Items {
		v, err := fromUnstructured[T](&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
