//go:build tools

// Package tools pins Karpenter v1.14.0 so that its own scheduling
// benchmark (sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling,
// scheduling_benchmark_test.go, build tag test_performance) can be compiled
// from the module proxy and run beside Joiner's (make bench-karpenter).
package tools

import _ "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
