// Package top is the model of `joiner top`: a pure function from the
// cluster's objects (nodes, pods, NodeClaims, NodePools, pod events) to a
// Snapshot (nodes by NodePool with type, capacity type, zone, price and
// requests against allocatable; pending pods and why; disruption in
// progress), the renderer that lays a Snapshot out as a screen, and the
// bubbletea model that refreshes and scrolls it. Reading the cluster is the
// caller's business (cmd/joiner/top.go).
package top

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podresources"
)

// HoursPerMonth turns $/h into $/month: 730 hours, AWS's billing month
// (8760 h / 12).
const HoursPerMonth = 730

// NoNodePool groups the nodes no NodePool owns (managed node groups,
// static nodes).
const NoNodePool = "(none)"

// Node states, worst first where several apply.
const (
	StatusDeleting    = "Deleting"
	StatusDisrupting  = "Disrupting"
	StatusInterrupted = "Interrupted"
	StatusLaunching   = "Launching"
	StatusNotReady    = "NotReady"
	StatusCordoned    = "Cordoned"
	StatusReady       = "Ready"
)

// Cluster is what the view reads: the objects as the informers hold them
// (never modified).
type Cluster struct {
	// Name names the cluster in the header (kubeconfig context or server).
	Name       string
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
	NodeClaims []*karpv1.NodeClaim
	NodePools  []*karpv1.NodePool
	// Events are events about pods (FailedScheduling, Nominated, ...).
	Events []*corev1.Event
	// Warnings are shown as they are (a watch that fails, ...).
	Warnings []string
}

// Snapshot is one picture of the cluster: what the live view shows and
// what `joiner top -o json` prints.
type Snapshot struct {
	Time        time.Time    `json:"time"`
	Cluster     string       `json:"cluster,omitempty"`
	Totals      Totals       `json:"totals"`
	NodePools   []Pool       `json:"nodePools"`
	Pending     []PendingPod `json:"pendingPods"`
	Disruptions []Disruption `json:"disruptions"`
	// PriceNotes say where the prices come from (one line per table).
	PriceNotes []string `json:"priceNotes,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Totals add up the whole cluster.
type Totals struct {
	// Nodes counts Node objects; Launching counts NodeClaims without one.
	Nodes     int `json:"nodes"`
	Launching int `json:"launching"`
	// Pods counts pods bound to a node and not finished.
	Pods       int `json:"pods"`
	Pending    int `json:"pending"`
	Disrupting int `json:"disrupting"`
	// CPU in millicores, Memory in bytes: requests of bound pods against
	// the nodes' allocatable.
	CPU    Usage `json:"cpu"`
	Memory Usage `json:"memory"`
	Cost   Cost  `json:"cost"`
}

// Usage is requested against allocatable.
type Usage struct {
	Requested   int64 `json:"requested"`
	Allocatable int64 `json:"allocatable"`
}

func (u Usage) add(o Usage) Usage {
	return Usage{Requested: u.Requested + o.Requested, Allocatable: u.Allocatable + o.Allocatable}
}

// Percent is requested / allocatable in percent (0 without allocatable).
func (u Usage) Percent() float64 {
	if u.Allocatable <= 0 {
		return 0
	}
	return 100 * float64(u.Requested) / float64(u.Allocatable)
}

// Cost is the sum of the known node prices.
type Cost struct {
	PerHour  float64 `json:"perHour"`
	PerMonth float64 `json:"perMonth"`
	Currency string  `json:"currency"`
	// Unpriced counts the nodes left out because their price is unknown.
	Unpriced int `json:"unpriced"`
}

func (c *Cost) add(p Price) {
	if !p.Known {
		c.Unpriced++
		return
	}
	c.PerHour += p.PerHour
	if c.Currency == "" {
		c.Currency = p.Currency
	}
}

func (c *Cost) finish() {
	c.PerHour = round4(c.PerHour)
	c.PerMonth = round2(c.PerHour * HoursPerMonth)
	if c.Currency == "" {
		c.Currency = "USD"
	}
}

// Pool is one NodePool and its nodes.
type Pool struct {
	Name string `json:"name"`
	// Exists is false for a pool that nodes name but that has no NodePool
	// object, and for NoNodePool.
	Exists bool `json:"exists"`
	// Limits are the NodePool's spec.limits, as written.
	Limits map[string]string `json:"limits,omitempty"`
	Totals PoolTotals        `json:"totals"`
	Nodes  []Node            `json:"nodes"`
}

// PoolTotals add up one pool.
type PoolTotals struct {
	Nodes     int   `json:"nodes"`
	Launching int   `json:"launching"`
	Pods      int   `json:"pods"`
	CPU       Usage `json:"cpu"`
	Memory    Usage `json:"memory"`
	Cost      Cost  `json:"cost"`
}

// Node is a Node, or a NodeClaim that has none yet.
type Node struct {
	// Name is the Node's name, or the NodeClaim's while there is no Node.
	Name         string `json:"name"`
	NodeClaim    string `json:"nodeClaim,omitempty"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	Price        Price  `json:"price"`
	CPU          Usage  `json:"cpu"`
	Memory       Usage  `json:"memory"`
	Pods         int    `json:"pods"`
	PodCapacity  int64  `json:"podCapacity"`
	// Registered is true for a Node; false for a NodeClaim without one
	// (its CPU and Memory are the claim's allocatable, nothing requested).
	Registered bool `json:"registered"`
	// Status is one of the Status* constants.
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
}

