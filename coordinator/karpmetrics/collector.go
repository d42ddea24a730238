package karpmetrics

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/podresources"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Cache is what the collector reads of the informer cache (kube.Cache).
type Cache interface {
	Nodes() []*corev1.Node
	Pods() []*corev1.Pod
	NodePools() []*karpv1.NodePool
	NodeClaims() []*karpv1.NodeClaim
	Synced() bool
}

// CollectorConfig configures a Collector.
type CollectorConfig struct {
	Cache Cache
	// Classes are the published EC2NodeClasses (instance types, offerings
	// and prices); nil exports no cloudprovider or cost gauges.
	Classes view.Classes
	// Leading says whether this replica leads; the gauges are exported by
	// the leader only (as Karpenter's, whose metrics controllers run on the
	// elected replica), so sums over replicas count each node once. Nil:
	// always.
	Leading func() bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Collector derives Karpenter's gauges from the cache at scrape time:
// karpenter_nodes_* (allocatable, requests, limits, overhead, lifetime),
// karpenter_cluster_utilization_percent, karpenter_pods_state,
// karpenter_nodepools_usage, _limit and _cost_total (pools of an
// EC2NodeClass only), karpenter_cluster_state_*, and the instance type and
// offering gauges of karpenter_cloudprovider_*. The pods' unbound and
// unstarted times follow each pod from Pending (Pods).
type Collector struct {
	cfg        CollectorConfig
	nodeLabels []string // well-known label keys, in the order of nodeNames

	allocatable, podRequests, podLimits, daemonRequests, daemonLimits, overhead, lifetime *prometheus.Desc
	utilization                                                                           *prometheus.Desc
	podState                                                                              *prometheus.Desc
	poolUsage, poolLimit, poolCost                                                        *prometheus.Desc
	stateNodes, stateSynced, stateUnsynced                                                *prometheus.Desc
	offeringAvailable, offeringPrice, typeCPU, typeMemory                                 *prometheus.Desc

	mu            sync.Mutex
	unsyncedSince time.Time
}

// Karpenter's node metric labels besides the well-known ones.
const (
	labelNodeName = "node_name"
	labelPhase    = "phase"
	labelManaged  = "managed"
)

// podStateLabels are karpenter_pods_state's labels, in order.
var podStateLabels = []string{labelPodName, labelPodNamespace, "owner", "node", "scheduled", labelNodePool, labelZone, "arch",
	labelCapacityType, "instance_type", labelPhase, "ready", labelManaged}

// NewCollector returns a Collector; register it on the registry /metrics
// serves.
func NewCollector(cfg CollectorConfig) *Collector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	keys, names := wellKnownLabelNames()
	nodeNames := append(slices.Clone(names), labelNodeName, labelPhase, labelManaged)
	withResource := append(slices.Clone(nodeNames), labelResourceType)
	return &Collector{cfg: cfg, nodeLabels: keys,
		allocatable: prometheus.NewDesc("karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", withResource, nil),
		podRequests: prometheus.NewDesc("karpenter_nodes_total_pod_requests",
			"Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.", withResource, nil),
		podLimits: prometheus.NewDesc("karpenter_nodes_total_pod_limits",
			"Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.", withResource, nil),
		daemonRequests: prometheus.NewDesc("karpenter_nodes_total_daemon_requests",
			"Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.", withResource, nil),
		daemonLimits: prometheus.NewDesc("karpenter_nodes_total_daemon_limits",
			"Node total daemon limits are the resources specified by DaemonSet pod limits.", withResource, nil),
		overhead: prometheus.NewDesc("karpenter_nodes_system_overhead",
			"Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity "+
				"and allocatable values are reported by the status.", withResource, nil),
		lifetime:    prometheus.NewDesc("karpenter_nodes_current_lifetime_seconds", "Node age in seconds", nodeNames, nil),
		utilization: prometheus.NewDesc("karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests", []string{labelResourceType}, nil),
		podState: prometheus.NewDesc("karpenter_pods_state",
			"Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, "+
				"owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.", podStateLabels, nil),
		poolUsage: prometheus.NewDesc("karpenter_nodepools_usage",
			"The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
			[]string{labelResourceType, labelNodePool}, nil),
		poolLimit: prometheus.NewDesc("karpenter_nodepools_limit",
			"Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
			[]string{labelResourceType, labelNodePool}, nil),
		poolCost: prometheus.NewDesc("karpenter_nodepools_cost_total",
			"Total cost of the nodepool from Karpenter's perspective. Units are determined by the cloud provider. Not an authoritative "+
				"source for billing.", []string{labelNodePool}, nil),
		stateNodes: prometheus.NewDesc("karpenter_cluster_state_node_count", "Current count of nodes in cluster state", nil, nil),
		stateSynced: prometheus.NewDesc("karpenter_cluster_state_synced",
			"Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the "+
				"APIServer have the same representation as Karpenter's cluster state", nil, nil),
		stateUnsynced: prometheus.NewDesc("karpenter_cluster_state_unsynced_time_seconds", "The time for which cluster state is not synced", nil, nil),
		offeringAvailable: prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_available",
			"Instance type offering availability, based on instance type, capacity type, and zone",
			[]string{"instance_type", labelCapacityType, labelZone}, nil),
		offeringPrice: prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_price_estimate",
			"Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on "+
				"instance type, capacity type, and zone.", []string{"instance_type", labelCapacityType, labelZone}, nil),
		typeCPU:    prometheus.NewDesc("karpenter_cloudprovider_instance_type_cpu_cores", "VCPUs cores for a given instance type.", []string{"instance_type"}, nil),
		typeMemory: prometheus.NewDesc("karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for a given instance type.", []string{"instance_type"}, nil),
	}
}

