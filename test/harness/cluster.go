package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/view"
)

// NodeClaimResource is karpenter.sh/v1 nodeclaims.
var NodeClaimResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// NodePoolResource is karpenter.sh/v1 nodepools.
var NodePoolResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// Well-known keys the harness reads.
const (
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelCapacityType = "karpenter.sh/capacity-type"
	LabelNodePool     = "karpenter.sh/nodepool"
	// karpv1.AnnotationDisruptionReason says why a NodeClaim is being removed.
)

// Apply creates or updates objects with server-side apply (field manager
// joiner-harness).
func (h *Harness) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	dc := memory.NewMemCacheClient(h.Env.Client.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	dyn := h.Env.Dynamic()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		ri := dyn.Resource(m.Resource)
		force := true
		opts := metav1.PatchOptions{FieldManager: "joiner-harness", Force: &force}
		if o.GetNamespace() != "" {
			_, err = ri.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		}
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}

// ScaleDeployment sets a Deployment's replicas.
func (h *Harness) ScaleDeployment(ctx context.Context, namespace, name string, replicas int32) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := h.Env.Client.AppsV1().Deployments(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("scaling deployment %s/%s to %d: %w", namespace, name, replicas, err)
	}
	return nil
}

// NodeClaimInfo is what the harness reads from a NodeClaim.
type NodeClaimInfo struct {
	Name, NodePool, ProviderID, NodeName, LaunchID string
	// DisruptionReason is joiner.io/disruption-reason ("" when none).
	DisruptionReason                            string
	Launched, Registered, Initialized, Deleting bool
	// InstanceTerminating: its instance is being terminated; as in
	// Karpenter, it no longer counts against its pool's budgets.
	InstanceTerminating bool
	// Created is the object's creation time (the API server's clock).
	Created time.Time
}

// NodeInfo is what the harness reads from a Node.
type NodeInfo struct {
	Name, ProviderID, InstanceType, Zone, CapacityType string
	// Price is the hourly price of its offering in the embedded catalogue.
	Price         float64
	Unschedulable bool
	Disrupted     bool // tainted karpenter.sh/disrupted or by the agent
	Pods          int  // pods of the watched selector bound to it
}

// State is one look at the cluster and the sim.
type State struct {
	// Pods counts the selected pods not being deleted; Pending those not
	// bound to a node; Running those whose phase is Running.
	Pods, Pending, Bound, Running int
	NodeClaims                    []NodeClaimInfo
	Nodes                         []NodeInfo
	Instances                     []sim.InstanceInfo
}

