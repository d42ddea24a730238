package podresources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// list is "cpu=1,memory=2Gi" style shorthand.
func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func container(name string, req, lim corev1.ResourceList, sidecar bool) corev1.Container {
	c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	if sidecar {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	return c
}

// TestRequestsAndLimits: containers add up, init containers count one at a
// time with the sidecars started before them, sidecars add to the
// containers, the overhead comes on top and pod-level resources replace
// the containers' (kube-scheduler's count, through component-helpers).
func TestRequestsAndLimits(t *testing.T) {
	for _, tc := range []struct {
		name           string
		containers     []corev1.Container
		inits          []corev1.Container
		overhead       corev1.ResourceList
		podLevel       *corev1.ResourceRequirements
		requests, lims corev1.ResourceList
	}{
		{name: "no containers", requests: list(), lims: list()},
		{
			name: "containers add up",
			containers: []corev1.Container{
				container("a", list("cpu", "1", "memory", "1Gi"), list("cpu", "2"), false),
				container("b", list("cpu", "500m"), list("cpu", "1", "memory", "2Gi"), false),
			},
			requests: list("cpu", "1500m", "memory", "1Gi"),
			lims:     list("cpu", "3", "memory", "2Gi"),
		},
		{
			name:       "a larger init container wins per resource",
			containers: []corev1.Container{container("a", list("cpu", "1", "memory", "4Gi"), nil, false)},
			inits: []corev1.Container{
				container("i1", list("cpu", "3", "memory", "1Gi"), nil, false),
				container("i2", list("cpu", "2", "ephemeral-storage", "1Gi"), nil, false),
			},
			requests: list("cpu", "3", "memory", "4Gi", "ephemeral-storage", "1Gi"),
			lims:     list(),
		},
		{
			name:       "sidecars add to the containers and to the init containers after them",
			containers: []corev1.Container{container("a", list("cpu", "1"), nil, false)},
			inits: []corev1.Container{
				container("early", list("cpu", "2"), nil, false),
				container("proxy", list("cpu", "100m"), list("cpu", "200m"), true),
				container("late", list("cpu", "3"), list("cpu", "1"), false),
			},
			requests: list("cpu", "3100m"),
			lims:     list("cpu", "1200m"),
		},
		{
			name:       "overhead on top",
			containers: []corev1.Container{container("a", list("cpu", "1"), list("cpu", "1"), false)},
			inits:      []corev1.Container{container("i", list("cpu", "2"), nil, false)},
			overhead:   list("cpu", "250m", "memory", "128Mi"),
			requests:   list("cpu", "2250m", "memory", "128Mi"),
			// kube-scheduler adds the overhead only to the limits set.
			lims: list("cpu", "1250m"),
		},
		{
			name:       "pod-level resources replace the containers' for cpu and memory",
			containers: []corev1.Container{container("a", list("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi"), nil, false)},
			podLevel:   &corev1.ResourceRequirements{Requests: list("cpu", "6", "memory", "20Gi"), Limits: list("cpu", "8")},
			requests:   list("cpu", "6", "memory", "20Gi", "ephemeral-storage", "1Gi"),
			lims:       list("cpu", "8"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: tc.containers, InitContainers: tc.inits, Overhead: tc.overhead, Resources: tc.podLevel}}
			for what, c := range map[string]struct{ got, want corev1.ResourceList }{
				"requests": {Requests(p), tc.requests},
				"limits":   {Limits(p), tc.lims},
			} {
				if !equal(c.got, c.want) {
					t.Errorf("%s = %v, want %v", what, c.got, c.want)
				}
			}
		})
	}
}

func equal(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if w, ok := b[n]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// TestAdd: quantities of the same resource add; others are copied.
func TestAdd(t *testing.T) {
	into := list("cpu", "1")
	Add(into, list("cpu", "500m", "memory", "1Gi"))
	if want := list("cpu", "1500m", "memory", "1Gi"); !equal(into, want) {
		t.Fatalf("Add = %v, want %v", into, want)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   corev1.ResourceList
		want string
	}{
		{nil, "{}"},
		{list("memory", "2Gi", "cpu", "1500m", "pods", "3"), "{cpu: 1500m, memory: 2Gi, pods: 3}"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
