package provisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// ConditionValidationSucceeded is the condition type of NodePools and
// EC2NodeClasses that says whether the object passed Joiner's validation.
const ConditionValidationSucceeded = "ValidationSucceeded"

// reportState remembers the last thing said about each object so Events
// are not repeated every pass.
type reportState struct {
	mu   sync.Mutex
	last map[string]string
}

func newReportState() *reportState { return &reportState{last: map[string]string{}} }

// changed records msg for key and reports whether it differs from the last.
func (r *reportState) changed(key, msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last[key] == msg {
		return false
	}
	r.last[key] = msg
	return true
}

// reportPoolValidation sets the pool's ValidationSucceeded condition and,
// when it fails, says so in an Event and the log. err nil: valid.
func (p *Provisioner) reportPoolValidation(ctx context.Context, cached *karpv1.NodePool, err error) {
	cond := metav1.Condition{Type: ConditionValidationSucceeded, Status: metav1.ConditionTrue, Reason: ConditionValidationSucceeded,
		ObservedGeneration: cached.Generation, LastTransitionTime: metav1.NewTime(p.cfg.Now())}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ValidationFailed", err.Error()
	}
	if p.reports.changed("nodepool/"+cached.Name, cond.Message) && err != nil {
		p.log.Warn("ignoring invalid nodepool", zap.String("nodepool", cached.Name), zap.Error(err))
		p.rec.Eventf(cached, corev1.EventTypeWarning, "InvalidNodePool", "NodePool %s is invalid and is not used: %v", cached.Name, err)
	}
	if c := meta.FindStatusCondition(cached.Status.Conditions, cond.Type); c != nil && c.Status == cond.Status && c.Message == cond.Message &&
		c.ObservedGeneration == cond.ObservedGeneration {
		return
	}
	np := cached.DeepCopy()
	meta.SetStatusCondition(&np.Status.Conditions, cond)
	if _, uerr := p.kube.UpdateNodePoolStatus(ctx, np); uerr != nil && ctx.Err() == nil {
		p.log.Warn("updating nodepool status", zap.String("nodepool", np.Name), zap.Error(uerr))
	}
}

// reportInvalidClass marks an EC2NodeClass that fails validation not ready.
func (p *Provisioner) reportInvalidClass(ctx context.Context, cached *awsv1.EC2NodeClass, err error) {
	now := metav1.NewTime(p.cfg.Now())
	if p.reports.changed("ec2nodeclass/"+cached.Name, err.Error()) {
		p.log.Warn("ignoring invalid ec2nodeclass", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
		p.rec.Eventf(cached, corev1.EventTypeWarning, "InvalidEC2NodeClass", "EC2NodeClass %s is invalid and is not used: %v", cached.Name, err)
	}
	nc := cached.DeepCopy()
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: ConditionValidationSucceeded, Status: metav1.ConditionFalse,
		Reason: "ValidationFailed", Message: err.Error(), ObservedGeneration: nc.Generation, LastTransitionTime: now})
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: awsv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "ValidationFailed", Message: err.Error(), ObservedGeneration: nc.Generation, LastTransitionTime: now})
	if equality.Semantic.DeepEqual(nc.Status, cached.Status) {
		return
	}
	if _, uerr := p.kube.UpdateEC2NodeClassStatus(ctx, nc); uerr != nil && ctx.Err() == nil {
		p.log.Warn("updating ec2nodeclass status", zap.String("ec2nodeclass", nc.Name), zap.Error(uerr))
	}
}

// updateClassStatus writes the resolved subnets, security groups, AMIs and
// conditions when they changed.
func (p *Provisioner) updateClassStatus(ctx context.Context, cached *awsv1.EC2NodeClass, r joineraws.Resolved, err error) {
	nc := cached.DeepCopy()
	now := metav1.NewTime(p.cfg.Now())
	joineraws.ApplyStatus(nc, r, err, now)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: ConditionValidationSucceeded, Status: metav1.ConditionTrue,
		Reason: ConditionValidationSucceeded, ObservedGeneration: nc.Generation, LastTransitionTime: now})
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if p.reports.changed("ec2nodeclass/"+cached.Name, msg) && err != nil {
		p.rec.Eventf(cached, corev1.EventTypeWarning, "EC2NodeClassNotReady", "%v", err)
	}
	if equality.Semantic.DeepEqual(nc.Status, cached.Status) {
		return
	}
	if _, uerr := p.kube.UpdateEC2NodeClassStatus(ctx, nc); uerr != nil && ctx.Err() == nil {
		p.log.Warn("updating ec2nodeclass status", zap.String("ec2nodeclass", nc.Name), zap.Error(uerr))
	}
}

// eventUnschedulable tells each pod no pool can take why (once per reason).
func (p *Provisioner) eventUnschedulable(s *Snapshot, plan *scheduler.Plan) {
	for _, u := range plan.Unschedulable {
		if pod := s.pending[u.Pod]; pod != nil && p.reports.changed("pod/"+u.Pod, u.Reason) {
			p.rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s", u.Reason)
		}
	}
}

// eventNominated tells the pods of a new NodeClaim where they will go.
func (p *Provisioner) eventNominated(s *Snapshot, pl planned) {
	for _, key := range pl.pods {
		if pod := s.pending[key]; pod != nil && pod.UID != "" {
			p.rec.Eventf(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/%s", pl.claim.Name)
		}
	}
}

// NodePoolHash hashes what a NodePool's template stamps on a node beyond
// its requirements (labels, annotations, taints, startup taints, node
// class, expiry, termination grace period); a NodeClaim launched under
// another hash has drifted.
func NodePoolHash(np *karpv1.NodePool) string {
	t := np.Spec.Template
	b, err := json.Marshal(struct {
		Labels, Annotations    map[string]string
		Taints, StartupTaints  []corev1.Taint
		NodeClassRef           *karpv1.NodeClassReference
		ExpireAfter            string
		TerminationGracePeriod string
	}{t.ObjectMeta.Labels, t.ObjectMeta.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef,
		t.Spec.ExpireAfter.String(), durationString(t.Spec.TerminationGracePeriod)})
	if err != nil {
		panic(fmt.Sprintf("hashing nodepool %s: %v", np.Name, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func durationString(d *karpv1.Duration) string {
	if d == nil {
		return ""
	}
	return d.String()
}
