package disruption

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// methodConsolidation tags candidate-filter skips shared by emptiness and
// both consolidation methods.
const methodConsolidation Method = "Consolidation"

type decider struct {
	in    *Input
	pools map[string]*karpv1.NodePool
	pdbs  podutil.PDBs
	// poolNodes / disrupting count initialized managed nodes per pool and
	// those being disrupted (deleting or NotReady), as Karpenter does.
	poolNodes, disrupting map[string]int
	// types indexes each class's catalogue by instance type name.
	types   map[string]map[string]*catalog.InstanceType
	skipped []Skip
	// moves are the consolidation moves scored this pass (Result.Moves).
	moves []Move
	bound *capacityBound
	// simulations counts scheduler runs; nextOffset is where single-node
	// consolidation stopped.
	simulations, nextOffset int
	// totals are the Balanced score's denominators (poolTotals).
	totals map[string]PoolTotals
	// tables keeps the pools' instance-type tables between simulations.
	tables scheduler.TypeTables
	// settling are the simulation copies of the nodes under their
	// consolidateAfter (destination).
	settling map[*Node]*scheduler.Node
}

func newDecider(in *Input) *decider {
	d := &decider{in: in, pools: map[string]*karpv1.NodePool{}, poolNodes: map[string]int{}, disrupting: map[string]int{}}
	for _, p := range in.NodePools {
		d.pools[p.Name] = p
	}
	for _, n := range in.Nodes {
		// Karpenter's BuildDisruptionBudgetMapping: managed, initialized
		// nodes count, except those whose instance is already terminating
		// (drained, their termination requested); deleting or NotReady
		// ones use up the budget.
		if n.NodeClaim == nil || !n.Initialized || instanceTerminating(n.NodeClaim) {
			continue
		}
		pn := n.Pool()
		d.poolNodes[pn]++
		if d.deleting(n) || !n.Ready {
			d.disrupting[pn]++
		}
	}
	return d
}

// Expiration is Decide's first method alone: the NodeClaims past
// expireAfter. Karpenter expires them in a controller of its own, which a
// consolidation waiting for its validation never holds up.
func Expiration(in *Input) (*Decision, error) { return newDecider(in).expiration() }

// Decide picks at most one disruption action for this pass. The error is
// for input it cannot trust (a bad PDB selector). A pool whose budgets do
// not parse allows no disruption and the others go on (PoolBudgets says
// which).
func Decide(in *Input) (*Result, error) {
	d := newDecider(in)
	var err error
	if d.pdbs, err = podutil.NewPDBs(in.PDBs); err != nil {
		return nil, err
	}
	res := &Result{}
	type method struct {
		m      Method
		decide func() (*Decision, error)
	}
	methods := []method{
		{MethodExpiration, d.expiration}, {MethodEmptiness, d.emptiness}, {MethodStaticDrift, d.staticDrift},
		{MethodDrift, d.drift}, {MethodMultiNode, d.multiNode}, {MethodSingleNode, d.singleNode},
	}
	after := slices.IndexFunc(methods, func(x method) bool { return x.m == in.After })
	for i, m := range methods {
		if i > 0 && i <= after {
			continue // its decision just failed validation: go on from the next
		}
		if in.Settling != "" && (m.m == MethodMultiNode || m.m == MethodSingleNode) {
			continue
		}
		dec, err := m.decide()
		if err != nil {
			return nil, err
		}
		if dec != nil {
			res.Decision = dec
			break
		}
	}
	res.Skipped = d.skipped
	res.Moves = d.moves
	res.NextSingleNodeOffset = d.nextOffset
	if after == len(methods)-1 || in.Settling != "" {
		res.NextSingleNodeOffset = in.SingleNodeOffset // single-node did not run
	}
	return res, nil
}

// blocked records that n was left alone by m for a reason that keeps it
// from disruption altogether (Karpenter's DisruptionBlocked Event).
func (d *decider) blocked(n *Node, m Method, format string, args ...any) {
	d.skipAs(n, m, EventDisruptionBlocked, format, args...)
}

