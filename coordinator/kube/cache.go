package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

const (
	byNodeName   = "nodeName"
	byProviderID = "providerID"
)

// Cache is an informer cache of the objects the leader loops read. Every
// replica may run one (followers keep it warm for a fast failover).
type Cache struct {
	log *zap.Logger

	core informers.SharedInformerFactory
	dyn  dynamicinformer.DynamicSharedInformerFactory

	pods, nodes, daemonSets, pdbs         cache.SharedIndexInformer
	nodePools, nodeClaims, ec2NodeClasses cache.SharedIndexInformer
	// Storage and namespaces: volume topology, attach limits and
	// namespaceSelectors.
	pvcs, pvs, storageClasses, csiNodes, namespaces cache.SharedIndexInformer
	// volumeAttachments: a terminating node's instance waits for them.
	volumeAttachments cache.SharedIndexInformer

	// changes follows every event; provisioning only those that start a
	// provisioning batch.
	changes      fanout
	provisioning provisioningTriggers
}

// NewCache builds the informers (they start with Run).
func NewCache(c *Clients, log *zap.Logger) *Cache {
	const resync = 10 * time.Minute
	k := &Cache{log: log.Named("cache")}
	k.core = informers.NewSharedInformerFactory(c.Kube, resync)
	k.dyn = dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, resync)

	k.pods = k.core.Core().V1().Pods().Informer()
	k.nodes = k.core.Core().V1().Nodes().Informer()
	k.daemonSets = k.core.Apps().V1().DaemonSets().Informer()
	k.pdbs = k.core.Policy().V1().PodDisruptionBudgets().Informer()
	k.pvcs = k.core.Core().V1().PersistentVolumeClaims().Informer()
	k.pvs = k.core.Core().V1().PersistentVolumes().Informer()
	k.storageClasses = k.core.Storage().V1().StorageClasses().Informer()
	k.csiNodes = k.core.Storage().V1().CSINodes().Informer()
	k.volumeAttachments = k.core.Storage().V1().VolumeAttachments().Informer()
	k.namespaces = k.core.Core().V1().Namespaces().Informer()
	k.nodePools = k.dyn.ForResource(NodePoolsGVR).Informer()
	k.nodeClaims = k.dyn.ForResource(NodeClaimsGVR).Informer()
	k.ec2NodeClasses = k.dyn.ForResource(EC2NodeClassesGVR).Informer()

	must := func(err error) {
		if err != nil { // only fails once an informer has started
			panic(err)
		}
	}
	// Pods: drop managed fields (memory), index by node.
	must(k.pods.SetTransform(stripManagedFields))
	must(k.pods.AddIndexers(cache.Indexers{byNodeName: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}))
	must(k.nodes.SetTransform(stripManagedFields))
	must(k.volumeAttachments.AddIndexers(cache.Indexers{byNodeName: func(obj any) ([]string, error) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
			return []string{va.Spec.NodeName}, nil
		}
		return nil, nil
	}}))
	for _, inf := range []cache.SharedIndexInformer{k.pvcs, k.pvs, k.storageClasses, k.csiNodes, k.namespaces, k.volumeAttachments} {
		must(inf.SetTransform(stripManagedFields))
	}
	must(k.nodes.AddIndexers(cache.Indexers{byProviderID: func(obj any) ([]string, error) {
		if n, ok := obj.(*corev1.Node); ok && n.Spec.ProviderID != "" {
			return []string{n.Spec.ProviderID}, nil
		}
		return nil, nil
	}}))
	// CRDs: stored typed, so readers never decode.
	must(k.nodePools.SetTransform(typed[karpv1.NodePool]))
	must(k.ec2NodeClasses.SetTransform(typed[awsv1.EC2NodeClass]))
	must(k.nodeClaims.SetTransform(typed[karpv1.NodeClaim]))
	must(k.nodeClaims.AddIndexers(cache.Indexers{byProviderID: func(obj any) ([]string, error) {
		if n, ok := obj.(*karpv1.NodeClaim); ok && n.Status.ProviderID != "" {
			return []string{n.Status.ProviderID}, nil
		}
		return nil, nil
	}}))
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.changes.poke() },
		UpdateFunc: func(any, any) { k.changes.poke() },
		DeleteFunc: func(any) { k.changes.poke() },
	}
	add := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
		if _, err := inf.AddEventHandler(h); err != nil {
			panic(err)
		}
	}
	for _, inf := range k.all() {
		add(inf, h)
	}
	pods, nodes, classes, nodeClaims := k.provisioning.handlers()
	add(k.pods, pods)
	add(k.nodes, nodes)
	add(k.nodePools, classes)
	add(k.ec2NodeClasses, classes)
	add(k.nodeClaims, nodeClaims)
	return k
}

