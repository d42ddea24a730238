package podutil

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PDBs answer "which PodDisruptionBudgets select this pod" per namespace
// (Karpenter's pdb.Limits).
type PDBs map[string][]pdbEntry

type pdbEntry struct {
	name     string
	selector labels.Selector
	allowed  int32
	// fullyBlocking: the PDB never allows an eviction (maxUnavailable 0
	// or "0%", minAvailable "100%"), whatever its status says.
	fullyBlocking bool
	// evictUnhealthy: unhealthyPodEvictionPolicy AlwaysAllow, so a pod
	// that is not Ready may always be evicted.
	evictUnhealthy bool
}

// NewPDBs indexes the budgets. A budget whose selector does not parse is
// left out and named in the error; the others are indexed all the same.
func NewPDBs(budgets []*policyv1.PodDisruptionBudget) (PDBs, error) {
	idx := PDBs{}
	var errs []error
	for _, p := range budgets {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("pdb %s/%s: spec.selector: %w", p.Namespace, p.Name, err))
			continue
		}
		if p.Spec.Selector == nil {
			sel = labels.Nothing()
		}
		mu, ma := p.Spec.MaxUnavailable, p.Spec.MinAvailable
		idx[p.Namespace] = append(idx[p.Namespace], pdbEntry{
			name: p.Namespace + "/" + p.Name, selector: sel, allowed: p.Status.DisruptionsAllowed,
			fullyBlocking: mu != nil && (mu.Type == intstr.Int && mu.IntVal == 0 || mu.Type == intstr.String && mu.StrVal == "0%") ||
				ma != nil && ma.Type == intstr.String && ma.StrVal == "100%",
			evictUnhealthy: p.Spec.UnhealthyPodEvictionPolicy != nil && *p.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		})
	}
	return idx, errors.Join(errs...)
}

// Blocking returns why the PDBs keep p from being evicted at now, or "" (Karpenter's
// pdb.Limits isEvictable). A pod Joiner would not evict (see Evictable) is
// never held. One selected by several PDBs always is (the eviction API
// refuses it); one selected by a single PDB is held when that PDB allows
// no disruption now, or with fully only when it never allows any (a fully
// blocking PDB) — unless the PDB lets unhealthy pods go and the pod is
// not Ready.
func (idx PDBs) Blocking(p *corev1.Pod, now time.Time, fully bool) string {
	if len(idx[p.Namespace]) == 0 || !Evictable(p, now) {
		return ""
	}
	var found []pdbEntry
	set := labels.Set(p.Labels)
	for _, e := range idx[p.Namespace] {
		if e.selector.Matches(set) {
			found = append(found, e)
		}
	}
	switch {
	case len(found) > 1:
		names := make([]string, len(found))
		for i, e := range found {
			names[i] = e.name
		}
		return fmt.Sprintf("eviction does not support multiple PDBs (PodDisruptionBudget(s)=[%s])", strings.Join(names, " "))
	case len(found) == 0:
		return ""
	}
	e := found[0]
	if e.evictUnhealthy && notReady(p) {
		return ""
	}
	if fully {
		if e.fullyBlocking {
			return fmt.Sprintf("pdb %s never allows an eviction", e.name)
		}
		return ""
	}
	if e.allowed <= 0 {
		return fmt.Sprintf("pdb prevents pod evictions (PodDisruptionBudget=[%s])", e.name)
	}
	return ""
}

func notReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// Pod classification, Karpenter v1.14.1's pkg/utils/pod: owners are
// matched by API version and kind, as Karpenter does.

func ownerIs(p *corev1.Pod, apiVersion, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.APIVersion == apiVersion && o.Kind == kind {
			return true
		}
	}
	return false
}

// OwnedByStatefulSet: a StatefulSet controls p.
func OwnedByStatefulSet(p *corev1.Pod) bool { return ownerIs(p, "apps/v1", "StatefulSet") }

// Terminal: p has finished.
func Terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Terminating: p is being deleted.
func Terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// Active: neither finished nor being deleted.
func Active(p *corev1.Pod) bool { return !Terminal(p) && !Terminating(p) }

// Reschedulable says whether a pod must find a new home when its node goes
// (Karpenter's IsReschedulable): active, or a terminating StatefulSet pod
// (its replacement can only start once it is gone, so its room is needed),
// and neither a DaemonSet nor a static pod.
func Reschedulable(p *corev1.Pod) bool {
	return (Active(p) || OwnedByStatefulSet(p) && Terminating(p)) && !OwnedByDaemonSet(p) && !OwnedByNode(p)
}

// Disruptable: the pod does not keep its node (Karpenter's IsDisruptable):
// it is not active, or no do-not-disrupt protects it. DaemonSet and static
// pods can keep their node this way too.
func Disruptable(p *corev1.Pod, now time.Time) bool {
	return !Active(p) || !DoNotDisruptActive(p, now)
}

// Evictable: draining the node evicts the pod (Karpenter's IsEvictable):
// active, not tolerating the karpenter.sh/disrupted:NoSchedule taint, not
// static, not protected by do-not-disrupt.
func Evictable(p *corev1.Pod, now time.Time) bool {
	return Active(p) && !ToleratesDisrupted(p) && !OwnedByNode(p) && !DoNotDisruptActive(p, now)
}

// CurrentlyReschedulable: a reschedulable pod that would move now
// (Karpenter's IsCurrentlyReschedulable): not protected by do-not-disrupt
// and not held by a fully blocking PDB (nor by several PDBs, which the
// eviction API refuses).
func CurrentlyReschedulable(p *corev1.Pod, now time.Time, pdbs PDBs) bool {
	return Reschedulable(p) && Disruptable(p, now) && pdbs.Blocking(p, now, true) == ""
}
