package scheduler

import (
	"slices"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podresources"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// maxResources bounds the resource vector: cpu, memory, pods,
// ephemeral-storage and up to four extended resources that pods request.
const maxResources = 8

const (
	resCPU = iota
	resMemory
	resPods
	resEphemeral
	numFixed
)

// vec is a resource vector: cpu in millicores, the rest in units (bytes,
// pods, devices). Fixed size so it is copied by value, never allocated.
type vec [maxResources]int64

func (v vec) add(o vec) vec {
	for i := range v {
		v[i] += o[i]
	}
	return v
}

func (v vec) sub(o vec) vec {
	for i := range v {
		v[i] -= o[i]
	}
	return v
}

// fits reports whether v <= cap in every dimension.
func (v vec) fits(cap vec) bool {
	for i := range v {
		if v[i] > cap[i] {
			return false
		}
	}
	return true
}

func (v vec) max(o vec) vec {
	for i := range v {
		v[i] = max(v[i], o[i])
	}
	return v
}

// resourceIndex maps resource names to vector slots for one Solve.
type resourceIndex struct {
	names []corev1.ResourceName // slot -> name
	slot  map[corev1.ResourceName]int
	// extra are requests a pod makes beyond its containers' (its volume
	// attachments), by pod key.
	extra map[string]corev1.ResourceList
}

// unlimited stands for a resource a node does not limit.
const unlimited = int64(1) << 50

func newResourceIndex(pods [][]*corev1.Pod, extra map[string]corev1.ResourceList) *resourceIndex {
	ri := &resourceIndex{
		names: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage},
		slot:  map[corev1.ResourceName]int{},
		extra: extra,
	}
	var ext []corev1.ResourceName
	seen := map[corev1.ResourceName]bool{}
	for _, l := range extra {
		for n := range l {
			if !seen[n] {
				seen[n] = true
				ext = append(ext, n)
			}
		}
	}
	for _, list := range pods {
		for _, p := range list {
			forEachRequestList(p, func(l corev1.ResourceList) {
				for n := range l {
					switch n {
					case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
					default:
						if !seen[n] {
							seen[n] = true
							ext = append(ext, n)
						}
					}
				}
			})
		}
	}
	slices.Sort(ext)
	ri.names = append(ri.names, ext...)
	for i, n := range ri.names {
		ri.slot[n] = i
	}
	return ri
}

// tooMany reports the extended resources that do not fit in the vector.
func (ri *resourceIndex) overflow() []corev1.ResourceName {
	if len(ri.names) <= maxResources {
		return nil
	}
	return ri.names[maxResources:]
}

func forEachRequestList(p *corev1.Pod, f func(corev1.ResourceList)) {
	for i := range p.Spec.Containers {
		f(p.Spec.Containers[i].Resources.Requests)
	}
	for i := range p.Spec.InitContainers {
		f(p.Spec.InitContainers[i].Resources.Requests)
	}
	f(p.Spec.Overhead)
}

// toVec converts a resource list; names outside the index are reported
// through unknown (nil to ignore them).
func (ri *resourceIndex) toVec(l corev1.ResourceList, unknown *bool) vec {
	var v vec
	for n, q := range l {
		i, ok := ri.slot[n]
		if !ok || i >= maxResources {
			if unknown != nil && !q.IsZero() {
				*unknown = true
			}
			continue
		}
		v[i] += quantity(i, q)
	}
	return v
}

