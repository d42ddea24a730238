package scheduler

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// class is a pod equivalence class: pods with the same namespace, labels,
// requests and scheduling constraints. Everything the scheduler derives
// from a pod is computed once per class (and per relaxation level).
type class struct {
	key      string
	rep      *corev1.Pod // representative pod
	req      vec
	size     float64 // cpu + memory in cpu units, for ordering
	forcing  int     // 2: a node per pod (hostname anti-affinity), 1: hostname spread
	reqOK    bool    // false: requests an extended resource beyond the vector
	pods     []*corev1.Pod
	variants []*variant // relaxation levels, compiled lazily
	noMore   bool       // no further relaxation possible
	memberOf []*group   // topology groups whose selector matches these pods
	ports    []hostPort // host ports every pod of the class binds
	moved    bool       // Input.Moved: kept off NoMovedPods nodes
	// volRefs are the volumes its pods share with other pods (see
	// sharedVolumes), nil when none does.
	volRefs map[*corev1.Pod][]volRef
}

// hostPort is a port a pod binds on its node's network. Two pods conflict
// when protocol and port are equal and one listens on every address
// (0.0.0.0, or no hostIP) or both on the same one (kube-scheduler's
// NodePorts).
type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	if a.protocol != b.protocol || a.port != b.port {
		return false
	}
	return a.ip == "0.0.0.0" || b.ip == "0.0.0.0" || a.ip == b.ip
}

// hostPorts lists the host ports of a pod's containers (and of its
// restartable init containers, which run beside them).
func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for i := range cs {
			c := &cs[i]
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				hp := hostPort{protocol: cp.Protocol, ip: cp.HostIP, port: cp.HostPort}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				if hp.ip == "" {
					hp.ip = "0.0.0.0"
				}
				out = append(out, hp)
			}
		}
	}
	add(p.Spec.Containers, false)
	add(p.Spec.InitContainers, true)
	return out
}

// portsFree reports whether none of want conflicts with used.
func portsFree(used, want []hostPort) bool {
	for _, w := range want {
		for _, u := range used {
			if w.conflicts(u) {
				return false
			}
		}
	}
	return true
}

// keyWriter builds class keys; reused across pods to avoid allocations.
type keyWriter struct{ b []byte }

func (w *keyWriter) s(v string) { w.b = append(w.b, v...); w.b = append(w.b, 0) }
func (w *keyWriter) i(v int64)  { w.b = strconv.AppendInt(w.b, v, 10); w.b = append(w.b, 0) }
func (w *keyWriter) sep(c byte) { w.b = append(w.b, c) }

