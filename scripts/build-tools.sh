#!/usr/bin/env bash
# Builds pinned tools from their own modules under tools/ into bin/, skipping
# any whose stamp matches the tool module's files (so a second run does nothing).
# Usage: build-tools.sh [tool ...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${JOINER_TOOLS_BIN:-$PWD/bin}
mkdir -p "$BIN"

# name -> "module-dir package [package...]"
declare -A tools=(
  [controller-gen]="tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen"
  [etcd]="tools/etcd github.com/joiner-dev/joiner/tools/etcd"
  # one invocation for the three so they share compiled packages
  [k8s]="tools/k8s k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler"
  [aemm]="tools/aemm github.com/joiner-dev/joiner/tools/aemm/ec2-metadata-mock"
  [helm]="tools/helm helm.sh/helm/v3/cmd/helm"
  [nfpm]="tools/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm"
  [kubeconform]="tools/kubeconform github.com/yannh/kubeconform/cmd/kubeconform"
  [promtool]="tools/promtool github.com/prometheus/prometheus/cmd/promtool"
)

build() {
  local name=$1 spec=${tools[$1]}
  local dir=${spec%% *} pkgs=${spec#* }
  local stamp="$BIN/.$name.stamp"
  local sum
  # The stamp covers every file of the tool module (go.mod, go.sum, any main.go),
  # so a version bump or an edited wrapper rebuilds, and nothing else does.
  sum=$(cd "$dir" && { git ls-files -co --exclude-standard 2>/dev/null || find . -type f; } \
        | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    local ok=1
    for p in $pkgs; do [ -x "$BIN/$(basename "$p")" ] || ok=0; done
    [ $ok = 1 ] && return 0
  fi
  echo "build-tools: building $name ($dir)"
  local start=$SECONDS
  (cd "$dir" && GOFLAGS=-mod=mod go build -o "$BIN/" $pkgs)
  echo "$sum" > "$stamp"
  echo "build-tools: $name built in $((SECONDS - start))s"
}

if [ $# -eq 0 ]; then set -- "${!tools[@]}"; fi
for t in "$@"; do
  [ -n "${tools[$t]:-}" ] || { echo "build-tools: unknown tool $t" >&2; exit 2; }
  build "$t"
done
