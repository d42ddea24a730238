package aws

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// EC2NodeClass status condition types (Karpenter's).
const (
	ConditionSubnetsReady         = "SubnetsReady"
	ConditionSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionAMIsReady            = "AMIsReady"
	ConditionInstanceProfileReady = "InstanceProfileReady"
	ConditionReady                = "Ready"
)

// ApplyStatus sets the NodeClass's resolved status and its conditions from
// a Resolve result: each part True, or False with the resolution error as
// the message; Ready is True when every part is. Conditions whose status
// did not change keep their transition time.
func ApplyStatus(nc *awsv1.EC2NodeClass, r Resolved, err error, now metav1.Time) {
	var rerr *ResolveError
	if !errors.As(err, &rerr) {
		rerr = &ResolveError{}
		if err != nil { // not a resolution error: every part is unknown
			rerr = &ResolveError{Subnets: err, SecurityGroups: err, AMIs: err, InstanceProfile: err}
		}
	}
	nc.Status.Subnets = r.StatusSubnets()
	nc.Status.SecurityGroups = r.SecurityGroups
	nc.Status.AMIs = r.StatusAMIs()
	nc.Status.InstanceProfile = r.InstanceProfile
	parts := []struct {
		typ, reason string
		err         error
	}{
		{ConditionSubnetsReady, "SubnetsNotFound", rerr.Subnets},
		{ConditionSecurityGroupsReady, "SecurityGroupsNotFound", rerr.SecurityGroups},
		{ConditionAMIsReady, "AMINotFound", rerr.AMIs},
		{ConditionInstanceProfileReady, "InstanceProfileNotFound", rerr.InstanceProfile},
	}
	ready := metav1.ConditionTrue
	readyMsg, readyReason := "", "Ready"
	for _, p := range parts {
		c := metav1.Condition{Type: p.typ, Status: metav1.ConditionTrue, Reason: p.typ, ObservedGeneration: nc.Generation, LastTransitionTime: now}
		if p.err != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, p.reason, p.err.Error()
			if ready == metav1.ConditionTrue {
				ready, readyReason, readyMsg = metav1.ConditionFalse, "UnhealthyDependents", p.typ+"=False"
			} else {
				readyMsg += ", " + p.typ + "=False"
			}
		}
		setCondition(&nc.Status.Conditions, c)
	}
	setCondition(&nc.Status.Conditions, metav1.Condition{Type: ConditionReady, Status: ready, Reason: readyReason,
		Message: readyMsg, ObservedGeneration: nc.Generation, LastTransitionTime: now})
}

func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status == c.Status {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			}
			(*conds)[i] = c
			return
		}
	}
	*conds = append(*conds, c)
}