func (w *keyWriter) strMap(m map[string]string) {
	if len(m) == 0 {
		w.sep('{')
		w.sep('}')
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.sep('{')
	for _, k := range keys {
		w.s(k)
		w.s(m[k])
	}
	w.sep('}')
}

func (w *keyWriter) strs(v []string) {
	w.sep('[')
	for _, s := range v {
		w.s(s)
	}
	w.sep(']')
}

func (w *keyWriter) nodeReqs(rs []corev1.NodeSelectorRequirement) {
	reqsKey(w, rs, func(r corev1.NodeSelectorRequirement) (string, string, []string) {
		return r.Key, string(r.Operator), r.Values
	})
}

// reqsKey writes requirements (node or label selector ones), each as its
// key, operator and values.
func reqsKey[R any](w *keyWriter, rs []R, parts func(R) (key, op string, values []string)) {
	w.sep('[')
	for _, r := range rs {
		key, op, values := parts(r)
		w.s(key)
		w.s(op)
		w.strs(values)
	}
	w.sep(']')
}

// tolerations writes 'T' and the tolerations.
func (w *keyWriter) tolerations(ts []corev1.Toleration) {
	w.sep('T')
	for _, t := range ts {
		w.s(t.Key)
		w.s(string(t.Operator))
		w.s(t.Value)
		w.s(string(t.Effect))
	}
}

func (w *keyWriter) term(t *corev1.NodeSelectorTerm) {
	w.nodeReqs(t.MatchExpressions)
	w.nodeReqs(t.MatchFields)
}

func (w *keyWriter) selector(s *metav1.LabelSelector) {
	if s == nil {
		w.sep('-')
		return
	}
	w.strMap(s.MatchLabels)
	reqsKey(w, s.MatchExpressions, func(e metav1.LabelSelectorRequirement) (string, string, []string) {
		return e.Key, string(e.Operator), e.Values
	})
}

func (w *keyWriter) podTerm(t *corev1.PodAffinityTerm) {
	w.selector(t.LabelSelector)
	w.strs(t.Namespaces)
	w.s(t.TopologyKey)
	w.selector(t.NamespaceSelector)
	w.strs(t.MatchLabelKeys)
	w.strs(t.MismatchLabelKeys)
}

func (w *keyWriter) podAffinity(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) {
	w.sep('(')
	for i := range req {
		w.podTerm(&req[i])
	}
	w.sep('|')
	for i := range pref {
		w.i(int64(pref[i].Weight))
		w.podTerm(&pref[i].PodAffinityTerm)
	}
	w.sep(')')
}

// classKey writes everything that affects where a pod may go.
func (w *keyWriter) classKey(p *corev1.Pod, req vec, vol PodVolumes) string {
	w.b = w.b[:0]
	w.s(p.Namespace)
	w.sep('V')
	w.nodeReqs(vol.Requirements)
	w.s(vol.Err)
	w.strMap(p.Labels)
	for _, q := range req {
		w.i(q)
	}
	w.strMap(p.Spec.NodeSelector)
	if a := p.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			w.sep('N')
			if rd := na.RequiredDuringSchedulingIgnoredDuringExecution; rd != nil {
				for i := range rd.NodeSelectorTerms {
					w.term(&rd.NodeSelectorTerms[i])
				}
			}
			w.sep('|')
			for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &na.PreferredDuringSchedulingIgnoredDuringExecution[i]
				w.i(int64(t.Weight))
				w.term(&t.Preference)
			}
		}
		if pa := a.PodAffinity; pa != nil {
			w.sep('A')
			w.podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			w.sep('X')
			w.podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	w.tolerations(p.Spec.Tolerations)
	if hasDRA(p) {
		w.sep('D')
	}
	w.sep('P')
	for _, hp := range hostPorts(p) {
		w.s(string(hp.protocol))
		w.s(hp.ip)
		w.i(int64(hp.port))
	}
	w.sep('S')
	for _, c := range p.Spec.TopologySpreadConstraints {
		w.i(int64(c.MaxSkew))
		w.s(c.TopologyKey)
		w.s(string(c.WhenUnsatisfiable))
		w.selector(c.LabelSelector)
		if c.MinDomains != nil {
			w.i(int64(*c.MinDomains))
		}
		if c.NodeAffinityPolicy != nil {
			w.s(string(*c.NodeAffinityPolicy))
		}
		if c.NodeTaintsPolicy != nil {
			w.s(string(*c.NodeTaintsPolicy))
		}
		w.strs(c.MatchLabelKeys)
	}
	return string(w.b)
}

// podName is namespace/name.
func podName(p *corev1.Pod) string {
	if p.Namespace == "" {
		return p.Name
	}
	var b strings.Builder
	b.Grow(len(p.Namespace) + 1 + len(p.Name))
	b.WriteString(p.Namespace)
	b.WriteByte('/')
	b.WriteString(p.Name)
	return b.String()
}

// tolerates reports whether tolerations tolerate every taint; with
// skipPreferNoSchedule, PreferNoSchedule taints do not count (kube-scheduler's
// filters; Karpenter's DaemonSet overhead; a pod relaxed to tolerate them).
// Otherwise they count like the others, as Karpenter plans: a pod avoids
// them until its last relaxation.
func tolerates(tols []corev1.Toleration, taints []corev1.Taint, skipPreferNoSchedule bool) (corev1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if skipPreferNoSchedule && t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tols {
			if toleratesTaint(&tols[j], t) {
				ok = true
				break
			}
		}
		if !ok {
			return *t, false
		}
	}
	return corev1.Taint{}, true
}

// toleratesTaint follows the Kubernetes rules: an empty key with Exists
// matches every key; an empty effect matches every effect.
func toleratesTaint(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}
