package scheduler

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// volRef is a volume that more than one pod attaches: its driver's attach
// slot in the resource vector and its name (PodVolumes.Volumes).
type volRef struct {
	slot int
	name string
}

// sharedVolumes lists, by pod key, the volumes of vols that another pod
// uses too. Only those can already be attached where a pod goes, so only
// the pods that use one need per-node bookkeeping: every other pod's
// attachments are plain counts in its requests, and the scheduler does no
// more for them than before volumes had names. Nil when no volume is
// shared (always when no pod names its volumes).
func sharedVolumes(vols map[string]PodVolumes, ri *resourceIndex) map[string][]volRef {
	type named struct{ driver, name string }
	uses := map[named]int{}
	for _, v := range vols {
		for driver, names := range v.Volumes {
			for _, n := range names {
				uses[named{driver, n}]++
			}
		}
	}
	var out map[string][]volRef
	for key, v := range vols {
		for _, driver := range slices.Sorted(maps.Keys(v.Volumes)) {
			slot, ok := ri.slot[AttachResource(driver)]
			if !ok || slot >= maxResources {
				continue
			}
			for _, n := range v.Volumes[driver] {
				if uses[named{driver, n}] < 2 {
					continue
				}
				if out == nil {
					out = map[string][]volRef{}
				}
				out[key] = append(out[key], volRef{slot: slot, name: n})
			}
		}
	}
	return out
}

// volumeRefs are the shared volumes of each of pods that uses one (nil when
// none does).
func (s *solver) volumeRefs(pods []*corev1.Pod) map[*corev1.Pod][]volRef {
	if len(s.shared) == 0 {
		return nil
	}
	var out map[*corev1.Pod][]volRef
	for _, p := range pods {
		if refs := s.shared[podName(p)]; len(refs) > 0 {
			if out == nil {
				out = map[*corev1.Pod][]volRef{}
			}
			out[p] = refs
		}
	}
	return out
}

// lessAttached is req less one attachment of each of refs already attached
// to cl: a volume is attached to a node once, whatever the number of its
// pods there.
func lessAttached(req vec, cl *claim, refs []volRef) vec {
	if cl.vols == nil {
		return req
	}
	for _, r := range refs {
		if cl.vols[r] && req[r.slot] > 0 {
			req[r.slot]--
		}
	}
	return req
}

// attach records refs as attached to cl.
func attach(cl *claim, refs []volRef) {
	if len(refs) == 0 {
		return
	}
	if cl.vols == nil {
		cl.vols = map[volRef]bool{}
	}
	for _, r := range refs {
		cl.vols[r] = true
	}
}

// reqOn is what p, of class c, adds to cl's usage.
func (s *solver) reqOn(cl *claim, c *class, p *corev1.Pod) vec {
	if c.volRefs == nil {
		return c.req
	}
	return lessAttached(c.req, cl, c.volRefs[p])
}
