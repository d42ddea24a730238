package view

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/internal/podutil"
)

// Key is a pod's namespace/name, the key raft nominations use.
func Key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Reschedulable: a pod on a disrupted node that needs capacity elsewhere:
// Karpenter's IsCurrentlyReschedulable (active, or a terminating
// StatefulSet pod; not a DaemonSet's or static pod; not kept there by
// do-not-disrupt or a fully blocking PDB), and, unlike Karpenter, with a
// controller that recreates it (a bare pod is not recreated, so capacity
// for it would go to waste).
func Reschedulable(p *corev1.Pod, now time.Time, pdbs podutil.PDBs) bool {
	if !podutil.CurrentlyReschedulable(p, now, pdbs) {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
