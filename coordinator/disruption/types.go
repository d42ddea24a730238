// Package disruption is Joiner's pure disruption decision core: given the
// cluster's NodeClaims with their pods, the NodePools, PDBs and the catalogue,
// it decides which nodes to remove (and what to launch in their place), in
// Karpenter v1's order and semantics:
//
//  1. Expiration: NodeClaims past expireAfter, forceful (no budget, not
//     blocked by do-not-disrupt or PDBs; those only slow the drain).
//  2. Emptiness (reason Empty): consolidatable nodes without reschedulable
//     pods, every policy; all of them up to each pool's budget at once.
//  3. Static drift (reason Drifted): drifted nodes of static pools
//     (spec.replicas), replaced one for one by a node of the pool, as many
//     as the pool's budget and limits.nodes allow, unless the pool is being
//     scaled down.
//  4. Drift (reason Drifted): the NodeClaim's karpenter.sh/nodepool-hash or
//     karpenter.k8s.aws/ec2nodeclass-hash differs from the current one
//     (passed in), or another of Karpenter's drift reasons holds; nodes
//     without pods to reschedule first, then the longest drifted, one at a
//     time with its replacement.
//  5. Multi-node consolidation (Underutilized): binary search over the first
//     100 candidates, highest price per unit of disruption first, for the
//     largest prefix whose pods fit on the remaining nodes plus at most one
//     cheaper new node.
//  6. Single-node consolidation (Underutilized): the first candidate that can
//     be deleted, or replaced by one cheaper node (spot to spot only behind
//     the SpotToSpotConsolidation gate, and when at least 15 cheaper
//     instance types remain).
//
// Emptiness and consolidation leave static pools alone. A pool with
// consolidationPolicy Balanced consolidates only moves whose savings, as a
// fraction of the pool's cost, are at least half their disruption, as a
// fraction of the pool's disruption cost (Karpenter v1.14.1's score with
// k = 2, see balanced.go).
//
// Every graceful action is simulated first with coordinator/scheduler on the
// remaining capacity (candidates and nodes already being disrupted removed,
// pending pods placed too) plus the proposed replacement: it proceeds only
// if every displaced pod fits, and for consolidation only if the
// replacement's worst-case launch price is below the candidates'.
//
// Decide does no I/O, reads no clock (Input.Now) and starts no goroutine;
// the leader loop commits the Decision as a TerminationIntent and executes
// it (taint, drain, terminate) elsewhere.
package disruption

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Method names a disruption method.
type Method string

// Disruption methods, in the order Decide tries them.
const (
	MethodExpiration      Method = "Expiration"
	MethodEmptiness       Method = "Emptiness"
	MethodStaticDrift     Method = "StaticDrift"
	MethodDrift           Method = "Drift"
	MethodMultiNode       Method = "MultiNodeConsolidation"
	MethodSingleNode      Method = "SingleNodeConsolidation"
	maxMultiNodeCandidate        = 100
	// MinSpotToSpotTypes is how many cheaper spot instance types a
	// spot-to-spot replacement needs (Karpenter's SpotToSpotConsolidation).
	MinSpotToSpotTypes = 15
)