// budgetBlocked records that n was left alone by m because its pool's
// budget allows no more disruptions (Skip.Budget).
func (d *decider) budgetBlocked(n *Node, m Method, format string, args ...any) {
	d.blocked(n, m, format, args...)
	d.skipped[len(d.skipped)-1].Budget = true
}

// unconsolidatable records that consolidation left n alone (Karpenter's
// Unconsolidatable Event).
func (d *decider) unconsolidatable(n *Node, m Method, format string, args ...any) {
	d.skipAs(n, m, EventUnconsolidatable, format, args...)
}

func (d *decider) skipAs(n *Node, m Method, event, format string, args ...any) {
	d.skipped = append(d.skipped, Skip{Node: n.Name(), Method: m, Reason: sentence(fmt.Sprintf(format, args...)), Event: event})
}

// sentence upper-cases the first letter, as Karpenter does to the errors
// its Events carry.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// budgets is the remaining allowance per pool for reason. A pool whose
// budgets do not parse allows nothing (Karpenter's
// MustGetAllowedDisruptions); the others are unaffected.
func (d *decider) budgets(reason karpv1.DisruptionReason) map[string]int {
	out := map[string]int{}
	for name, p := range d.pools {
		// On an error n is 0: the pool fails closed.
		n, _ := AllowedDisruptions(p, reason, d.poolNodes[name], d.disrupting[name], d.in.Now)
		out[name] = n
	}
	return out
}

