package packaging_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestHelmTemplateAgentNodes: by default the agent DaemonSet runs only on
// NodePool nodes (karpenter.sh/nodepool), the ones a coordinator drains:
// on a managed node group's node the agent would cordon for a notice and
// nothing would drain it. agent.nodePoolNodesOnly=false widens it to every
// Linux node; the systemd-mode and OS requirements hold either way.
func TestHelmTemplateAgentNodes(t *testing.T) {
	for _, tc := range []struct {
		sets         []string
		wantNodePool bool
	}{
		{wantNodePool: true},
		{sets: []string{"agent.nodePoolNodesOnly=false"}},
		{sets: []string{"agent.nodePoolNodesOnly=false", "agent.localDrain=true"}},
	} {
		name := strings.Join(tc.sets, ",")
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			var ds appsv1.DaemonSet
			o := find(objects(t, renderDefault(t, tc.sets...)), "DaemonSet", "joiner-agent")
			if o == nil {
				t.Fatal("no DaemonSet joiner-agent")
			}
			into(t, o, &ds)
			aff := ds.Spec.Template.Spec.Affinity
			if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
				len(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 {
				t.Fatalf("agent node affinity %+v: want one required term", aff)
			}
			got := map[string]corev1.NodeSelectorOperator{}
			for _, r := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
				got[r.Key] = r.Operator
			}
			if got[corev1.LabelOSStable] != corev1.NodeSelectorOpIn || got["joiner.io/agent-mode"] != corev1.NodeSelectorOpNotIn {
				t.Errorf("agent node affinity %v lacks the OS and systemd-mode requirements", got)
			}
			if op, ok := got[karpv1.LabelNodePool]; ok != tc.wantNodePool || (ok && op != corev1.NodeSelectorOpExists) {
				t.Errorf("agent node affinity %v: want %s Exists %v", got, karpv1.LabelNodePool, tc.wantNodePool)
			}
		})
	}
}
