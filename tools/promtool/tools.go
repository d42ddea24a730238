//go:build tools

// Package tools pins promtool for the alert rule tests (promtool test rules
// packaging/prometheus/*_test.yaml).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
