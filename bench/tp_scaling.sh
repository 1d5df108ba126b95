#!/usr/bin/env bash
# Benchmark: tensor-parallel scaling of the small GPT (configs/small.toml) in one run: tp = 2 on
# 2 ranks against tp = 1 on 1 rank, one BLAS thread per rank, alternated RUNS times; reports
# median tokens/s, their ratio, and the time per step spent in the tensor-parallel all-reduces
# (measured by gridlm around each all-reduce, reported apart from compute).
#   bash bench/tp_scaling.sh [RUNS]        (default 3)
source "$(dirname "$0")/common.sh"
runs=${1:-3}
export OPENBLAS_NUM_THREADS=1
common=(--config configs/small.toml --set train.steps=6 --set output.weights=
        --set output.dir="$out" --set output.metrics=m.jsonl)
one=() two=() comm=()
for ((r = 0; r < runs; r++)); do
  one+=("$("$gridlm" train "${common[@]}" | sed -n 's/.*, \([0-9.]*\) tokens\/s (median).*/\1/p')")
  two+=("$(mpiexec -n 2 "$gridlm" train "${common[@]}" --set parallel.tp=2 |
    sed -n 's/.*, \([0-9.]*\) tokens\/s (median).*/\1/p')")
  # Median over the steps after the first of the all-reduce time per step.
  comm+=("$(tail -n +2 "$out/m.jsonl" | sed -n 's/.*"comm_wait_ms":\([0-9.e+-]*\).*/\1/p' | median)")
done
g1=$(printf '%s\n' "${one[@]}" | median)
g2=$(printf '%s\n' "${two[@]}" | median)
c2=$(printf '%s\n' "${comm[@]}" | median)
echo "small GPT, $runs runs each (tokens/s): tp=1 x 1 rank: ${one[*]}; tp=2 x 2 ranks: ${two[*]}"
awk -v a="$g1" -v b="$g2" -v c="$c2" 'BEGIN {
  ms = 1024 / b * 1000
  printf "tp=1: %.0f tok/s | tp=2: %.0f tok/s | speed-up %.2fx | tp=2 step %.0f ms, of which all-reduce %.1f ms (%.1f%%)\n", a, b, b / a, ms, c, 100 * c / ms }'