// wellKnownLabelNames maps Karpenter's well-known node labels to metric
// label names the way Karpenter does (the part after the slash, lower
// case, dashes to underscores), sorted by metric label name; a name two
// keys share keeps the first key.
func wellKnownLabelNames() (keys, names []string) {
	byName := map[string]string{}
	for key := range karpv1.WellKnownLabels {
		_, suffix, ok := strings.Cut(key, "/")
		if !ok || strings.Contains(suffix, "/") {
			continue
		}
		name := strings.ReplaceAll(strings.ToLower(suffix), "-", "_")
		if prev, dup := byName[name]; !dup || key < prev {
			byName[name] = key
		}
	}
	names = slices.Sorted(func(yield func(string) bool) {
		for n := range byName {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		keys = append(keys, byName[n])
	}
	return keys, names
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.allocatable, c.podRequests, c.podLimits, c.daemonRequests, c.daemonLimits, c.overhead,
		c.lifetime, c.utilization, c.podState, c.poolUsage, c.poolLimit, c.poolCost,
		c.stateNodes, c.stateSynced, c.stateUnsynced, c.offeringAvailable, c.offeringPrice, c.typeCPU, c.typeMemory} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.cfg.Leading != nil && !c.cfg.Leading() {
		return
	}
	now := c.cfg.Now()
	nodes := c.cfg.Cache.Nodes()
	podsByNode := map[string][]*corev1.Pod{}
	pods := c.cfg.Cache.Pods()
	for _, p := range pods {
		if p.Spec.NodeName != "" && !podutil.Terminal(p) {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		}
	}
	c.collectNodes(ch, nodes, podsByNode, now)
	c.collectPods(ch, pods, nodes)
	c.collectPools(ch)
	c.collectState(ch, nodes, now)
	c.collectCloud(ch)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// resourceLabel is Karpenter's resource_type value of a resource name.
func resourceLabel(n corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(n)), "-", "_")
}

