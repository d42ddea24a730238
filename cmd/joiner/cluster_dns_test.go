package main

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/userdata"
)

// TestKubeDNSIP: nodes are given the kube-system/kube-dns Service's cluster
// IP as cluster DNS (Karpenter's KubeDNSIP), in the user data and in
// /v1/status; without the Service, or when it has no cluster IP, the 10th
// address of the service CIDR.
func TestKubeDNSIP(t *testing.T) {
	svc := func(ns, name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
	}
	cases := []struct {
		name     string
		objs     []*corev1.Service
		cidr     string
		wantIP   string // kubeDNSIP
		wantNode string // the cluster DNS nodes and the status are told
	}{
		{name: "the Service's address", objs: []*corev1.Service{svc("kube-system", "kube-dns", "10.100.0.53")}, cidr: "10.100.0.0/16",
			wantIP: "10.100.0.53", wantNode: "10.100.0.53"},
		{name: "IPv6", objs: []*corev1.Service{svc("kube-system", "kube-dns", "fd00:10::35")}, cidr: "fd00:10::/108",
			wantIP: "fd00:10::35", wantNode: "fd00:10::35"},
		{name: "no Service", objs: []*corev1.Service{svc("default", "kube-dns", "10.100.0.53"), svc("kube-system", "coredns", "10.100.0.54")},
			cidr: "10.100.0.0/16", wantNode: "10.100.0.10"},
		{name: "headless Service", objs: []*corev1.Service{svc("kube-system", "kube-dns", corev1.ClusterIPNone)}, cidr: "10.100.0.0/16",
			wantNode: "10.100.0.10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kube := fake.NewClientset()
			for _, o := range c.objs {
				if _, err := kube.CoreV1().Services(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			ip := kubeDNSIP(context.Background(), kube, zap.NewNop())
			if ip != c.wantIP {
				t.Errorf("kubeDNSIP = %q, want %q", ip, c.wantIP)
			}
			o := cloud.Cluster{Endpoint: "https://k8s.example", KubernetesVersion: "1.34", CABundle: []byte(sim.DefaultClusterCA), ServiceCIDR: c.cidr}
			if strings.Contains(c.cidr, ":") {
				o.ServiceCIDR, o.ServiceIPv6CIDR = "", c.cidr
			}
			d, err := joineraws.NewClusterDiscovery(nil, "c", o, zap.NewNop(), nil)
			if err != nil {
				t.Fatal(err)
			}
			nf := &nodeFacts{discovery: d, dnsIP: ip}
			uc, _, err := leaderCluster(nf)()
			if err != nil {
				t.Fatal(err)
			}
			ud, err := userdata.Render(userdata.Input{Family: userdata.FamilyAL2023, Cluster: uc})
			if err != nil {
				t.Fatal(err)
			}
			facts, err := userdata.Parse(userdata.FamilyAL2023, ud)
			if err != nil {
				t.Fatal(err)
			}
			if facts.ClusterDNS != c.wantNode {
				t.Errorf("user data cluster DNS %q, want %q", facts.ClusterDNS, c.wantNode)
			}
			if got := statusCluster(nf)().ClusterDNS; got != c.wantNode {
				t.Errorf("status cluster DNS %q, want %q", got, c.wantNode)
			}
		})
	}
}