// PendingPod is a pod no node runs yet, and the latest word on why.
type PendingPod struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Created   time.Time `json:"created"`
	// Reason and Message come from the newest of the PodScheduled
	// condition and the pod's events; Source names the event's reporter.
	Reason        string `json:"reason"`
	Message       string `json:"message,omitempty"`
	Source        string `json:"source,omitempty"`
	NominatedNode string `json:"nominatedNode,omitempty"`
	CPU           int64  `json:"cpu"`
	Memory        int64  `json:"memory"`
}

// Disruption is a node on its way out: a NodeClaim with the
// DisruptionReason condition or being deleted, a Node tainted
// karpenter.sh/disrupted (or joiner.io/interruption) or being deleted.
type Disruption struct {
	NodeClaim    string `json:"nodeClaim,omitempty"`
	Node         string `json:"node,omitempty"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType,omitempty"`
	Reason       string `json:"reason"`
	Message      string `json:"message,omitempty"`
	// Since is when it started, when known.
	Since    *time.Time `json:"since,omitempty"`
	Deleting bool       `json:"deleting"`
}

// Build takes a Snapshot of c at now. It is pure: same input, same output.
func Build(c Cluster, pricer Pricer, now time.Time) Snapshot {
	s := Snapshot{Time: now, Cluster: c.Name, Warnings: slices.Clone(c.Warnings)}
	claimByNode := map[string]*karpv1.NodeClaim{}
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range c.NodeClaims {
		if nc.Status.NodeName != "" {
			claimByNode[nc.Status.NodeName] = nc
		}
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}
	usage := podUsage(c.Pods)
	pools := map[string]*Pool{}
	pool := func(name string) *Pool {
		if p, ok := pools[name]; ok {
			return p
		}
		p := &Pool{Name: name}
		pools[name] = p
		return p
	}
	for _, np := range c.NodePools {
		p := pool(np.Name)
		p.Exists = true
		if len(np.Spec.Limits) > 0 {
			p.Limits = map[string]string{}
			for k, q := range np.Spec.Limits {
				p.Limits[string(k)] = q.String()
			}
		}
	}
	notes := map[string]bool{}
	claimed := map[string]bool{}
	disruptions := map[string]*Disruption{} // by NodeClaim name, else "node/" + Node name
	for _, n := range c.Nodes {
		nc := claimByNode[n.Name]
		if nc == nil && n.Spec.ProviderID != "" {
			nc = claimByProvider[n.Spec.ProviderID]
		}
		row := nodeRow(n, nc, pricer, usage[n.Name])
		if nc != nil {
			claimed[nc.Name] = true
		}
		if row.Price.Note != "" {
			notes[row.Price.Note] = true
		}
		if d := nodeDisruption(n, nc, row); d != nil {
			disruptions[disruptionKey(d)] = d
		}
		p := pool(row.NodePool)
		p.Nodes = append(p.Nodes, row)
	}
	for _, nc := range c.NodeClaims {
		if claimed[nc.Name] {
			continue
		}
		row := claimRow(nc, pricer)
		if row.Price.Note != "" && row.Price.Known {
			notes[row.Price.Note] = true
		}
		if d := nodeDisruption(nil, nc, row); d != nil {
			disruptions[disruptionKey(d)] = d
		}
		p := pool(row.NodePool)
		p.Nodes = append(p.Nodes, row)
	}
	for _, p := range pools {
		slices.SortFunc(p.Nodes, func(a, b Node) int { return naturalCompare(a.Name, b.Name) })
		for _, n := range p.Nodes {
			if !n.Registered {
				// Not running pods yet; it costs once launched.
				p.Totals.Launching++
				if n.Price.Known {
					p.Totals.Cost.add(n.Price)
				}
				continue
			}
			p.Totals.Nodes++
			p.Totals.Pods += n.Pods
			p.Totals.CPU = p.Totals.CPU.add(n.CPU)
			p.Totals.Memory = p.Totals.Memory.add(n.Memory)
			p.Totals.Cost.add(n.Price)
		}
		// The cluster's cost adds the pools' unrounded sums.
		s.Totals.Cost.PerHour += p.Totals.Cost.PerHour
		p.Totals.Cost.finish()
		s.Totals.Nodes += p.Totals.Nodes
		s.Totals.Launching += p.Totals.Launching
		s.Totals.Pods += p.Totals.Pods
		s.Totals.CPU = s.Totals.CPU.add(p.Totals.CPU)
		s.Totals.Memory = s.Totals.Memory.add(p.Totals.Memory)
		s.Totals.Cost.Unpriced += p.Totals.Cost.Unpriced
		if s.Totals.Cost.Currency == "" && p.Totals.Cost.PerHour > 0 {
			s.Totals.Cost.Currency = p.Totals.Cost.Currency
		}
		s.NodePools = append(s.NodePools, *p)
	}
	s.Totals.Cost.finish()
	slices.SortFunc(s.NodePools, func(a, b Pool) int {
		// NodePools first, then pools only nodes name, then NoNodePool.
		rank := func(p Pool) int {
			switch {
			case p.Name == NoNodePool:
				return 2
			case !p.Exists:
				return 1
			}
			return 0
		}
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Name, b.Name))
	})
	s.Pending = pendingPods(c.Pods, c.Events)
	s.Totals.Pending = len(s.Pending)
	for _, d := range disruptions {
		s.Disruptions = append(s.Disruptions, *d)
	}
	slices.SortFunc(s.Disruptions, func(a, b Disruption) int {
		return cmp.Or(compareSince(a.Since, b.Since), cmp.Compare(disruptionKey(&a), disruptionKey(&b)))
	})
	s.Totals.Disrupting = len(s.Disruptions)
	s.PriceNotes = slices.Sorted(maps.Keys(notes))
	if s.NodePools == nil {
		s.NodePools = []Pool{}
	}
	if s.Pending == nil {
		s.Pending = []PendingPod{}
	}
	if s.Disruptions == nil {
		s.Disruptions = []Disruption{}
	}
	return s
}