func quantity(slot int, q resource.Quantity) int64 {
	if slot == resCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// toList converts back, omitting zero extended resources and the CSI
// attach slots: those are the scheduler's count of volumes, not resources
// a node registers, and a NodeClaim requesting them would wait for ever to
// see them in the Node's allocatable (Karpenter's NodeClaim requests are
// the pods' requests and the DaemonSet overhead only).
func (ri *resourceIndex) toList(v vec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, n := range ri.names {
		if i >= maxResources {
			break
		}
		if i >= numFixed && v[i] == 0 {
			continue
		}
		if _, ok := ri.isAttach(i); ok {
			continue
		}
		if i == resCPU {
			out[n] = *resource.NewMilliQuantity(v[i], resource.DecimalSI)
		} else if i == resMemory || i == resEphemeral {
			out[n] = *resource.NewQuantity(v[i], resource.BinarySI)
		} else {
			out[n] = *resource.NewQuantity(v[i], resource.DecimalSI)
		}
	}
	return out
}

// requestList is toList without the resources nothing requests: a
// NodeClaim's requests name only what its pods and DaemonSets ask for, as
// Karpenter's do (no "ephemeral-storage: 0" when none asks for any).
func (ri *resourceIndex) requestList(v vec) corev1.ResourceList {
	out := ri.toList(v)
	for n, q := range out {
		if q.IsZero() {
			delete(out, n)
		}
	}
	return out
}

// podRequests is what the pod needs on a node, as kube-scheduler counts it
// (podresources.Requests: containers, sidecars and init containers,
// pod-level resources, a resize in progress, overhead), plus one pod slot.
// A pod with neither pod-level resources nor resources in its container
// statuses (every pending pod) takes a path that allocates nothing: the
// same sum, which TestPodRequestsMatchPodresources holds to the library's.
func (ri *resourceIndex) podRequests(p *corev1.Pod) (vec, bool) {
	var unknown bool
	var out vec
	if p.Spec.Resources != nil || statusResources(p) {
		out = ri.toVec(podresources.Requests(p), &unknown)
	} else {
		for i := range p.Spec.Containers {
			out = out.add(ri.toVec(p.Spec.Containers[i].Resources.Requests, &unknown))
		}
		var sidecars, initMax vec
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			r := ri.toVec(c.Resources.Requests, &unknown)
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				sidecars = sidecars.add(r)
				initMax = initMax.max(sidecars)
				continue
			}
			initMax = initMax.max(sidecars.add(r))
		}
		out = out.add(sidecars).max(initMax)
		out = out.add(ri.toVec(p.Spec.Overhead, &unknown))
	}
	if x, ok := ri.extra[podName(p)]; ok {
		out = out.add(ri.toVec(x, &unknown))
	}
	out[resPods]++
	return out, !unknown
}

// statusResources reports whether a container status carries resources
// (allocated or actuated: a resize), which kube-scheduler counts.
func statusResources(p *corev1.Pod) bool {
	for _, ss := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range ss {
			if ss[i].AllocatedResources != nil || ss[i].Resources != nil {
				return true
			}
		}
	}
	return false
}

// isAttach reports whether a slot counts a CSI driver's attachable volumes.
func (ri *resourceIndex) isAttach(slot int) (string, bool) {
	if slot >= len(ri.names) {
		return "", false
	}
	return strings.CutPrefix(string(ri.names[slot]), "attachable-volumes-csi-")
}

// nodeVec is a node's allocatable with every attach slot the node does not
// list unlimited.
func (ri *resourceIndex) nodeVec(l corev1.ResourceList) vec {
	v := ri.toVec(l, nil)
	for i := numFixed; i < min(len(ri.names), maxResources); i++ {
		if _, ok := ri.isAttach(i); ok {
			if _, listed := l[ri.names[i]]; !listed {
				v[i] = unlimited
			}
		}
	}
	return v
}

// attachLimit is how many volumes of a CSI driver a new node of type it can
// attach: EBS's attachment limits (Nitro types share 28 attachments with
// network interfaces and instance-store volumes: 26 once the root volume
// and the primary interface are counted; Xen types take 39 volumes besides
// the root one); other drivers are not limited.
func attachLimit(it *catalog.InstanceType, driver string) int64 {
	if driver != EBSDriver {
		return unlimited
	}
	if it.Labels[karpv1.LabelInstanceHypervisor] == "xen" {
		return 39
	}
	return 26
}

// FitNominated splits the pods nominated to a node (in order) into those
// that still fit beside the pods bound there and those that do not: a
// nomination whose node filled up with other pods is stale, and its pod
// needs a new plan.
func FitNominated(allocatable corev1.ResourceList, bound, nominated []*corev1.Pod) (fit, stale []*corev1.Pod) {
	ri := newResourceIndex([][]*corev1.Pod{bound, nominated}, nil)
	free := ri.toVec(allocatable, nil)
	for _, p := range bound {
		r, _ := ri.podRequests(p)
		free = free.sub(r)
	}
	for _, p := range nominated {
		r, _ := ri.podRequests(p)
		if r.fits(free) {
			free = free.sub(r)
			fit = append(fit, p)
			continue
		}
		stale = append(stale, p)
	}
	return fit, stale
}