// expiration removes every NodeClaim past expireAfter, forcefully: budgets,
// do-not-disrupt and PDBs do not stop it (they only pace the drain).
func (d *decider) expiration() (*Decision, error) {
	var out []*Node
	for _, n := range d.in.Nodes {
		if n.NodeClaim == nil || d.deleting(n) {
			continue
		}
		exp, ok := d.expireAfter(n)
		if !ok {
			continue
		}
		if at := n.NodeClaim.CreationTimestamp.Add(exp); !d.in.Now.Before(at) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &Decision{Method: MethodExpiration, Candidates: out, Message: fmt.Sprintf("%d nodeclaim(s) past expireAfter", len(out))}, nil
}

// consolidationCandidates are the nodes emptiness and consolidation may
// consider, highest price per unit of disruption first (Karpenter v1.14.1's
// sortCandidates: a batch of the first N holds the moves worth most). Nodes
// of static pools are never consolidated. Skips are recorded when record.
func (d *decider) consolidationCandidates(record bool) []*Node {
	var out []*Node
	for _, n := range d.in.Nodes {
		if n.NodeClaim == nil {
			continue
		}
		switch event, why := d.notConsolidatable(n); {
		case event == "" && why == "":
			out = append(out, n)
		case record && event != "":
			d.skipAs(n, methodConsolidation, event, "%s", why)
		}
	}
	ratio := make(map[*Node]float64, len(out))
	for _, n := range out {
		ratio[n] = savingsRatio(n)
	}
	sort.SliceStable(out, func(i, j int) bool { return ratio[out[i]] > ratio[out[j]] })
	return out
}

// notConsolidatable is why consolidation leaves n alone now, with the
// Event that says so ("" when it says nothing), or "", "" when n is a
// candidate. n has a NodeClaim.
func (d *decider) notConsolidatable(n *Node) (event, why string) {
	pool := d.pools[n.Pool()]
	if pool == nil {
		return EventDisruptionBlocked, fmt.Sprintf("NodePool not found (NodePool=%s)", n.Pool())
	}
	if isStatic(pool) {
		return "", "its NodePool is static" // never consolidated (Karpenter says nothing either)
	}
	if r := d.gracefulBlocker(n, false); r != "" {
		return EventDisruptionBlocked, r
	}
	at, ok := consolidatableAt(n, pool)
	if !ok {
		return EventUnconsolidatable, fmt.Sprintf("NodePool %q has consolidation disabled", pool.Name)
	}
	if d.in.Now.Before(at) {
		return EventUnconsolidatable, fmt.Sprintf("not consolidatable until %s (consolidateAfter %s)", at.UTC().Format(time.RFC3339), pool.Spec.Disruption.ConsolidateAfter)
	}
	return "", ""
}

// isStatic: the pool keeps a fixed number of nodes (spec.replicas).
func isStatic(p *karpv1.NodePool) bool { return p.Spec.Replicas != nil }

// emptiness deletes every consolidatable empty node (no pod that costs
// anything to reschedule, see isEmpty), up to each pool's Empty budget.
func (d *decider) emptiness() (*Decision, error) {
	budget := d.budgets(karpv1.DisruptionReasonEmpty)
	var out []*Node
	for _, n := range d.consolidationCandidates(true) {
		if !isEmpty(n) {
			continue
		}
		pn := n.Pool()
		if budget[pn] <= 0 {
			d.budgetBlocked(n, MethodEmptiness, "empty, but the disruption budget of nodepool %s for reason Empty allows no more disruptions", pn)
			continue
		}
		budget[pn]--
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &Decision{Method: MethodEmptiness, Reason: karpv1.DisruptionReasonEmpty, Candidates: out, Savings: totalPrice(out), Message: fmt.Sprintf("%d empty node(s)", len(out))}, nil
}

// Drift reasons, Karpenter's (the Drifted condition's reason).
const (
	DriftNodePool            = "NodePoolDrifted"
	DriftRequirements        = "RequirementsDrifted"
	DriftInstanceTypeMissing = "InstanceTypeNotFound"
	DriftNodeClass           = "NodeClassDrift"
	DriftAMI                 = "AMIDrift"
	DriftSecurityGroup       = "SecurityGroupDrift"
	DriftSubnet              = "SubnetDrift"
	DriftCapacityReservation = "CapacityReservationDrift"
)

// instanceTypeGrace is how old a NodeClaim must be before a missing
// instance type drifts it (Karpenter's hour: a new type may be missing
// from a stale catalogue for a while).
const instanceTypeGrace = time.Hour

// drifted says why a launched NodeClaim is drifted, in Karpenter's order:
// the NodePool's hash, its requirements, the instance type, then the
// EC2NodeClass's hash, its AMIs, security groups, subnets and capacity
// reservations. It returns the reason (Karpenter's name, "" when not
// drifted) and a message. What is not known (no hash of the current
// version, no resolved AMIs, an instance the cloud has not listed) drifts
// nothing.
func (d *decider) drifted(n *Node) (reason, message string) {
	nc := n.NodeClaim
	if nc.Status.ProviderID == "" {
		return "", "" // not launched
	}
	pn := n.Pool()
	if want, ok := d.in.NodePoolHashes[pn]; ok && nc.Annotations[karpv1.AnnotationNodePoolHashVersion] == karpv1.NodePoolHashVersion {
		if got, found := nc.Annotations[karpv1.AnnotationNodePoolHash]; found && got != want {
			return DriftNodePool, fmt.Sprintf("nodepool %s changed (hash %s, now %s)", pn, got, want)
		}
	}
	if pool := d.pools[pn]; pool != nil {
		// A label the NodeClaim carries no longer satisfies the pool's
		// requirements, or a custom key the pool now requires is missing
		// (Karpenter's areRequirementsDrifted: a NodeClaim is labelled for
		// every custom requirement key at launch). An absent well-known
		// label is not judged: Joiner may not label every one Karpenter
		// derives from the instance type.
		for _, pr := range pool.Spec.Template.Spec.Requirements {
			v, present := nc.Labels[pr.Key]
			if !present {
				// Karpenter labels its NodeClaims for every custom key, and so
				// does Joiner since AnnotationCustomLabels: Joiner's claims
				// from before are not judged on a key they lack.
				labelled := nc.Annotations[karpv1.AnnotationLaunchID] == "" || nc.Annotations[karpv1.AnnotationCustomLabels] == "true"
				if labelled && !karpv1.WellKnownLabels[pr.Key] && pr.Operator != karpv1.OpNotIn && pr.Operator != karpv1.OpDoesNotExist {
					return DriftRequirements, fmt.Sprintf("nodepool %s requires label %s, which the nodeclaim does not have", pn, pr.Key)
				}
				continue
			}
			r, err := requirements.New(pr.Key, string(pr.Operator), pr.Values...)
			if err == nil && !r.Matches(v, true) {
				return DriftRequirements, fmt.Sprintf("label %s=%s no longer satisfies nodepool %s requirement %s", pr.Key, v, pn, r)
			}
		}
	}
	ref := nc.Spec.NodeClassRef
	if ref == nil {
		return "", ""
	}
	// The class's catalogue no longer offers the node's type (judged only
	// when the class has a catalogue, an hour after creation).
	if its, ok := d.in.InstanceTypes[ref.Name]; ok && len(its) > 0 && d.in.Now.Sub(nc.CreationTimestamp.Time) > instanceTypeGrace {
		if it := n.Node.Labels[karpv1.LabelInstanceType]; it != "" && !slices.ContainsFunc(its, func(t *catalog.InstanceType) bool { return t.Name == it }) {
			return DriftInstanceTypeMissing, fmt.Sprintf("instance type %s is no longer offered for ec2nodeclass %s", it, ref.Name)
		}
	}
	if want, ok := d.in.NodeClassHashes[ref.Name]; ok && nc.Annotations[karpv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion {
		if got, found := nc.Annotations[karpv1.AnnotationEC2NodeClassHash]; found && got != want {
			return DriftNodeClass, fmt.Sprintf("ec2nodeclass %s changed (hash %s, now %s)", ref.Name, got, want)
		}
	}
	class := d.in.NodeClasses[ref.Name]
	if class == nil {
		return "", ""
	}
	if r, m := amiDrifted(n, class); r != "" {
		return r, m
	}
	if r, m := placementDrifted(n, class); r != "" {
		return r, m
	}
	if d.in.FeatureGates.NoReservedCapacity {
		return "", "" // no instance is reserved to Karpenter then
	}
	return reservationDrifted(n, class)
}

// reservationDrifted: the instance runs in a capacity reservation it
// targeted (reserved) that is no longer among the class's resolved
// reservations (the AWS provider's isCapacityReservationDrifted, judged
// on the instance as the cloud last listed it). An instance that is not
// reserved, or whose reservation ended and that fell back to on-demand
// (EC2 then drops its reservation), never drifts for this.
func reservationDrifted(n *Node, class *awsv1.EC2NodeClass) (reason, message string) {
	l := n.Listed
	if l == nil || l.CapacityType != karpv1.CapacityTypeReserved || l.ReservationID == "" {
		return "", ""
	}
	if slices.ContainsFunc(class.Status.CapacityReservations, func(r awsv1.CapacityReservation) bool { return r.ID == l.ReservationID }) {
		return "", ""
	}
	return DriftCapacityReservation, fmt.Sprintf("capacity reservation %s is no longer selected by ec2nodeclass %s", l.ReservationID, class.Name)
}

// amiDrifted: the node's image is not among the class's resolved AMIs
// that suit its instance type (by their requirements, e.g. architecture).
func amiDrifted(n *Node, class *awsv1.EC2NodeClass) (reason, message string) {
	image := n.NodeClaim.Status.ImageID
	if image == "" || len(class.Status.AMIs) == 0 {
		return "", ""
	}
	labels := n.Node.Labels
	for _, ami := range class.Status.AMIs {
		if ami.ID == image && amiSuits(ami, labels) {
			return "", ""
		}
	}
	var suited []string
	for _, ami := range class.Status.AMIs {
		if amiSuits(ami, labels) {
			suited = append(suited, ami.ID)
		}
	}
	return DriftAMI, fmt.Sprintf("image %s is not among the AMIs ec2nodeclass %s resolves to for this node (%s)", image, class.Name, strings.Join(suited, ", "))
}

func amiSuits(ami awsv1.AMI, labels map[string]string) bool {
	for _, r := range ami.Requirements {
		req, err := requirements.New(r.Key, string(r.Operator), r.Values...)
		if err != nil {
			return false
		}
		v, present := labels[r.Key]
		if !req.Matches(v, present) {
			return false
		}
	}
	return true
}

// placementDrifted: the node's security groups differ from the class's
// resolved ones, or its subnet is no longer selected (judged when the
// cloud has listed the instance and the class has resolved them).
func placementDrifted(n *Node, class *awsv1.EC2NodeClass) (reason, message string) {
	if n.Listed == nil {
		return "", ""
	}
	if len(class.Status.SecurityGroups) > 0 && len(n.Listed.SecurityGroupIDs) > 0 {
		want := make([]string, 0, len(class.Status.SecurityGroups))
		for _, g := range class.Status.SecurityGroups {
			want = append(want, g.ID)
		}
		have := slices.Clone(n.Listed.SecurityGroupIDs)
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(slices.Compact(want), slices.Compact(have)) {
			return DriftSecurityGroup, fmt.Sprintf("security groups %s, ec2nodeclass %s selects %s", strings.Join(have, ","), class.Name, strings.Join(want, ","))
		}
	}
	if len(class.Status.Subnets) > 0 && n.Listed.SubnetID != "" &&
		!slices.ContainsFunc(class.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == n.Listed.SubnetID }) {
		return DriftSubnet, fmt.Sprintf("subnet %s is no longer selected by ec2nodeclass %s", n.Listed.SubnetID, class.Name)
	}
	return "", ""
}

// drift replaces one drifted node whose pool's Drifted budget allows it,
// once its pods are shown to fit on the remaining nodes plus new ones.
// Candidates go as Karpenter's drift takes them: those without pods to
// reschedule first (their removal moves nothing), then the longest drifted
// (the Drifted condition's transition time; one not recorded yet counts as
// drifted now), then the oldest.
// driftCandidate is why n drifted when drift (method) may disrupt it, or
// "": a node without a NodeClaim, deleting, not drifted, or blocked (the
// block recorded).
func (d *decider) driftCandidate(n *Node, method Method) string {
	if n.NodeClaim == nil || d.deleting(n) {
		return ""
	}
	_, r := d.drifted(n)
	if r == "" {
		return ""
	}
	if b := d.gracefulBlocker(n, true); b != "" {
		d.blocked(n, method, "%s", b)
		return ""
	}
	return r
}

func (d *decider) drift() (*Decision, error) {
	budget := d.budgets(karpv1.DisruptionReasonDrifted)
	var cands []*Node
	why := map[*Node]string{}
	since := map[*Node]time.Time{}
	empty := map[*Node]bool{}
	for _, n := range d.in.Nodes {
		if p := d.pools[n.Pool()]; p != nil && isStatic(p) {
			continue // static drift's
		}
		r := d.driftCandidate(n, MethodDrift)
		if r == "" {
			continue
		}
		why[n], since[n] = r, driftedAt(n, d.in.Now)
		empty[n] = len(reschedulablePods(n)) == 0
		cands = append(cands, n)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if empty[a] != empty[b] {
			return empty[a]
		}
		if !since[a].Equal(since[b]) {
			return since[a].Before(since[b])
		}
		return a.NodeClaim.CreationTimestamp.Before(&b.NodeClaim.CreationTimestamp)
	})
	for _, n := range cands {
		pn := n.Pool()
		if budget[pn] <= 0 {
			d.budgetBlocked(n, MethodDrift, "drifted (%s) but the disruption budget of nodepool %s for reason Drifted allows no more disruptions", why[n], pn)
			continue
		}
		plan, r := d.simulate([]*Node{n}, false)
		if r != "" {
			d.blocked(n, MethodDrift, "drifted (%s) but %s", why[n], r)
			continue
		}
		return &Decision{Method: MethodDrift, Reason: karpv1.DisruptionReasonDrifted, Candidates: []*Node{n}, Replacements: plan.NodeClaims,
			Savings: n.Price - plan.TotalPrice, Message: "drifted: " + why[n]}, nil
	}
	return nil, nil
}

// driftedAt is when the NodeClaim's Drifted condition turned True, now
// when it has not been recorded yet.
func driftedAt(n *Node, now time.Time) time.Time {
	for _, c := range n.NodeClaim.Status.Conditions {
		if c.Type == karpv1.ConditionDrifted && c.Status == metav1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return now
}

// underutilized filters consolidation candidates by what consolidation
// needs to know of them, policy and budget, in cost order. With take
// (multi-node) at most the pool's Underutilized allowance is taken from each
// pool; without (single-node, which disrupts one node) every candidate of a
// pool with any allowance left qualifies.
func (d *decider) underutilized(take bool) ([]*Node, error) {
	budget := d.budgets(karpv1.DisruptionReasonUnderutilized)
	var out []*Node
	for _, n := range d.consolidationCandidates(false) {
		if isEmpty(n) {
			continue // emptiness's (reason Empty, its budget)
		}
		pool := d.pools[n.Pool()]
		if why := d.unpriceable(n, pool); why != "" {
			d.unconsolidatable(n, methodConsolidation, "%s", why)
			continue
		}
		if pool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty {
			d.unconsolidatable(n, methodConsolidation, "NodePool %q has consolidation policy WhenEmpty, but node is not empty", pool.Name)
			continue
		}
		if budget[pool.Name] <= 0 {
			d.budgetBlocked(n, methodConsolidation, "not consolidatable: the disruption budget of nodepool %s for reason Underutilized allows no more disruptions", pool.Name)
			continue
		}
		if take {
			budget[pool.Name]--
		}
		out = append(out, n)
	}
	return out, nil
}

// unpriceable says why consolidation cannot compare n's price with a
// replacement's, or "": it needs the node's instance type in its pool's
// catalogue, and its capacity-type and zone labels (Karpenter's
// consolidation ShouldDisrupt).
func (d *decider) unpriceable(n *Node, pool *karpv1.NodePool) string {
	it, _ := nodeLabel(n, karpv1.LabelInstanceType)
	if ref := pool.Spec.Template.Spec.NodeClassRef; ref == nil || d.instanceType(ref.Name, it) == nil {
		return fmt.Sprintf("Instance Type %q not found", it)
	}
	for _, key := range []string{karpv1.LabelCapacityType, karpv1.LabelZone} {
		if _, ok := nodeLabel(n, key); !ok {
			return fmt.Sprintf("Node does not have label %q", key)
		}
	}
	return ""
}

// nodeLabel is a label of the Node, else of its NodeClaim.
func nodeLabel(n *Node, key string) (string, bool) {
	if v, ok := n.Node.Labels[key]; ok {
		return v, true
	}
	if n.NodeClaim != nil {
		v, ok := n.NodeClaim.Labels[key]
		return v, ok
	}
	return "", false
}

// instanceType is the catalogue entry of type name for class, nil when
// absent.
func (d *decider) instanceType(class, name string) *catalog.InstanceType {
	if d.types == nil {
		d.types = map[string]map[string]*catalog.InstanceType{}
	}
	m, ok := d.types[class]
	if !ok {
		m = map[string]*catalog.InstanceType{}
		for _, it := range d.in.InstanceTypes[class] {
			m[it.Name] = it
		}
		d.types[class] = m
	}
	return m[name]
}

// multiNode binary-searches the largest prefix (at least two nodes) of the
// first 100 candidates that can be deleted, or replaced by one cheaper node.
func (d *decider) multiNode() (*Decision, error) {
	// Per-node skips come from single-node consolidation, which sees the
	// same candidates without the multi-node budget cut.
	mark := len(d.skipped)
	cands, err := d.underutilized(true)
	d.skipped = d.skipped[:mark]
	if err != nil {
		return nil, err
	}
	if len(cands) > maxMultiNodeCandidate {
		cands = cands[:maxMultiNodeCandidate]
	}
	if len(cands) < 2 {
		return nil, nil
	}
	var best *Decision
	var bestMoves, rejected []Move
	lo, hi := 1, len(cands)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if dec, _, moves := d.consolidate(MethodMultiNode, cands[:mid+1]); dec != nil {
			best, bestMoves, lo = dec, moves, mid+1
		} else {
			if moves != nil {
				rejected = moves
			}
			hi = mid - 1
		}
	}
	// Karpenter counts the move a multi-node pass settles on, or, when the
	// search found none, the last one a Balanced pool rejected.
	if best != nil {
		d.moves = append(d.moves, bestMoves...)
	} else {
		d.moves = append(d.moves, rejected...)
	}
	return best, nil
}

// singleNode takes the first candidate that can be deleted or replaced by
// a cheaper node; each candidate that cannot says why.
func (d *decider) singleNode() (*Decision, error) {
	cands, err := d.underutilized(false)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	limit := d.in.MaxSimulations
	defaults.Positive(&limit, DefaultMaxSimulations)
	start := d.in.SingleNodeOffset % len(cands)
	if start < 0 {
		start = 0
	}
	d.nextOffset, d.simulations = 0, 0
	for i := range cands {
		n := cands[(start+i)%len(cands)]
		if d.simulations >= limit {
			d.nextOffset = (start + i) % len(cands)
			for j := i; j < len(cands); j++ {
				// Nothing for the user to act on: no Event.
				d.skipAs(cands[(start+j)%len(cands)], MethodSingleNode, "", "not evaluated this pass: the limit of %d simulations was reached", limit)
			}
			return nil, nil
		}
		if ok, s := d.canPassThreshold(n); !ok {
			// Not even deleting it would pass its Balanced pool's score:
			// no need to simulate.
			d.unconsolidatable(n, MethodSingleNode, "not consolidatable: nodepool %s (Balanced) would score even its deletion %s, below %.2f: it is %.1f%% of the pool's cost and %.1f%% of its disruption cost",
				n.Pool(), formatScore(s.Value()), s.Threshold(), 100*s.SavingsFraction, 100*s.DisruptionFraction)
			continue
		}
		dec, why, moves := d.consolidate(MethodSingleNode, []*Node{n})
		d.moves = append(d.moves, moves...)
		if dec != nil {
			return dec, nil
		}
		d.unconsolidatable(n, MethodSingleNode, "%s", why)
	}
	return nil, nil
}

// consolidate simulates removing cands: a decision when their pods fit on
// the remaining nodes plus at most one new node that is cheaper than them,
// and every Balanced pool among them approves the move. moves are the
// move's score per pool when the simulation found one (approved or not).
func (d *decider) consolidate(m Method, cands []*Node) (*Decision, string, []Move) {
	dec, why := d.consolidation(m, cands)
	if dec == nil {
		return nil, why, nil
	}
	ok, why, moves := d.approveBalanced(dec)
	if !ok {
		return nil, why, moves
	}
	return dec, "", moves
}

func (d *decider) consolidation(m Method, cands []*Node) (*Decision, string) {
	if d.bound == nil {
		d.bound = d.buildBound()
	}
	if why := d.bound.impossible(cands); why != "" {
		return nil, why
	}
	plan, why := d.simulate(cands, true)
	if why != "" {
		return nil, why
	}
	cur := totalPrice(cands)
	dec := &Decision{Method: m, Reason: karpv1.DisruptionReasonUnderutilized, Candidates: cands}
	switch len(plan.NodeClaims) {
	case 0:
		dec.Savings = cur
		dec.Message = fmt.Sprintf("delete %d node(s), their pods fit on the remaining nodes", len(cands))
		return dec, ""
	case 1:
	default:
		return nil, fmt.Sprintf("its pods need %d new nodes", len(plan.NodeClaims))
	}
	rep, why := d.replacement(plan.NodeClaims[0], cands)
	if why != "" {
		return nil, why
	}
	dec.simulated = plan.NodeClaims[0].InstanceTypes
	dec.Replacements = []scheduler.NodeClaim{rep}
	dec.Savings = cur - rep.Price
	dec.Message = fmt.Sprintf("replace %d node(s) (%.4f/h) with %s %s (%.4f/h)", len(cands), cur, rep.CapacityType, rep.InstanceType, rep.Price)
	return dec, ""
}

// simulate runs the scheduler on the nodes that remain when cands (and
// nodes already being disrupted) are gone, placing the cluster's pending
// pods, the candidates' pods and the disrupted nodes' pods that would move
// now (currentlyReschedulable), as Karpenter's SimulateScheduling does, so
// a disruption never takes the room a pending pod or a draining node's pods
// need. Initialized nodes are tried first. In a consolidation simulation
// the candidates' pods do not go to a node still inside its
// consolidateAfter window. It fails when a pod that is not pending fits
// nowhere, or when a candidate's pod would land on a node that is not
// initialized yet (it could not move there right away).
func (d *decider) simulate(cands []*Node, consolidation bool) (*scheduler.Plan, string) {
	gone := make(map[*Node]bool, len(cands))
	moved := map[string]bool{}
	var pods []*corev1.Pod
	for _, n := range cands {
		gone[n] = true
		for _, p := range n.Node.Pods {
			if d.currentlyReschedulable(p) {
				pods = append(pods, p)
				moved[podKey(p)] = true
			}
		}
	}
	if len(pods) == 0 {
		return &scheduler.Plan{}, ""
	}
	pending := map[string]bool{}
	for _, p := range d.in.PendingPods {
		pending[podKey(p)] = true
	}
	pods = append(pods, d.in.PendingPods...)
	var ready, unready []*scheduler.Node
	uninitialized := map[string]bool{}
	for _, n := range d.in.Nodes {
		switch {
		case gone[n]:
		case d.deleting(n):
			for _, p := range n.Node.Pods {
				if d.currentlyReschedulable(p) {
					pods = append(pods, p)
				}
			}
		case n.NodeClaim != nil && !n.Initialized || n.Node.InFlight:
			uninitialized[n.Name()] = true
			unready = append(unready, n.Node)
		default:
			sn := n.Node
			if consolidation {
				sn = d.destination(n)
			}
			ready = append(ready, sn)
		}
	}
	d.simulations++
	var sm map[string]bool
	if consolidation {
		sm = moved
	}
	plan := scheduler.Solve(&scheduler.Input{
		Pods: pods, NodePools: d.in.NodePools, NodeClasses: d.in.NodeClasses,
		InstanceTypes: d.in.InstanceTypes, Nodes: append(ready, unready...), DaemonSetPods: d.in.DaemonSetPods,
		Volumes: d.in.Volumes, Namespaces: d.in.Namespaces, MinValuesPolicy: d.in.MinValuesPolicy, Moved: sm,
		TypeTables: &d.tables,
	})
	var stuck []scheduler.Unschedulable
	for _, u := range plan.Unschedulable {
		if !pending[u.Pod] {
			stuck = append(stuck, u)
		}
	}
	if len(stuck) > 0 {
		more := ""
		if len(stuck) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(stuck)-1)
		}
		return nil, fmt.Sprintf("pod %s cannot be rescheduled: %s%s", stuck[0].Pod, strings.TrimSpace(stuck[0].Reason), more)
	}
	for _, nm := range plan.Nominations {
		if uninitialized[nm.Node] && moved[nm.Pod] {
			return nil, fmt.Sprintf("pod %s would move to node %s, which is not initialized yet", nm.Pod, nm.Node)
		}
	}
	return plan, ""
}

