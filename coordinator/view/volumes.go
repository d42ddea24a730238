package view

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Storage is what the view reads to work out what a pod's volumes ask of
// its node (kube.Cache).
type Storage interface {
	PersistentVolumeClaim(namespace, name string) *corev1.PersistentVolumeClaim
	PersistentVolume(name string) *corev1.PersistentVolume
	StorageClass(name string) *storagev1.StorageClass
	CSINode(name string) *storagev1.CSINode
	Namespaces() []*corev1.Namespace
}

// claimName is the PersistentVolumeClaim a volume uses: its own, or for a
// generic ephemeral volume the one the ephemeral controller names
// <pod>-<volume>. Empty for volumes without a claim.
func claimName(pod *corev1.Pod, vol corev1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name
	}
	return ""
}

// hasVolumeNeeds reports whether any volume of the pod may constrain its
// node (cheap: most pods have none).
func hasVolumeNeeds(pod *corev1.Pod) bool {
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil || vol.AWSElasticBlockStore != nil {
			return true
		}
	}
	return false
}

// podVolumes works out the node requirements and attachments of a pod's
// volumes the way Karpenter's volume topology does: a bound claim's
// PersistentVolume node affinity (hostname terms of local and hostPath
// volumes dropped, since a new node cannot match them), an unbound claim's
// WaitForFirstConsumer StorageClass allowedTopologies. A claim that is
// missing, lost, being deleted, bound but not yet marked bind-completed, or
// unbound without a usable StorageClass makes the pod unschedulable for
// now, with the reason in Err. Each volume counts once per pod, under its
// name (the claim's namespace/name, an inline EBS volume's ID), so that the
// scheduler counts a volume several pods share once per node.
//
// Where a volume offers several alternative terms, the view keeps them only
// when each is one In requirement on the same key (their values are
// joined, as for a StorageClass listing zones one term each); otherwise it
// keeps the first term, as Karpenter did before v1.6.
func podVolumes(pod *corev1.Pod, st Storage) scheduler.PodVolumes {
	var out scheduler.PodVolumes
	for _, vol := range pod.Spec.Volumes {
		if vol.AWSElasticBlockStore != nil {
			attachVolume(&out, scheduler.EBSDriver, vol.AWSElasticBlockStore.VolumeID)
			continue
		}
		name := claimName(pod, vol)
		if name == "" {
			continue
		}
		reqs, driver, err := claimNeeds(pod.Namespace, name, st)
		if err != "" {
			return scheduler.PodVolumes{Err: err}
		}
		out.Requirements = append(out.Requirements, reqs...)
		attachVolume(&out, driver, pod.Namespace+"/"+name)
	}
	return out
}

// attachVolume counts the volume name of a CSI driver among a pod's
// attachments, once however many of the pod's volumes use it.
func attachVolume(out *scheduler.PodVolumes, driver, name string) {
	if driver == "" || slices.Contains(out.Volumes[driver], name) {
		return
	}
	if out.Attachments == nil {
		out.Attachments, out.Volumes = map[string]int64{}, map[string][]string{}
	}
	out.Attachments[driver]++
	out.Volumes[driver] = append(out.Volumes[driver], name)
}

