#!/usr/bin/env bash
# Karpenter v1.14's scheduler and Joiner's on the same pods, in one run
# (make bench-karpenter; figures in BENCHMARKS.md):
#  1. Karpenter's own BenchmarkScheduling<N>, compiled unmodified from the
#     module proxy (tools/karpenter-bench pins sigs.k8s.io/karpenter v1.14.0);
#  2. Karpenter's scheduler, set up as that benchmark does, on the pods
#     test/cmd/joiner-workload writes (the same generator, seed 42): CPU
#     time, price and layout (tools/karpenter-bench/compare_test.go);
#  3. Joiner's BenchmarkScheduling/<N> on those pods.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
SIZES=${SIZES:-"1000 5000 20000"}
OUT=${OUT:-$(mktemp -d /tmp/bench-karpenter.XXXXXX)}
mkdir -p "$OUT"
echo "== $(date -u +%FT%TZ), load average: $(cut -d' ' -f1-3 /proc/loadavg), output in $OUT"

files=()
for n in $SIZES; do
  $GO run ./test/cmd/joiner-workload --pods "$n" > "$OUT/pods-$n.json"
  files+=("$OUT/pods-$n.json")
done

echo "== Karpenter v1.14 BenchmarkScheduling (unmodified, -tags test_performance)"
(cd tools/karpenter-bench && $GO test -c -tags test_performance -o "$OUT/karpenter-scheduling.test" \
  sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling)
for n in $SIZES; do
  "$OUT/karpenter-scheduling.test" -test.run '^$' -test.bench "^BenchmarkScheduling$n\$" -test.benchmem -test.benchtime 1x \
    | grep -E '^Benchmark' || true
done

echo "== Karpenter v1.14 scheduler on Joiner's benchmark pods (CPU, price, layout)"
(cd tools/karpenter-bench && KARPENTER_BENCH_PODS=$(IFS=,; echo "${files[*]}") \
  $GO test -tags test_performance -count 1 -run TestKarpenterPlans -v . | grep -E '^\{' )

echo "== Joiner BenchmarkScheduling"
pattern=$(echo "$SIZES" | tr ' ' '|')
$GO test -run '^$' -bench "^BenchmarkScheduling/($pattern)\$" -benchtime 1x -benchmem ./coordinator/scheduler/ | grep -E '^Benchmark'
echo "== done, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