// Input is everything Decide looks at. Nothing in it is modified.
type Input struct {
	// Now is the decision time (the caller's clock).
	Now       time.Time
	NodePools []*karpv1.NodePool
	// NodeClasses and InstanceTypes (by NodeClass name) feed the scheduler
	// simulation, as in scheduler.Input.
	NodeClasses   map[string]*awsv1.EC2NodeClass
	InstanceTypes map[string][]*catalog.InstanceType
	DaemonSetPods []*corev1.Pod
	// Volumes, Namespaces and MinValuesPolicy feed the simulation too.
	Volumes         map[string]scheduler.PodVolumes
	Namespaces      map[string]map[string]string
	MinValuesPolicy scheduler.MinValuesPolicy
	// Nodes are the cluster's nodes (Joiner-managed or not).
	Nodes []*Node
	// PDBs with their current status.disruptionsAllowed.
	PDBs []*policyv1.PodDisruptionBudget
	// StaticCounts are the NodeClaims of static pools (spec.replicas) by
	// state, as Karpenter's NodePoolState counts them; static drift reads
	// them. A static pool without an entry counts its nodes in Nodes.
	StaticCounts map[string]StaticCount
	// NodePoolHashes and NodeClassHashes are the current drift hashes by
	// pool / class name; a NodeClaim whose annotation differs is drifted.
	// A missing entry means "not known": no drift is inferred.
	NodePoolHashes  map[string]string
	NodeClassHashes map[string]string
	// MaxSimulations caps the scheduler runs of single-node consolidation
	// in one pass (0 = DefaultMaxSimulations), the deterministic stand-in
	// for Karpenter's 3-minute timeout. Candidates not reached are skipped
	// with a reason and tried first next pass via SingleNodeOffset.
	MaxSimulations int
	// SingleNodeOffset rotates the single-node candidate list (cheapest to
	// disrupt first) so a pass starts where the previous one stopped; pass
	// the previous Result.NextSingleNodeOffset.
	SingleNodeOffset int
	// FeatureGates are Karpenter's feature gates that change decisions.
	FeatureGates FeatureGates
	// After, when set, is the method whose decision has just failed its
	// validation: Decide tries expiration and only the methods after it,
	// as Karpenter's reconcile goes on to the next method when a command
	// fails validation. The next pass starts from the first method again.
	After Method
	// Settling, when set, says why the pods of an earlier command are still
	// moving (a node it disrupted still drains, or their new pods are not
	// bound yet): multi- and single-node consolidation wait for them to
	// land, as a decision made now would be refused for the pod events
	// they are about to cause on its candidates. Unlike Karpenter, which
	// decides at once and fails the validation as churn.
	Settling string
	// PendingPods are the cluster's pending pods that need capacity
	// (unschedulable, not bound, not held by in-flight capacity). Every
	// simulation places them too, as Karpenter's SimulateScheduling does,
	// so a disruption never takes the room they need; one that fits
	// nowhere does not stop a disruption.
	PendingPods []*corev1.Pod
}

// FeatureGates are the Karpenter feature gates (--feature-gates) Decide
// reads; the zero value is Karpenter's default.
type FeatureGates struct {
	// SpotToSpotConsolidation lets consolidation replace spot nodes by
	// spot nodes (Karpenter's gate, off by default): a single node only
	// when at least MinSpotToSpotTypes cheaper types remain.
	SpotToSpotConsolidation bool
	// NoReservedCapacity: Karpenter's ReservedCapacity gate (on by
	// default) is off; no instance then counts as reserved, and none
	// drifts for its capacity reservation.
	NoReservedCapacity bool
}

// StaticCount is a static pool's NodeClaims by state (Karpenter's
// NodePoolState): Active are launched or launching and not going away,
// Deleting are being deleted, PendingDisruption are being disrupted but not
// deleted yet (their replacements are on the way).
type StaticCount struct {
	Active, Deleting, PendingDisruption int
}

// DefaultMaxSimulations keeps a pass under a second at 1000 nodes / 10000
// pods (a simulation there takes about 5 ms; see BENCHMARKS.md).
const DefaultMaxSimulations = 100

// Node is one node as disruption sees it.
type Node struct {
	// Node is the scheduler's view (name, labels, taints, allocatable, pods).
	Node *scheduler.Node
	// NodeClaim is nil for nodes Joiner does not manage (they are never
	// candidates but their free capacity counts).
	NodeClaim *karpv1.NodeClaim
	// Annotations of the Node object (do-not-disrupt may sit there).
	Annotations map[string]string
	// Price per hour of the node's offering.
	Price float64
	// Initialized is the NodeClaim's Initialized condition; InitializedAt
	// its transition time.
	Initialized   bool
	InitializedAt time.Time
	// Ready is the Node's Ready condition; a NotReady node counts as being
	// disrupted against its pool's budgets (as in Karpenter).
	Ready bool
	// MarkedForDeletion: a termination intent exists or the NodeClaim is
	// being deleted. Such nodes are not candidates, count against budgets
	// and give no capacity to the simulation. A NodeClaim with a deletion
	// timestamp or a True InstanceTerminating condition is treated so
	// too; the latter counts for no budget at all (Karpenter's).
	MarkedForDeletion bool
	// Nominated: a pending pod was nominated onto this node.
	Nominated bool
	// Blocked, when set, keeps the node from graceful disruption and says
	// why (for example a cool-down after a failed replacement); expiration
	// is not blocked.
	Blocked string
	// Listed is the node's instance as the cloud last listed it (subnet,
	// security groups); nil when not listed yet, and then it drifts by
	// neither.
	Listed *cloud.Instance
}