// nodeRow is the row of a Node (and its NodeClaim, if any).
func nodeRow(n *corev1.Node, nc *karpv1.NodeClaim, pricer Pricer, u nodeUsage) Node {
	labels := n.Labels
	row := Node{
		Name:         n.Name,
		NodePool:     n.Labels[karpv1.LabelNodePool],
		InstanceType: instanceTypeOf(labels),
		CapacityType: capacityTypeOf(labels),
		Zone:         labels[karpv1.LabelZone],
		Pods:         u.pods,
		CPU:          Usage{Requested: u.cpu, Allocatable: n.Status.Allocatable.Cpu().MilliValue()},
		Memory:       Usage{Requested: u.memory, Allocatable: n.Status.Allocatable.Memory().Value()},
		PodCapacity:  n.Status.Allocatable.Pods().Value(),
		Created:      n.CreationTimestamp.Time,
		Registered:   true,
	}
	if nc != nil {
		row.NodeClaim = nc.Name
		if row.NodePool == "" {
			row.NodePool = nc.Labels[karpv1.LabelNodePool]
		}
		if row.InstanceType == "" {
			row.InstanceType = instanceTypeOf(nc.Labels)
		}
		if row.CapacityType == "" {
			row.CapacityType = capacityTypeOf(nc.Labels)
		}
		if row.Zone == "" {
			row.Zone = nc.Labels[karpv1.LabelZone]
		}
	}
	if row.NodePool == "" {
		row.NodePool = NoNodePool
	}
	region := regionOf(labels)
	if region == "" && nc != nil {
		region = regionOf(nc.Labels)
	}
	row.Price = pricer.Price(row.InstanceType, row.CapacityType, region, row.Zone)
	row.Status = nodeStatus(n, nc)
	return row
}

