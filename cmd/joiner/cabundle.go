package main

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
)

// clusterCABundle is the cluster CA bundle nodes are given and Karpenter
// hashes into the EC2NodeClass hash (base64 PEM): caFile when set (PEM or
// base64), else the rest config's CA data, else its CA file (what an
// in-cluster config and a kubeconfig naming its CA by path give; Karpenter
// reads the file the same way). The coordinator and `joiner migrate check`
// both use it, so the check judges with the bundle the coordinator will.
func clusterCABundle(rc *rest.Config, caFile string) (string, error) {
	switch {
	case caFile != "":
		b, err := os.ReadFile(caFile)
		if err != nil {
			return "", fmt.Errorf("--cluster-ca-file: %w", err)
		}
		return caBundle(b), nil
	case len(rc.CAData) > 0:
		return caBundle(rc.CAData), nil
	case rc.CAFile != "":
		b, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return "", fmt.Errorf("reading the cluster CA of the kubeconfig (or pass --cluster-ca-file): %w", err)
		}
		return caBundle(b), nil
	}
	return "", nil
}