func (c *Collector) collectNodes(ch chan<- prometheus.Metric, nodes []*corev1.Node, podsByNode map[string][]*corev1.Pod, now time.Time) {
	// A node is managed when a NodeClaim of Joiner's names its provider ID
	// (Karpenter's StateNode.Managed), whatever its labels say.
	managed := map[string]bool{}
	for _, nc := range c.cfg.Cache.NodeClaims() {
		if nc.Status.ProviderID != "" && awsv1.ManagesNodeClaim(nc) {
			managed[nc.Status.ProviderID] = true
		}
	}
	allocTotal, requestTotal := corev1.ResourceList{}, corev1.ResourceList{}
	for _, n := range nodes {
		labels := make([]string, 0, len(c.nodeLabels)+4)
		for _, k := range c.nodeLabels {
			labels = append(labels, n.Labels[k])
		}
		labels = append(labels, n.Name, string(n.Status.Phase), strconv.FormatBool(n.Spec.ProviderID != "" && managed[n.Spec.ProviderID]))
		// Every allocatable resource has its request and limit series, zero
		// when no pod asks for it (Karpenter's appear with the first pod),
		// so series do not come and go with pods.
		podReq, podLim, dsReq, dsLim := zeros(n.Status.Allocatable), zeros(n.Status.Allocatable), zeros(n.Status.Allocatable), zeros(n.Status.Allocatable)
		for _, p := range podsByNode[n.Name] {
			r, l := podresources.Requests(p), podresources.Limits(p)
			podresources.Add(podReq, r)
			podresources.Add(podLim, l)
			if podutil.OwnedByDaemonSet(p) {
				podresources.Add(dsReq, r)
				podresources.Add(dsLim, l)
			}
		}
		for d, list := range map[*prometheus.Desc]corev1.ResourceList{c.allocatable: n.Status.Allocatable, c.podRequests: podReq,
			c.podLimits: podLim, c.daemonRequests: dsReq, c.daemonLimits: dsLim, c.overhead: subtract(n.Status.Capacity, n.Status.Allocatable)} {
			for name, q := range list {
				gauge(ch, d, value(name, q), append(slices.Clone(labels), resourceLabel(name))...)
			}
		}
		gauge(ch, c.lifetime, now.Sub(n.CreationTimestamp.Time).Seconds(), labels...)
		podresources.Add(allocTotal, n.Status.Allocatable)
		podresources.Add(requestTotal, podReq)
	}
	for name, alloc := range allocTotal {
		if alloc.IsZero() {
			continue
		}
		used := requestTotal[name]
		pct := 100 * float64(used.Value()) / float64(alloc.Value())
		if name == corev1.ResourceCPU {
			pct = 100 * float64(used.MilliValue()) / float64(alloc.MilliValue())
		}
		gauge(ch, c.utilization, pct, resourceLabel(name))
	}
}

// zeros has a zero quantity for each resource of l.
func zeros(l corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(l))
	for n := range l {
		out[n] = resource.Quantity{}
	}
	return out
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func isTrue(c *corev1.PodCondition) bool { return c != nil && c.Status == corev1.ConditionTrue }

// owner is Karpenter's owner label: the self link of the pod's first
// owner.
func owner(p *corev1.Pod) string {
	if len(p.OwnerReferences) == 0 {
		return ""
	}
	o := p.OwnerReferences[0]
	return fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", o.APIVersion, p.Namespace, strings.ToLower(o.Kind), o.Name)
}

func (c *Collector) collectPods(ch chan<- prometheus.Metric, pods []*corev1.Pod, nodes []*corev1.Node) {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, p := range pods {
		var nl map[string]string
		if n := byName[p.Spec.NodeName]; n != nil {
			nl = n.Labels
		}
		gauge(ch, c.podState, 1, p.Name, p.Namespace, owner(p), p.Spec.NodeName, strconv.FormatBool(p.Spec.NodeName != ""),
			nl[karpv1.LabelNodePool], nl[karpv1.LabelZone], nl[karpv1.LabelArch], nl[karpv1.LabelCapacityType], nl[karpv1.LabelInstanceType],
			string(p.Status.Phase), strconv.FormatBool(isTrue(condition(p, corev1.PodReady))), strconv.FormatBool(nl[karpv1.LabelNodePool] != ""))
	}
}

