#!/usr/bin/env bash
# Copies the generated CRDs (packaging/crds, from `make generate`) into the
# Helm chart's crds/ folder. packaging/packaging_test.go fails when they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=packaging/helm/joiner/crds
mkdir -p "$dst"
rm -f "$dst"/*.yaml
cp packaging/crds/*.yaml "$dst"/