func (k *Cache) all() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{k.pods, k.nodes, k.daemonSets, k.pdbs, k.nodePools, k.nodeClaims, k.ec2NodeClasses,
		k.pvcs, k.pvs, k.storageClasses, k.csiNodes, k.namespaces, k.volumeAttachments}
}

func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// typed converts the dynamic informer's unstructured objects into T.
func typed[T any](obj any) (any, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.SetManagedFields(nil)
		return fromUnstructured[T](o)
	case cache.DeletedFinalStateUnknown:
		if u, ok := o.Obj.(*unstructured.Unstructured); ok {
			t, err := fromUnstructured[T](u)
			if err != nil {
				return nil, err
			}
			o.Obj = t
		}
		return o, nil
	}
	return obj, nil
}

// Run starts the informers and blocks until ctx ends.
func (k *Cache) Run(ctx context.Context) error {
	k.core.Start(ctx.Done())
	k.dyn.Start(ctx.Done())
	<-ctx.Done()
	k.core.Shutdown()
	k.dyn.Shutdown()
	return nil
}

// WaitForSync blocks until every informer has listed once, or ctx ends.
func (k *Cache) WaitForSync(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, inf := range k.all() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for informer caches: %w", err)
		}
		return errors.New("waiting for informer caches: not synced")
	}
	return nil
}

