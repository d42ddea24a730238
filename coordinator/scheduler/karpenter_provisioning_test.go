package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// The cases in this file port the scheduling cases of Karpenter v1.14.1's
// pkg/controllers/provisioning/suite_test.go that karpenter_suite_test.go
// does not have yet, and the shared-volume cases of its scheduling
// suite's "VolumeUsage". The provisioner's own cases (the NodeClaim it
// creates, volume topology through the cluster view, minValues policy)
// are in coordinator/provisioner's karpenter_test.go. Each case names
// Karpenter's.

// Karpenter: "should provision nodes for pods with supported node
// selectors" and "... supported node affinities": one round with the pods
// the pool can serve, then one with those it cannot.
func TestKarpenterSupportedSelectors(t *testing.T) {
	type sel struct{ key, value string }
	schedulable := []sel{{karpv1.LabelNodePool, "default"}, {kZone, "test-zone-1"}, {karpv1.LabelInstanceType, "default-instance-type"},
		{kArch, "arm64"}, {karpv1.LabelOS, "linux"}}
	unschedulable := []sel{{karpv1.LabelNodePool, "unknown"}, {kZone, "unknown"}, {karpv1.LabelInstanceType, "unknown"},
		{kArch, "unknown"}, {karpv1.LabelOS, "unknown"}, {kCT, "unknown"}, {"foo", "bar"}}
	for _, form := range []struct {
		name string
		opt  func(s sel) func(*corev1.Pod)
	}{
		{"node selectors", func(s sel) func(*corev1.Pod) { return withNodeSelector(s.key, s.value) }},
		{"node affinities", func(s sel) func(*corev1.Pod) { return withNodeReqs(req(s.key, corev1.NodeSelectorOpIn, s.value)) }},
	} {
		t.Run(form.name, func(t *testing.T) {
			c := newKSuite(t)
			var yes, no []*corev1.Pod
			for _, s := range schedulable {
				yes = append(yes, c.pod(form.opt(s)))
			}
			for _, s := range unschedulable {
				no = append(no, c.pod(form.opt(s)))
			}
			c.provision(yes...)
			c.scheduled(yes...)
			c.provision(no...)
			c.notScheduled(no...)
		})
	}
}

// Karpenter's provisioning suite, pods and pools.
func TestKarpenterProvisioningPods(t *testing.T) {
	runKSuite(t, []kcase{
		// Karpenter: "should provision nodes for accelerators". The API
		// server defaults requests from limits; the pods carry both.
		{"pods asking for each accelerator", func(c *kcluster) {
			gpu := func(r corev1.ResourceName) func(*corev1.Pod) {
				return func(p *corev1.Pod) {
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{r: resource.MustParse("1")}
					p.Spec.Containers[0].Resources.Requests[r] = resource.MustParse("1")
				}
			}
			a, b := c.pod(gpu(kGPUA)), c.pod(gpu(kGPUB))
			c.provision(a, b)
			c.wantType(a, "gpu-vendor-instance-type")
			c.wantType(b, "gpu-vendor-b-instance-type")
		}},
		// Karpenter: "should provision multiple nodes when maxPods is set"
		{"a node per pod on a type holding one pod", func(c *kcluster) {
			poolReqs(c.pool(), req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "single-pod-instance-type"))
			ps := c.pods(3)
			c.provision(ps...)
			c.wantNodes(3, ps...)
		}},
		// Karpenter: "Should provision nodes for multiple pods"
		{"a hundred pods", func(c *kcluster) {
			ps := c.pods(100)
			c.provision(ps...)
			c.scheduled(ps...)
		}},
	})
}

// Karpenter's provisioning suite, "Preferential Fallback": "should ignore
// node preferredDuringSchedulingIgnoredDuringExecution affinity" (zone and
// hostname entries). A preference no node can meet is relaxed, and the pod
// then packs beside the other pod.
func TestKarpenterUnmetNodePreference(t *testing.T) {
	for _, key := range []string{kZone, kHost} {
		t.Run(key, func(t *testing.T) {
			c := newKSuite(t)
			a := c.pod(withLabels(map[string]string{"app": "foo"}), withReq("2", ""))
			b := c.pod(withLabels(map[string]string{"app": "baz"}), withReq("1", ""), withNodePrefs(req(key, corev1.NodeSelectorOpIn, "value-1")))
			c.provision(a, b)
			c.sameNode(a, b)
		})
	}
}