// Name is the node's name.
func (n *Node) Name() string { return n.Node.Name }

// Decision is one action: remove Candidates (and launch Replacements first).
type Decision struct {
	Method Method
	// Reason is the budget reason ("" for expiration, which is forceful).
	Reason     karpv1.DisruptionReason
	Candidates []*Node
	// Replacements are NodeClaim specs from the simulation's plan.
	Replacements []scheduler.NodeClaim
	// Savings is Σ candidate price - Σ replacement price, per hour.
	Savings float64
	// Message says why, for Events and logs.
	Message string
	// Approvals are the scores of the Balanced pools among the
	// candidates that approved a consolidation (none for other
	// policies), by pool name: Karpenter's ConsolidationApproved Events.
	Approvals []Approval
	// simulated are the instance types the simulation allowed the
	// replacement before they were cut to the cheaper ones (Revalidate
	// checks a held decision's types against them, as Karpenter does).
	simulated []string
}

// Nodes are the names of the decision's candidates, sorted.
func (d *Decision) Nodes() []string {
	names := make([]string, len(d.Candidates))
	for i, n := range d.Candidates {
		names[i] = n.Name()
	}
	slices.Sort(names)
	return names
}

// Key names the decision by its method and candidates: the same decision
// made again on a later pass has the same key.
func (d *Decision) Key() string { return string(d.Method) + ":" + strings.Join(d.Nodes(), ",") }

// Approval is a Balanced pool's passing score of a consolidation.
type Approval struct {
	Pool  string
	Score Score
}

// Move is one pool's part in a consolidation move the simulation found:
// every policy's moves are counted; only Balanced pools are scored.
type Move struct {
	// Key names the move: its method and candidates (the same move found
	// again on a later pass has the same key).
	Key    string
	Pool   string
	Policy karpv1.ConsolidationPolicy
	// Approved is the whole move's verdict (every Balanced pool approved).
	Approved bool
	// Score is the pool's Balanced score when Scored; the pool's own
	// verdict is Score.Approved().
	Score  Score
	Scored bool
}

// Skip says why a node was not disrupted by a method.
type Skip struct {
	Node   string
	Method Method
	Reason string
	// Event is the reason of the Event Karpenter leaves on the Node and
	// NodeClaim for it: EventDisruptionBlocked (the node may not be
	// disrupted: do-not-disrupt, a PDB, a budget, its pods fit nowhere),
	// EventUnconsolidatable (consolidation in particular leaves it:
	// consolidateAfter, policy, no cheaper replacement), or "" (nothing to
	// act on, e.g. not evaluated this pass).
	Event string
	// Budget: the node's pool's budget allowed no more disruptions.
	Budget bool
}

// Of says whether the skip was recorded by m or, for a consolidation
// method, by the candidate filtering every consolidation shares.
func (s Skip) Of(m Method) bool {
	if s.Method == m {
		return true
	}
	consolidation := func(m Method) bool {
		return m == MethodSingleNode || m == MethodMultiNode || m == methodConsolidation
	}
	return consolidation(s.Method) && consolidation(m)
}

// Event reasons of skips, Karpenter's (pkg/controllers/disruption/events).
const (
	EventDisruptionBlocked = "DisruptionBlocked"
	EventUnconsolidatable  = "Unconsolidatable"
)

// Result is Decide's answer: at most one decision plus, for each node that
// was looked at and left alone, why.
type Result struct {
	Decision *Decision
	Skipped  []Skip
	// Moves are the consolidation moves the pass scored, approved or not
	// (Karpenter's karpenter_consolidation_moves_total and _score).
	Moves []Move
	// NextSingleNodeOffset is Input.SingleNodeOffset for the next pass.
	NextSingleNodeOffset int
}
