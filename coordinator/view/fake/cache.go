package fake

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Cache is the coordinator's informer cache over plain slices, as the view,
// the provisioner and the nodeclass loop read it; the zero value has
// nothing and never changes.
type Cache struct {
	PodList       []*corev1.Pod
	NodeList      []*corev1.Node
	PoolList      []*karpv1.NodePool
	ClassList     []*awsv1.EC2NodeClass
	ClaimList     []*karpv1.NodeClaim
	DaemonSetList []*appsv1.DaemonSet
	Storage
	// Rearmed counts RearmProvisioningTriggers calls.
	Rearmed int
}

func (c *Cache) Pods() []*corev1.Pod                   { return c.PodList }
func (c *Cache) Nodes() []*corev1.Node                 { return c.NodeList }
func (c *Cache) NodePools() []*karpv1.NodePool         { return c.PoolList }
func (c *Cache) NodeClasses() []*awsv1.EC2NodeClass    { return c.ClassList }
func (c *Cache) NodeClaims() []*karpv1.NodeClaim       { return c.ClaimList }
func (c *Cache) DaemonSets() []*appsv1.DaemonSet       { return c.DaemonSetList }
func (c *Cache) PDBs() []*policyv1.PodDisruptionBudget { return nil }
func (c *Cache) Changes() (<-chan struct{}, func())    { return make(chan struct{}), func() {} }
func (c *Cache) ProvisioningTriggers() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}
func (c *Cache) RearmProvisioningTriggers()                { c.Rearmed++ }
func (c *Cache) NodePool(name string) *karpv1.NodePool     { return Find(c.PoolList, name) }
func (c *Cache) NodeClaim(name string) *karpv1.NodeClaim   { return Find(c.ClaimList, name) }
func (c *Cache) NodeClass(name string) *awsv1.EC2NodeClass { return Find(c.ClassList, name) }

// NodeByProviderID is the Node whose spec.providerID is id, or nil.
func (c *Cache) NodeByProviderID(id string) *corev1.Node {
	for _, n := range c.NodeList {
		if n.Spec.ProviderID == id {
			return n
		}
	}
	return nil
}