// claimNeeds is one claim's node requirements and CSI driver, or why the
// pod cannot be scheduled yet.
func claimNeeds(namespace, name string, st Storage) ([]corev1.NodeSelectorRequirement, string, string) {
	pvc := st.PersistentVolumeClaim(namespace, name)
	switch {
	case pvc == nil:
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s not found", namespace, name)
	case pvc.DeletionTimestamp != nil:
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s is being deleted", namespace, name)
	case pvc.Status.Phase == corev1.ClaimLost:
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s is bound to persistentvolume %q, which does not exist", namespace, name, pvc.Spec.VolumeName)
	}
	scName := ""
	if pvc.Spec.StorageClassName != nil {
		scName = *pvc.Spec.StorageClassName
	}
	if pvc.Spec.VolumeName != "" {
		pv := st.PersistentVolume(pvc.Spec.VolumeName)
		switch {
		case pv == nil:
			return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s: persistentvolume %q not found", namespace, name, pvc.Spec.VolumeName)
		case pv.DeletionTimestamp != nil:
			return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s: persistentvolume %q is being deleted", namespace, name, pv.Name)
		}
		if _, ok := pvc.Annotations[karpv1.AnnotationBindCompleted]; !ok {
			return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s is not bound yet (no %s annotation)", namespace, name, karpv1.AnnotationBindCompleted)
		}
		driver := ""
		switch {
		case pv.Spec.CSI != nil:
			driver = pv.Spec.CSI.Driver
		case pv.Spec.AWSElasticBlockStore != nil:
			driver = scheduler.EBSDriver
		default:
			if sc := st.StorageClass(scName); sc != nil {
				driver = csiDriver(sc.Provisioner)
			}
		}
		return pvAffinity(pv), driver, ""
	}
	if scName == "" {
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s is unbound and names no storage class", namespace, name)
	}
	sc := st.StorageClass(scName)
	if sc == nil {
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s: storageclass %q not found", namespace, name, scName)
	}
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
		return nil, "", fmt.Sprintf("persistentvolumeclaim %s/%s is unbound and storageclass %q binds immediately (the volume must be bound first)", namespace, name, scName)
	}
	var alts [][]corev1.NodeSelectorRequirement
	for _, term := range sc.AllowedTopologies {
		var reqs []corev1.NodeSelectorRequirement
		for _, e := range term.MatchLabelExpressions {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
		}
		if len(reqs) > 0 {
			alts = append(alts, reqs)
		}
	}
	return mergeAlternatives(alts), csiDriver(sc.Provisioner), ""
}

// pvAffinity is a PersistentVolume's required node affinity as
// requirements.
func pvAffinity(pv *corev1.PersistentVolume) []corev1.NodeSelectorRequirement {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	var alts [][]corev1.NodeSelectorRequirement
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		reqs := term.MatchExpressions
		if local {
			reqs = slices.DeleteFunc(slices.Clone(reqs), func(r corev1.NodeSelectorRequirement) bool {
				return r.Key == karpv1.LabelHostname
			})
			if len(term.MatchExpressions) > 0 && len(reqs) == 0 {
				return nil // this alternative allows any node
			}
		}
		if len(reqs) > 0 {
			alts = append(alts, reqs)
		}
	}
	return mergeAlternatives(alts)
}

// mergeAlternatives turns ORed terms into one: joined values when every
// term is one In requirement on the same key, the first term otherwise.
func mergeAlternatives(alts [][]corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	switch len(alts) {
	case 0:
		return nil
	case 1:
		return alts[0]
	}
	key := alts[0][0].Key
	values := map[string]bool{}
	for _, a := range alts {
		if len(a) != 1 || a[0].Key != key || a[0].Operator != corev1.NodeSelectorOpIn {
			return alts[0]
		}
		for _, v := range a[0].Values {
			values[v] = true
		}
	}
	return []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: slices.Sorted(maps.Keys(values))}}
}

// csiDriver is the CSI driver behind a provisioner name (the in-tree EBS
// plugin is migrated to the EBS CSI driver).
func csiDriver(provisioner string) string {
	if provisioner == karpv1.ProvisionerAWSEBSInTree {
		return scheduler.EBSDriver
	}
	return provisioner
}

// attachAllocatable adds a CSINode's per-driver volume limits to a node's
// allocatable (a copy when there are any).
func attachAllocatable(alloc corev1.ResourceList, cn *storagev1.CSINode) corev1.ResourceList {
	if cn == nil {
		return alloc
	}
	var out corev1.ResourceList
	for _, d := range cn.Spec.Drivers {
		if d.Allocatable == nil || d.Allocatable.Count == nil {
			continue
		}
		if out == nil {
			out = alloc.DeepCopy()
			if out == nil {
				out = corev1.ResourceList{}
			}
		}
		out[scheduler.AttachResource(d.Name)] = *resource.NewQuantity(int64(*d.Allocatable.Count), resource.DecimalSI)
	}
	if out == nil {
		return alloc
	}
	return out
}