// claimRow is the row of a NodeClaim whose Node has not registered. Its
// price counts once it launched (it has a provider ID).
func claimRow(nc *karpv1.NodeClaim, pricer Pricer) Node {
	row := Node{
		Name:         nc.Name,
		NodeClaim:    nc.Name,
		NodePool:     cmp.Or(nc.Labels[karpv1.LabelNodePool], NoNodePool),
		InstanceType: instanceTypeOf(nc.Labels),
		CapacityType: capacityTypeOf(nc.Labels),
		Zone:         nc.Labels[karpv1.LabelZone],
		CPU:          Usage{Allocatable: nc.Status.Allocatable.Cpu().MilliValue()},
		Memory:       Usage{Allocatable: nc.Status.Allocatable.Memory().Value()},
		PodCapacity:  nc.Status.Allocatable.Pods().Value(),
		Created:      nc.CreationTimestamp.Time,
		Status:       StatusLaunching,
	}
	if nc.DeletionTimestamp != nil {
		row.Status = StatusDeleting
	}
	if nc.Status.ProviderID != "" && row.InstanceType != "" {
		row.Price = pricer.Price(row.InstanceType, row.CapacityType, regionOf(nc.Labels), row.Zone)
	} else {
		row.Price = Price{Source: SourceUnknown}
	}
	return row
}

func nodeStatus(n *corev1.Node, nc *karpv1.NodeClaim) string {
	switch {
	case n.DeletionTimestamp != nil || nc != nil && nc.DeletionTimestamp != nil:
		return StatusDeleting
	case hasTaint(n, karpv1.TaintDisruptedKey) || nc != nil && conditionTrue(nc, karpv1.ConditionDisruptionReason):
		return StatusDisrupting
	case hasTaint(n, karpv1.TaintInterruptionKey):
		return StatusInterrupted
	case !nodeReady(n):
		return StatusNotReady
	case n.Spec.Unschedulable:
		return StatusCordoned
	}
	return StatusReady
}

// nodeDisruption is the disruption of a node or a claim, nil when neither
// is on its way out. n may be nil.
func nodeDisruption(n *corev1.Node, nc *karpv1.NodeClaim, row Node) *Disruption {
	d := &Disruption{NodePool: row.NodePool, InstanceType: row.InstanceType}
	var since []time.Time
	on := false
	if n != nil {
		d.Node = n.Name
		if n.DeletionTimestamp != nil {
			on, d.Deleting = true, true
			since = append(since, n.DeletionTimestamp.Time)
		}
		for _, key := range []string{karpv1.TaintDisruptedKey, karpv1.TaintInterruptionKey} {
			if t := taint(n, key); t != nil {
				on = true
				if d.Reason == "" && key == karpv1.TaintInterruptionKey {
					d.Reason = "Interrupted"
				}
				if t.TimeAdded != nil {
					since = append(since, t.TimeAdded.Time)
				}
			}
		}
	}
	if nc != nil {
		d.NodeClaim = nc.Name
		if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
			on = true
			d.Reason, d.Message = c.Reason, c.Message
			since = append(since, c.LastTransitionTime.Time)
		}
		if nc.DeletionTimestamp != nil {
			on, d.Deleting = true, true
			since = append(since, nc.DeletionTimestamp.Time)
		}
		if d.Reason == "" {
			d.Reason = nc.Annotations[karpv1.AnnotationDisruptionReason]
		}
	}
	if !on {
		return nil
	}
	if d.Reason == "" {
		d.Reason = "Disrupted"
		if d.Deleting {
			d.Reason = "Deleting"
		}
	}
	for _, t := range since {
		if !t.IsZero() && (d.Since == nil || t.Before(*d.Since)) {
			d.Since = &t
		}
	}
	return d
}