// Synced reports whether every informer has listed once.
func (k *Cache) Synced() bool {
	for _, inf := range k.all() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Changes returns a channel poked (buffer 1, never blocking) after every
// informer event, and a func that unsubscribes.
func (k *Cache) Changes() (<-chan struct{}, func()) { return k.changes.subscribe() }

// ProvisioningTriggers returns a channel poked (buffer 1, never blocking)
// after the events that start a provisioning batch (provisioningTriggers),
// and a func that unsubscribes.
func (k *Cache) ProvisioningTriggers() (<-chan struct{}, func()) {
	return k.provisioning.out.subscribe()
}

// RearmProvisioningTriggers makes every provisionable pod's and disrupted
// node's next event trigger again: call it as a batch closes.
func (k *Cache) RearmProvisioningTriggers() { k.provisioning.rearm() }

// list returns every object of an informer as T, sorted by key.
func list[T any](inf cache.SharedIndexInformer) []*T {
	keys := inf.GetStore().ListKeys()
	sort.Strings(keys)
	out := make([]*T, 0, len(keys))
	for _, key := range keys {
		if o, ok, _ := inf.GetStore().GetByKey(key); ok {
			if t, ok := o.(*T); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

func get[T any](inf cache.SharedIndexInformer, key string) *T {
	o, ok, _ := inf.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	t, _ := o.(*T)
	return t
}

// withProviderID returns the object of inf (first by name) whose provider
// ID is id, or nil; "" matches nothing.
func withProviderID[T any, P interface {
	*T
	GetName() string
}](inf cache.SharedIndexInformer, id string) *T {
	if id == "" {
		return nil
	}
	var first P
	for _, o := range byIndex[T](inf, byProviderID, id) {
		if p := P(o); first == nil || p.GetName() < first.GetName() {
			first = p
		}
	}
	return first
}

func byIndex[T any](inf cache.SharedIndexInformer, index, value string) []*T {
	objs, err := inf.GetIndexer().ByIndex(index, value)
	if err != nil {
		return nil
	}
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Pods returns every pod, sorted by namespace/name.
func (k *Cache) Pods() []*corev1.Pod { return list[corev1.Pod](k.pods) }

// Pod returns one pod or nil.
func (k *Cache) Pod(namespace, name string) *corev1.Pod {
	return get[corev1.Pod](k.pods, namespace+"/"+name)
}

// PodsOnNode returns the pods bound to a node.
func (k *Cache) PodsOnNode(node string) []*corev1.Pod {
	ps := byIndex[corev1.Pod](k.pods, byNodeName, node)
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Namespace != ps[j].Namespace {
			return ps[i].Namespace < ps[j].Namespace
		}
		return ps[i].Name < ps[j].Name
	})
	return ps
}

// Nodes returns every node, sorted by name.
func (k *Cache) Nodes() []*corev1.Node { return list[corev1.Node](k.nodes) }

// Node returns one node or nil.
func (k *Cache) Node(name string) *corev1.Node { return get[corev1.Node](k.nodes, name) }

// NodeByProviderID returns the node with spec.providerID id, or nil.
func (k *Cache) NodeByProviderID(id string) *corev1.Node {
	return withProviderID[corev1.Node](k.nodes, id)
}

// NodePools returns every NodePool, sorted by name.
func (k *Cache) NodePools() []*karpv1.NodePool { return list[karpv1.NodePool](k.nodePools) }

// NodePool returns one NodePool or nil.
func (k *Cache) NodePool(name string) *karpv1.NodePool {
	return get[karpv1.NodePool](k.nodePools, name)
}

// NodeClasses returns every EC2NodeClass, sorted by name.
func (k *Cache) NodeClasses() []*awsv1.EC2NodeClass {
	return list[awsv1.EC2NodeClass](k.ec2NodeClasses)
}

// NodeClass returns one EC2NodeClass or nil.
func (k *Cache) NodeClass(name string) *awsv1.EC2NodeClass {
	return get[awsv1.EC2NodeClass](k.ec2NodeClasses, name)
}

// NodeClaims returns every NodeClaim, sorted by name.
func (k *Cache) NodeClaims() []*karpv1.NodeClaim { return list[karpv1.NodeClaim](k.nodeClaims) }

// NodeClaim returns one NodeClaim or nil.
func (k *Cache) NodeClaim(name string) *karpv1.NodeClaim {
	return get[karpv1.NodeClaim](k.nodeClaims, name)
}

// NodeClaimByProviderID returns the NodeClaim with status.providerID id, or nil.
func (k *Cache) NodeClaimByProviderID(id string) *karpv1.NodeClaim {
	return withProviderID[karpv1.NodeClaim](k.nodeClaims, id)
}

// DaemonSets returns every DaemonSet, sorted by namespace/name.
func (k *Cache) DaemonSets() []*appsv1.DaemonSet { return list[appsv1.DaemonSet](k.daemonSets) }

// PDBs returns every PodDisruptionBudget, sorted by namespace/name.
func (k *Cache) PDBs() []*policyv1.PodDisruptionBudget {
	return list[policyv1.PodDisruptionBudget](k.pdbs)
}

// PersistentVolumeClaim returns one claim or nil.
func (k *Cache) PersistentVolumeClaim(namespace, name string) *corev1.PersistentVolumeClaim {
	return get[corev1.PersistentVolumeClaim](k.pvcs, namespace+"/"+name)
}

// PersistentVolume returns one volume or nil.
func (k *Cache) PersistentVolume(name string) *corev1.PersistentVolume {
	return get[corev1.PersistentVolume](k.pvs, name)
}

// StorageClass returns one StorageClass or nil.
func (k *Cache) StorageClass(name string) *storagev1.StorageClass {
	return get[storagev1.StorageClass](k.storageClasses, name)
}

// CSINode returns the CSINode of a node, or nil.
func (k *Cache) CSINode(name string) *storagev1.CSINode {
	return get[storagev1.CSINode](k.csiNodes, name)
}

// VolumeAttachmentsOnNode returns the VolumeAttachments of a node (by
// spec.nodeName), sorted by name.
func (k *Cache) VolumeAttachmentsOnNode(node string) []*storagev1.VolumeAttachment {
	vas := byIndex[storagev1.VolumeAttachment](k.volumeAttachments, byNodeName, node)
	sort.Slice(vas, func(i, j int) bool { return vas[i].Name < vas[j].Name })
	return vas
}

// Namespaces returns every namespace, sorted by name.
func (k *Cache) Namespaces() []*corev1.Namespace { return list[corev1.Namespace](k.namespaces) }