func (c *Collector) collectPools(ch chan<- prometheus.Metric) {
	cost := map[string]float64{}
	for _, p := range c.cfg.Cache.NodePools() {
		if ref := p.Spec.Template.Spec.NodeClassRef; ref != nil && !awsv1.Manages(ref) {
			continue // another provider's (Karpenter's IsManaged)
		}
		cost[p.Name] = 0
		for name, q := range p.Status.Resources {
			gauge(ch, c.poolUsage, value(name, q), resourceLabel(name), p.Name)
		}
		for name, q := range p.Spec.Limits {
			gauge(ch, c.poolLimit, value(name, q), resourceLabel(name), p.Name)
		}
	}
	if c.cfg.Classes != nil {
		classes := c.cfg.Classes.Classes()
		for _, nc := range c.cfg.Cache.NodeClaims() {
			pool := nc.Labels[karpv1.LabelNodePool]
			if _, ok := cost[pool]; !ok || nc.Spec.NodeClassRef == nil {
				continue
			}
			cost[pool] += price(classes[nc.Spec.NodeClassRef.Name], nc.Labels)
		}
	}
	for pool, v := range cost {
		gauge(ch, c.poolCost, v, pool)
	}
}

// price is the hourly price of the offering a NodeClaim launched into (its
// instance type, zone and capacity type labels), 0 when unknown.
func price(class *view.Class, labels map[string]string) float64 {
	if class == nil {
		return 0
	}
	p, _ := view.OfferingPrice(class.InstanceTypes, labels)
	return p
}

func (c *Collector) collectState(ch chan<- prometheus.Metric, nodes []*corev1.Node, now time.Time) {
	count := len(nodes)
	named := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		named[n.Name] = true
	}
	for _, nc := range c.cfg.Cache.NodeClaims() {
		if nc.Status.NodeName == "" || !named[nc.Status.NodeName] {
			count++ // in flight: a state node without its Node yet
		}
	}
	gauge(ch, c.stateNodes, float64(count))
	synced := c.cfg.Cache.Synced()
	c.mu.Lock()
	var unsynced time.Duration
	switch {
	case synced:
		c.unsyncedSince = time.Time{}
	case c.unsyncedSince.IsZero():
		c.unsyncedSince = now
	default:
		unsynced = now.Sub(c.unsyncedSince)
	}
	c.mu.Unlock()
	gauge(ch, c.stateSynced, map[bool]float64{true: 1, false: 0}[synced])
	gauge(ch, c.stateUnsynced, unsynced.Seconds())
}

type offeringKey struct{ instanceType, capacityType, zone string }

func (c *Collector) collectCloud(ch chan<- prometheus.Metric) {
	if c.cfg.Classes == nil {
		return
	}
	available, prices := map[offeringKey]bool{}, map[offeringKey]float64{}
	cpu, memory := map[string]float64{}, map[string]float64{}
	for _, class := range c.cfg.Classes.Classes() {
		for _, it := range class.InstanceTypes {
			if v, err := strconv.ParseFloat(it.Labels[karpv1.LabelInstanceCPU], 64); err == nil {
				cpu[it.Name] = v
			}
			if v, err := strconv.ParseFloat(it.Labels[karpv1.LabelInstanceMemory], 64); err == nil {
				memory[it.Name] = v * 1024 * 1024 // MiB
			}
			for _, o := range it.Offerings {
				k := offeringKey{it.Name, o.CapacityType, o.Zone}
				available[k] = available[k] || o.Available
				prices[k] = o.Price
			}
		}
	}
	for k, ok := range available {
		gauge(ch, c.offeringAvailable, map[bool]float64{true: 1, false: 0}[ok], k.instanceType, k.capacityType, k.zone)
		gauge(ch, c.offeringPrice, prices[k], k.instanceType, k.capacityType, k.zone)
	}
	for name, v := range cpu {
		gauge(ch, c.typeCPU, v, name)
	}
	for name, v := range memory {
		gauge(ch, c.typeMemory, v, name)
	}
}