// destination is n as a consolidation simulation sees it: a copy that
// takes no moved pods while it is under its consolidateAfter (computed
// once per Decide).
func (d *decider) destination(n *Node) *scheduler.Node {
	if d.settling == nil {
		d.settling = map[*Node]*scheduler.Node{}
		for _, m := range d.in.Nodes {
			if d.underConsolidateAfter(m) {
				cp := *m.Node
				cp.NoMovedPods = true
				d.settling[m] = &cp
			}
		}
	}
	if sn, ok := d.settling[n]; ok {
		return sn
	}
	return n.Node
}

// underConsolidateAfter: a managed, initialized node whose pool's
// consolidateAfter (neither Never nor 0) has not passed since its last pod
// event (Karpenter's IsUnderConsolidateAfter).
func (d *decider) underConsolidateAfter(n *Node) bool {
	pool := d.pools[n.Pool()]
	if pool == nil || n.NodeClaim == nil || !n.Initialized {
		return false
	}
	ca := pool.Spec.Disruption.ConsolidateAfter.Duration
	if ca == nil || *ca == 0 {
		return false
	}
	at, _ := consolidatableAt(n, pool)
	return d.in.Now.Before(at)
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func totalPrice(ns []*Node) float64 {
	s := 0.0
	for _, n := range ns {
		s += n.Price
	}
	return s
}

func allSpot(ns []*Node) bool {
	for _, n := range ns {
		if capacityType(n) != karpv1.CapacityTypeSpot {
			return false
		}
	}
	return true
}
