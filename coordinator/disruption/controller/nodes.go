package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeClient adapts a clientset to Nodes.
func NodeClient(k kubernetes.Interface) Nodes { return nodeClient{k} }

type nodeClient struct{ k kubernetes.Interface }

func (n nodeClient) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return n.k.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (n nodeClient) UpdateNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	return n.k.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
}
