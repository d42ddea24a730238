//go:build tools

// Package tools pins nfpm for `make package` (deb and rpm).
package tools

import _ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