// State reads pods matching selector in namespace, every NodeClaim, every
// Node with a providerID, and the sim's instances.
func (h *Harness) State(ctx context.Context, namespace, selector string) (*State, error) {
	s := &State{}
	pods, err := h.Env.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		s.Pods++
		if p.Spec.NodeName == "" {
			s.Pending++
		} else {
			s.Bound++
			perNode[p.Spec.NodeName]++
		}
		if p.Status.Phase == corev1.PodRunning {
			s.Running++
		}
	}
	ncs, err := h.Env.Dynamic().Resource(NodeClaimResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	for _, o := range ncs.Items {
		ni := NodeClaimInfo{Name: o.GetName(), NodePool: o.GetLabels()[LabelNodePool],
			LaunchID: o.GetAnnotations()[karpv1.AnnotationLaunchID], Deleting: o.GetDeletionTimestamp() != nil, Created: o.GetCreationTimestamp().Time,
			DisruptionReason: o.GetAnnotations()[karpv1.AnnotationDisruptionReason]}
		ni.ProviderID, _, _ = unstructured.NestedString(o.Object, "status", "providerID")
		ni.NodeName, _, _ = unstructured.NestedString(o.Object, "status", "nodeName")
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		flags := map[string]*bool{"Launched": &ni.Launched, "Registered": &ni.Registered, "Initialized": &ni.Initialized,
			karpv1.ConditionInstanceTerminating: &ni.InstanceTerminating}
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			if flag := flags[typ]; flag != nil && m["status"] == "True" {
				*flag = true
			}
		}
		s.NodeClaims = append(s.NodeClaims, ni)
	}
	nodes, err := h.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID == "" {
			continue
		}
		ni := NodeInfo{Name: n.Name, ProviderID: n.Spec.ProviderID, InstanceType: n.Labels[LabelInstanceType],
			Zone: n.Labels[LabelZone], CapacityType: n.Labels[LabelCapacityType], Unschedulable: n.Spec.Unschedulable,
			Pods: perNode[n.Name]}
		ni.Price = Price(ni.InstanceType, ni.Zone, ni.CapacityType)
		for _, t := range n.Spec.Taints {
			if t.Key == "karpenter.sh/disrupted" || t.Key == corev1.TaintNodeUnschedulable ||
				strings.HasPrefix(t.Key, "aws-node-termination-handler/") || strings.HasPrefix(t.Key, "joiner.io/") {
				ni.Disrupted = true
			}
		}
		s.Nodes = append(s.Nodes, ni)
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	if s.Instances, err = h.Instances(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Price is the hourly price of an offering in the embedded catalogue, 0
// when unknown.
func Price(instanceType, zone, capacityType string) float64 {
	types := catalog.InstanceTypes(catalog.Options{Region: Region, Zones: catalog.DefaultZones(Region)})
	price, _ := view.OfferingPrice(types, map[string]string{
		LabelInstanceType: instanceType, LabelZone: zone, LabelCapacityType: capacityType})
	return price
}

// Cost is the hourly price of every Node.
func (s *State) Cost() float64 {
	var c float64
	for _, n := range s.Nodes {
		c += n.Price
	}
	return c
}

// Types summarises the Nodes' instance types: "c6a.2xlarge/spot x2, ...".
func (s *State) Types() string {
	count := map[string]int{}
	for _, n := range s.Nodes {
		count[n.InstanceType+"/"+n.CapacityType]++
	}
	parts := make([]string, 0, len(count))
	for _, k := range slices.Sorted(maps.Keys(count)) {
		if count[k] > 1 {
			parts = append(parts, fmt.Sprintf("%s x%d", k, count[k]))
		} else {
			parts = append(parts, k)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// LiveInstances counts the sim's instances that are pending or running.
func (s *State) LiveInstances() int {
	n := 0
	for _, in := range s.Instances {
		if in.State == "pending" || in.State == "running" {
			n++
		}
	}
	return n
}

// Line is a one-line status: pods, nodeclaims, nodes, instances, types and
// cost.
func (s *State) Line() string {
	var launched, registered, initialized, deleting int
	for _, nc := range s.NodeClaims {
		if nc.Launched {
			launched++
		}
		if nc.Registered {
			registered++
		}
		if nc.Initialized {
			initialized++
		}
		if nc.Deleting {
			deleting++
		}
	}
	ncs := fmt.Sprintf("nodeclaims %d (launched %d, registered %d, initialized %d", len(s.NodeClaims), launched, registered, initialized)
	if deleting > 0 {
		ncs += fmt.Sprintf(", deleting %d", deleting)
	}
	ncs += ")"
	nodes := strconv.Itoa(len(s.Nodes))
	cordoned := 0
	for _, n := range s.Nodes {
		if n.Unschedulable || n.Disrupted {
			cordoned++
		}
	}
	if cordoned > 0 {
		nodes += fmt.Sprintf(" (cordoned %d)", cordoned)
	}
	return fmt.Sprintf("pods %d: pending %d, bound %d, running %d | %s | nodes %s | instances %d | %s | $%.3f/h",
		s.Pods, s.Pending, s.Bound, s.Running, ncs, nodes, s.LiveInstances(), s.Types(), s.Cost())
}

// Duplicates checks launch uniqueness: among the sim's live instances
// (pending or running) no joiner.io/launch-id tag appears twice and no
// NodeClaim has two instances; it returns one message per violation.
func (s *State) Duplicates() []string {
	var out []string
	byLaunch := map[string][]string{}
	byClaim := map[string][]string{}
	for _, in := range s.Instances {
		if in.State != "pending" && in.State != "running" {
			continue
		}
		if id := in.Tags[karpv1.TagLaunchID]; id != "" {
			byLaunch[id] = append(byLaunch[id], in.ID)
		}
		if nc := in.Tags[karpv1.TagNodeClaim]; nc != "" {
			byClaim[nc] = append(byClaim[nc], in.ID)
		}
	}
	for id, ins := range byLaunch {
		if len(ins) > 1 {
			out = append(out, fmt.Sprintf("launch-id %s has %d instances: %v", id, len(ins), ins))
		}
	}
	for nc, ins := range byClaim {
		if len(ins) > 1 {
			out = append(out, fmt.Sprintf("nodeclaim %s has %d instances: %v", nc, len(ins), ins))
		}
	}
	sort.Strings(out)
	return out
}
