package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestStatusProxyPaths(t *testing.T) {
	lbl := map[string]string{"app.kubernetes.io/component": "coordinator"}
	svc := func(ns, name string, headless bool, ports ...corev1.ServicePort) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}, Spec: corev1.ServiceSpec{Ports: ports}}
		if headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return s
	}
	http := corev1.ServicePort{Name: "http", Port: 8080}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "joiner", Name: "c-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "raft", ContainerPort: 7000}, {Name: "http", ContainerPort: 8443}}}}}}
	tests := []struct {
		name      string
		objs      []runtime.Object
		ns, svc   string
		pod       string
		want, err string
	}{
		{name: "the chart's pair in ns", ns: "joiner", objs: []runtime.Object{svc("joiner", "j-peers", true, http), svc("joiner", "j", false, http)},
			want: "/api/v1/namespaces/joiner/services/https:j:http/proxy"},
		{name: "found in any namespace", objs: []runtime.Object{svc("karpenter", "j", false, http)},
			want: "/api/v1/namespaces/karpenter/services/https:j:http/proxy"},
		{name: "two releases", objs: []runtime.Object{svc("a", "j", false, http), svc("b", "j", false, http)},
			err: "2 coordinator Services in any namespace (a/j, b/j): pick one with -n and --service"},
		{name: "none", ns: "default", objs: []runtime.Object{svc("joiner", "j", false, http)},
			err: "no coordinator Service in namespace default"},
		{name: "named, one unnamed port", ns: "x", svc: "mine", objs: []runtime.Object{svc("x", "mine", false, corev1.ServicePort{Port: 9000})},
			want: "/api/v1/namespaces/x/services/https:mine:9000/proxy"},
		{name: "named, no http port", ns: "x", svc: "mine", objs: []runtime.Object{svc("x", "mine", false, corev1.ServicePort{Name: "a", Port: 1}, corev1.ServicePort{Name: "b", Port: 2})},
			err: "no port named http"},
		{name: "pod", ns: "joiner", pod: "c-0", objs: []runtime.Object{pod}, want: "/api/v1/namespaces/joiner/pods/https:c-0:8443/proxy"},
		{name: "missing pod", ns: "joiner", pod: "c-9", objs: []runtime.Object{pod}, err: `--pod c-9 in namespace joiner: pods "c-9" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(tt.objs...)
			var got string
			var err error
			if tt.pod != "" {
				got, err = podProxyPath(context.Background(), cs, tt.ns, tt.pod, "https")
			} else {
				got, err = serviceProxyPath(context.Background(), cs, tt.ns, tt.svc, "https")
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
