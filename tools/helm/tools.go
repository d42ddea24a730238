//go:build tools

// Package tools pins helm for the chart tests (helm lint, helm template).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
