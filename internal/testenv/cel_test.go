package testenv_test

import (
	"os"
	"path/filepath"
	"strings"

	corev1k "github.com/joiner-dev/joiner/api/core/v1"
)

type invalidCase struct {
	name   string
	mutate func(p *corev1k.NodePool)
	want   []string
}

// celCases are NodePools that break Karpenter's CEL validation rules, each
// used when the NodePool CRD in packaging/crds carries the rule's message.
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
				p.Spec.Template.Spec.Requirements[0].Key = "kubernetes.io/custom"
			},
			want: []string{`label domain "kubernetes.io" is restricted`},
		},
	}
	var out []invalidCase
	for _, c := range all {
		// The CRD YAML may quote the message either way; look for its core.
		core := strings.NewReplacer(`"`, "", `'`, "").Replace(c.want[0])
		flat := strings.NewReplacer(`\"`, "", `"`, "", `'`, "").Replace(string(crd))
		if strings.Contains(flat, core) {
			out = append(out, c)
		}
	}
	return out
}
