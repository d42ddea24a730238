// Package migrate tells, before a switch from Karpenter, what Joiner will
// do with each NodePool, EC2NodeClass and NodeClaim it finds: adopt it,
// reject it (and why), or replace it as drifted (and why). It judges with
// the same validation and drift code the coordinator runs, from the
// objects as Karpenter left them; it does no I/O.
package migrate

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Actions.
const (
	// Adopt: Joiner takes the object over as it is.
	Adopt = "Adopt"
	// Reject: Joiner marks the object invalid and does not use it.
	Reject = "Reject"
	// Drift: Joiner replaces the NodeClaim (paced by the pool's budgets).
	Drift = "Drift"
	// Ignore: the object is not Joiner's to manage.
	Ignore = "Ignore"
)

// Finding is the verdict on one object.
type Finding struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action string `json:"action"`
	// Reason is a short CamelCase reason (Karpenter's drift reason for
	// Drift); Detail says more.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Input is what the cluster holds.
type Input struct {
	NodePools   []*karpv1.NodePool
	NodeClasses []*awsv1.EC2NodeClass
	NodeClaims  []*karpv1.NodeClaim
	Nodes       []*corev1.Node
	// CABundle is the cluster CA bundle nodes are given (base64 PEM), part
	// of the EC2NodeClass hash.
	CABundle string
	Now      time.Time
}

// Check judges every object: pools, then classes, then NodeClaims, each
// sorted by name.
func Check(in Input) []Finding {
	var out []Finding
	pools := map[string]*karpv1.NodePool{}
	for _, np := range sorted(in.NodePools) {
		pools[np.Name] = np
		out = append(out, checkPool(np))
	}
	classes := map[string]*awsv1.EC2NodeClass{}
	for _, nc := range sorted(in.NodeClasses) {
		classes[nc.Name] = nc
		out = append(out, checkClass(nc, in.CABundle))
	}
	return append(out, checkClaims(in, pools, classes)...)
}

func sorted[T interface{ GetName() string }](s []T) []T {
	out := append([]T(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

func checkPool(np *karpv1.NodePool) Finding {
	c := np.DeepCopy()
	c.SetDefaults()
	return judge("NodePool", np.Name, c.Validate(), np.Annotations, karpv1.AnnotationNodePoolHash, karpv1.AnnotationNodePoolHashVersion,
		karpv1.NodePoolHashVersion, np.Hash(), "the template changed since Karpenter hashed it")
}

func checkClass(nc *awsv1.EC2NodeClass, caBundle string) Finding {
	c := nc.DeepCopy()
	c.SetDefaults()
	return judge("EC2NodeClass", nc.Name, c.Validate(), nc.Annotations, karpv1.AnnotationEC2NodeClassHash, karpv1.AnnotationEC2NodeClassHashVersion,
		awsv1.EC2NodeClassHashVersion, nc.Hash(caBundle), "the class (or the cluster CA bundle) changed since Karpenter hashed it")
}

// judge is the verdict on a pool or class: rejected when invalid, else
// adopted, saying so when the hash Karpenter recorded (of the current
// version) is not the one Joiner computes now: its NodeClaims launched
// before then drift.
func judge(kind, name string, invalid error, annotations map[string]string, hashKey, versionKey, version, want, changed string) Finding {
	f := Finding{Kind: kind, Name: name, Action: Adopt}
	if invalid != nil {
		f.Action, f.Reason, f.Detail = Reject, "ValidationFailed", invalid.Error()
		return f
	}
	if got, ok := annotations[hashKey]; ok && annotations[versionKey] == version && got != want {
		f.Reason = "HashChanged"
		f.Detail = fmt.Sprintf("%s (%s, now %s): its NodeClaims drift", changed, got, want)
		if kind == "EC2NodeClass" {
			f.Detail += "; if the class did not change, give the CA bundle Karpenter used (--cluster-ca-file)"
		}
	}
	return f
}

// checkClaims runs the disruption core's drift verdict over every launched
// NodeClaim, with the classes' status as Karpenter wrote it (resolved
// AMIs). Subnet and security-group drift need the instances, which only
// the coordinator lists: they are not judged here.
func checkClaims(in Input, pools map[string]*karpv1.NodePool, classes map[string]*awsv1.EC2NodeClass) []Finding {
	nodeByProvider := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		nodeByProvider[n.Spec.ProviderID] = n
	}
	din := &disruption.Input{Now: in.Now, NodeClasses: classes, NodePoolHashes: map[string]string{}, NodeClassHashes: map[string]string{}}
	for _, np := range pools {
		din.NodePools = append(din.NodePools, np)
		din.NodePoolHashes[np.Name] = np.Hash()
	}
	for name, nc := range classes {
		din.NodeClassHashes[name] = nc.Hash(in.CABundle)
	}
	var out []Finding
	judged := map[string]*disruption.Node{}
	for _, nc := range sorted(in.NodeClaims) {
		f := Finding{Kind: "NodeClaim", Name: nc.Name, Action: Adopt}
		pool := nc.Labels[karpv1.LabelNodePool]
		switch {
		case pool == "":
			f.Action, f.Reason, f.Detail = Ignore, "NoNodePool", "no "+karpv1.LabelNodePool+" label"
		case pools[pool] == nil:
			f.Reason, f.Detail = "NodePoolNotFound", "nodepool "+pool+" does not exist: the NodeClaim is kept, nothing replaces it"
		case nc.DeletionTimestamp != nil:
			f.Reason, f.Detail = "Deleting", "being deleted: Joiner finishes its termination (drain, terminate, finalizer)"
		case nc.Status.ProviderID == "":
			f.Reason, f.Detail = "NotLaunched", "not launched yet: Joiner launches it or times it out"
		default:
			labels := nc.Labels
			if n := nodeByProvider[nc.Status.ProviderID]; n != nil {
				labels = n.Labels
			}
			dn := &disruption.Node{Node: &scheduler.Node{Name: nc.Name, Labels: labels}, NodeClaim: nc,
				Initialized: meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionInitialized)}
			din.Nodes = append(din.Nodes, dn)
			judged[nc.Name] = dn
		}
		out = append(out, f)
	}
	verdicts := map[string]disruption.NodeStatus{}
	for _, s := range disruption.Status(din) {
		verdicts[s.Node.NodeClaim.Name] = s
	}
	for i := range out {
		if s, ok := verdicts[out[i].Name]; ok && out[i].Kind == "NodeClaim" && s.DriftReason != "" {
			out[i].Action, out[i].Reason, out[i].Detail = Drift, s.DriftReason, s.Drifted
		}
	}
	return out
}
