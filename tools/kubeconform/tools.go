//go:build tools

// Package tools pins kubeconform for the chart tests (strict schema check of
// the rendered manifests against Kubernetes' own OpenAPI schemas).
package tools

import _ "github.com/yannh/kubeconform/cmd/kubeconform"
