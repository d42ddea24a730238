package testenv_test

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	corev1k "github.com/joiner-dev/joiner/api/core/v1"
)

type invalidCase struct {
	name   string
	mutate func(p *corev1k.NodePool)
	want   []string
}

// celCases are NodePools that break Karpenter's CEL validation rules, each
// used when the NodePool CRD in packaging/crds carries the rule's message.
// (packaging/crds ports Karpenter's own CEL test suites, case by case.)
func celCases() []invalidCase {
	crd, _ := os.ReadFile(filepath.Join("..", "..", "packaging", "crds", "karpenter.sh_nodepools.yaml"))
	all := []invalidCase{
		{
			name: "In without values",
			mutate: func(p *corev1k.NodePool) {
				p.Spec.Template.Spec.Requirements[0].Values = nil
			},
			want: []string{"requirements with operator 'In' must have a value defined"},
		},
		{
			name: "schedule without duration",
			mutate: func(p *corev1k.NodePool) {
				p.Spec.Disruption.Budgets[1].Duration = nil
			},
			want: []string{"'schedule' must be set with 'duration'"},
		},
		{
			name: "restricted label domain",
			mutate: func(p *corev1k.NodePool) {
				p.Spec.Template.Spec.Requirements[0].Key = "karpenter.sh/custom"
			},
			want: []string{`label domain "karpenter.sh" is restricted`},
		},
		{
			name: "nodepool label in requirements",
			mutate: func(p *corev1k.NodePool) {
				p.Spec.Template.Spec.Requirements[0].Key = "karpenter.sh/nodepool"
			},
			want: []string{`label "karpenter.sh/nodepool" is restricted`},
		},
		{
			name: "static pool with weight",
			mutate: func(p *corev1k.NodePool) {
				p.Spec.Replicas = new(int64(2))
				p.Spec.Limits = nil
			},
			want: []string{`'weight' is not supported on static NodePools`},
		},
	}
	messages := map[string]bool{}
	var doc any
	if err := yaml.Unmarshal(crd, &doc); err == nil {
		collectMessages(doc, messages)
	}
	var out []invalidCase
	for _, c := range all {
		if messages[c.want[0]] {
			out = append(out, c)
		}
	}
	return out
}

// collectMessages gathers every x-kubernetes-validations message in a CRD.
func collectMessages(v any, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		if rules, ok := v["x-kubernetes-validations"].([]any); ok {
			for _, r := range rules {
				if m, ok := r.(map[string]any); ok {
					if msg, ok := m["message"].(string); ok {
						into[msg] = true
					}
				}
			}
		}
		for _, c := range v {
			collectMessages(c, into)
		}
	case []any:
		for _, c := range v {
			collectMessages(c, into)
		}
	}
}