func disruptionKey(d *Disruption) string {
	if d.NodeClaim != "" {
		return d.NodeClaim
	}
	return "node/" + d.Node
}

func compareSince(a, b *time.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return a.Compare(*b)
}

type nodeUsage struct {
	pods        int
	cpu, memory int64
}

// podUsage sums, per node, the requests of the pods bound there that have
// not finished.
func podUsage(pods []*corev1.Pod) map[string]nodeUsage {
	out := map[string]nodeUsage{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || finished(p) {
			continue
		}
		cpu, mem := podRequests(p)
		u := out[p.Spec.NodeName]
		u.pods++
		u.cpu += cpu
		u.memory += mem
		out[p.Spec.NodeName] = u
	}
	return out
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podRequests is the pod's effective CPU (millicores) and memory (bytes)
// request, as the scheduler counts it (podresources.Requests).
func podRequests(p *corev1.Pod) (cpu, memory int64) {
	r := podresources.Requests(p)
	return r.Cpu().MilliValue(), r.Memory().Value()
}

// pendingPods are the pods not bound to a node, oldest first, each with
// the newest of its PodScheduled condition and its events.
func pendingPods(pods []*corev1.Pod, events []*corev1.Event) []PendingPod {
	latest := map[string]*corev1.Event{} // by pod UID
	for _, e := range events {
		uid := string(e.InvolvedObject.UID)
		if e.InvolvedObject.Kind != "Pod" || uid == "" {
			continue
		}
		if cur := latest[uid]; cur == nil || eventTime(e).After(eventTime(cur)) ||
			eventTime(e).Equal(eventTime(cur)) && e.Name > cur.Name {
			latest[uid] = e
		}
	}
	var out []PendingPod
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		cpu, mem := podRequests(p)
		pp := PendingPod{Namespace: p.Namespace, Name: p.Name, Created: p.CreationTimestamp.Time, Reason: "Pending",
			NominatedNode: p.Status.NominatedNodeName, CPU: cpu, Memory: mem}
		var condTime time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				pp.Reason = cmp.Or(c.Reason, pp.Reason)
				pp.Message = c.Message
				condTime = c.LastTransitionTime.Time
			}
		}
		if e := latest[string(p.UID)]; e != nil && !eventTime(e).Before(condTime) {
			pp.Reason, pp.Message = e.Reason, e.Message
			pp.Source = cmp.Or(e.Source.Component, e.ReportingController)
		}
		out = append(out, pp)
	}
	slices.SortFunc(out, func(a, b PendingPod) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// eventTime is when an event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// naturalCompare orders names with their digit runs read as numbers
// (ip-10-0-0-2 before ip-10-0-0-10).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), cmp.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits is the length of the run of ASCII digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func taint(n *corev1.Node, key string) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool { return taint(n, key) != nil }

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func conditionTrue(nc *karpv1.NodeClaim, typ string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, typ)
}

func round4(f float64) float64 { return float64(int64(f*1e4+0.5)) / 1e4 }
func round2(f float64) float64 { return float64(int64(f*1e2+0.5)) / 1e2 }

// String is a one-line summary, for logs.
func (s Snapshot) String() string {
	return fmt.Sprintf("%d nodes, %d pods, %d pending, %d disrupting, %.4f %s/h",
		s.Totals.Nodes, s.Totals.Pods, s.Totals.Pending, s.Totals.Disrupting, s.Totals.Cost.PerHour, s.Totals.Cost.Currency)
}
