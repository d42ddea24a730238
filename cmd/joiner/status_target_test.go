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

func TestStatusProxyTargets(t *testing.T) {
	chart := map[string]string{"app.kubernetes.io/name": "joiner", "app.kubernetes.io/component": "coordinator"}
	svcLabelled := func(labels map[string]string, ns, name string, headless bool, ports ...corev1.ServicePort) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.ServiceSpec{Ports: ports}}
		if headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return s
	}
	svc := func(ns, name string, headless bool, ports ...corev1.ServicePort) *corev1.Service {
		return svcLabelled(chart, ns, name, headless, ports...)
	}
	http := corev1.ServicePort{Name: "http", Port: 8080}
	pod := func(name string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "joiner", Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "raft", ContainerPort: 7000}, {Name: "http", ContainerPort: 8443}}}}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	yes := true
	sts := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "j", Controller: &yes}
	tests := []struct {
		name     string
		objs     []runtime.Object
		ns, svc  string
		pod      string
		want, sa string
		err      string
	}{
		{name: "the chart's pair in ns", ns: "joiner", objs: []runtime.Object{svc("joiner", "j-peers", true, http), svc("joiner", "j", false, http)},
			want: "/api/v1/namespaces/joiner/services/https:j:http/proxy", sa: "j-status"},
		{name: "another namespace's is not looked for", ns: "default", objs: []runtime.Object{svc("joiner", "j", false, http)},
			err: "no coordinator Service in namespace default"},
		{name: "another app's coordinator is not ours", ns: "joiner",
			objs: []runtime.Object{svcLabelled(map[string]string{"app.kubernetes.io/component": "coordinator"}, "joiner", "x", false, http)},
			err:  "no coordinator Service in namespace joiner (a Service labelled app.kubernetes.io/name=joiner,app.kubernetes.io/component=coordinator"},
		{name: "two releases", ns: "joiner", objs: []runtime.Object{svc("joiner", "a", false, http), svc("joiner", "b", false, http)},
			err: "2 coordinator Services in namespace joiner (a, b): pick one with --service"},
		{name: "named, one unnamed port", ns: "x", svc: "mine", objs: []runtime.Object{svc("x", "mine", false, corev1.ServicePort{Port: 9000})},
			want: "/api/v1/namespaces/x/services/https:mine:9000/proxy", sa: "mine-status"},
		{name: "named, no http port", ns: "x", svc: "mine", objs: []runtime.Object{svc("x", "mine", false, corev1.ServicePort{Name: "a", Port: 1}, corev1.ServicePort{Name: "b", Port: 2})},
			err: "no port named http"},
		{name: "pod of the StatefulSet", ns: "joiner", pod: "j-0", objs: []runtime.Object{pod("j-0", sts)},
			want: "/api/v1/namespaces/joiner/pods/https:j-0:8443/proxy", sa: "j-status"},
		{name: "pod of nothing", ns: "joiner", pod: "c-0", objs: []runtime.Object{pod("c-0", nil)}, want: "/api/v1/namespaces/joiner/pods/https:c-0:8443/proxy"},
		{name: "missing pod", ns: "joiner", pod: "c-9", objs: []runtime.Object{pod("c-0", nil)}, err: `--pod c-9 in namespace joiner: pods "c-9" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(tt.objs...)
			var got proxyTarget
			var err error
			if tt.pod != "" {
				got, err = podProxyTarget(context.Background(), cs, tt.ns, tt.pod, "https")
			} else {
				got, err = serviceProxyTarget(context.Background(), cs, tt.ns, tt.svc, "https")
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got.path != tt.want || got.statusSA != tt.sa {
				t.Fatalf("got %+v, %v; want %q, %q", got, err, tt.want, tt.sa)
			}
		})
	}
}