// Karpenter's scheduling suite, "VolumeUsage": pods sharing a volume. A
// volume is attached to a node once, however many of its pods run there
// (Karpenter's VolumeUsage counts a claim once per node and driver).
func TestKarpenterSharedVolumes(t *testing.T) {
	const driver = "fake.csi.provider"
	big := func(c *kcluster) {
		c.in.InstanceTypes["default"] = []*catalog.InstanceType{ktype("instance-type", "1024", "4Gi", kRes(corev1.ResourcePods, "1024"))}
		c.in.Volumes = map[string]PodVolumes{}
	}
	uses := func(c *kcluster, p *corev1.Pod, drv string, names ...string) {
		v := c.in.Volumes[podName(p)]
		if v.Attachments == nil {
			v.Attachments, v.Volumes = map[string]int64{}, map[string][]string{}
		}
		v.Requirements = []corev1.NodeSelectorRequirement{zoneReq("test-zone-1")}
		v.Attachments[drv] += int64(len(names))
		v.Volumes[drv] = append(v.Volumes[drv], names...)
		c.in.Volumes[podName(p)] = v
	}
	limit := func(n *Node, drv string, count string) {
		n.Allocatable[AttachResource(drv)] = resource.MustParse(count)
	}
	runKSuite(t, []kcase{
		// Karpenter: "should launch a single node if all pods use the same
		// PVC" (the node of the first round has a CSINode limit of 10)
		{"a hundred pods of one claim on one node", func(c *kcluster) {
			big(c)
			first := c.pod(withNodeSelector(kZone, "test-zone-1"))
			c.provision(first)
			limit(c.nodeOf(first), driver, "10")
			ps := c.pods(100)
			for _, p := range ps {
				uses(c, p, driver, "default/my-claim")
			}
			c.provision(ps...)
			c.scheduled(ps...)
			if c.nodeCount() != 1 {
				c.t.Fatalf("%d nodes, want the first to take every pod of the one claim\n%s", c.nodeCount(), dump(c.last))
			}
		}},
		// Joiner's: on new nodes the EBS limit of the type (26 on Nitro)
		// counts each shared claim once too.
		{"thirty pods of one EBS claim on one new node", func(c *kcluster) {
			big(c)
			ps := c.pods(30)
			for _, p := range ps {
				uses(c, p, EBSDriver, "default/shared")
			}
			c.provision(ps...)
			c.wantNodes(1, ps...)
		}},
		// Karpenter: "should launch multiple nodes if required due to volume
		// limits", with named claims: six pods of two claims each, ten
		// attachments on the first node.
		{"claims of their own fill the attach limit", func(c *kcluster) {
			big(c)
			first := c.pod(withNodeSelector(kZone, "test-zone-1"))
			c.provision(first)
			limit(c.nodeOf(first), driver, "10")
			ps := c.pods(6)
			for i, p := range ps {
				uses(c, p, driver, fmt.Sprintf("default/my-claim-a-%d", i), fmt.Sprintf("default/my-claim-b-%d", i))
			}
			c.provision(ps...)
			c.scheduled(ps...)
			if c.nodeCount() != 2 {
				c.t.Fatalf("%d nodes, want 2 (the first takes five pods' ten volumes)\n%s", c.nodeCount(), dump(c.last))
			}
		}},
		// Joiner's: a pod whose claim is already attached to a full node
		// (by a pod bound there) still goes there; one with a new claim does
		// not.
		{"a full node takes pods of the claims it has", func(c *kcluster) {
			big(c)
			first := c.pod(withNodeSelector(kZone, "test-zone-1"))
			uses(c, first, driver, "default/a", "default/b")
			c.provision(first)
			n := c.nodeOf(first)
			limit(n, driver, "2")
			same, other := c.pod(), c.pod()
			uses(c, same, driver, "default/b", "default/a")
			uses(c, other, driver, "default/c")
			c.provision(same, other)
			if c.nodeOf(same) != n || c.nodeOf(other) == n {
				c.t.Fatalf("the pod of claims a and b on %s, the pod of claim c on %s; want only the first on %s\n%s",
					c.nodeName(same), c.nodeName(other), n.Name, dump(c.last))
			}
		}},
		// Joiner's: pods sharing a claim among pods that do not, in one
		// class: a node too full for one is not ruled out for the others.
		{"sharing and unshared pods of one class", func(c *kcluster) {
			big(c)
			first := c.pod(withNodeSelector(kZone, "test-zone-1"))
			uses(c, first, driver, "default/shared")
			c.provision(first)
			n := c.nodeOf(first)
			limit(n, driver, "1")
			own, shared := c.pod(), c.pod()
			uses(c, own, driver, "default/own")
			uses(c, shared, driver, "default/shared")
			c.provision(own, shared)
			if c.nodeOf(shared) != n || c.nodeOf(own) == n {
				c.t.Fatalf("the pod of the shared claim on %s, the other on %s; want only the first on %s\n%s",
					c.nodeName(shared), c.nodeName(own), n.Name, dump(c.last))
			}
		}},
	})
}

// nodeName is the name of p's node, "pending" when it has none.
func (c *kcluster) nodeName(p *corev1.Pod) string {
	if n := c.nodeOf(p); n != nil {
		return n.Name
	}
	return "pending"
}
