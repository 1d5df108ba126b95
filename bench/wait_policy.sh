#!/usr/bin/env bash
# Benchmark: how ranks wait (parallel.wait) when a node runs more ranks than it has cores.
# Trains the tiny GPT (configs/tiny.toml, 4 micro-batches per step) under several 4- and 8-rank
# layouts with waiting ranks spinning in MPI (spin) and yielding their cores (yield), the two
# alternated RUNS times; reports the median step time of each and spin / yield (above 1: yield
# is faster). Meaningful on a machine with fewer cores than ranks (2 cores here).
#   bash bench/wait_policy.sh [RUNS]        (default 3)
source "$(dirname "$0")/common.sh"
runs=${1:-3}
export OPENBLAS_NUM_THREADS=1
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, $runs runs"
echo "| ranks | layout | spin ms/step | yield ms/step | spin / yield |"
echo "| ---: | --- | ---: | ---: | ---: |"
layouts=("4 2 2 1" "4 2 1 2" "4 1 2 2" "4 1 4 1" "4 1 1 4" "8 2 2 2")
for l in "${layouts[@]}"; do
  read -r n dp pp tp <<<"$l"
  declare -A ms=()
  for ((r = 0; r < runs; r++)); do
    for wait in spin yield; do
      mpiexec -n "$n" "$gridlm" train --config configs/tiny.toml --set train.steps=8 \
        --set train.grad_accum=4 --set parallel.dp="$dp" --set parallel.pp="$pp" \
        --set parallel.tp="$tp" --set parallel.wait="$wait" --set output.weights= \
        --set output.dir="$out" --set output.metrics=m.jsonl >/dev/null
      # Median over the steps after the first two of this run.
      ms[$wait]+="$(tail -n +3 "$out/m.jsonl" | sed -n 's/.*"ms_per_step":\([0-9.e+-]*\).*/\1/p' |
        median) "
    done
  done
  s=$(printf '%s\n' ${ms[spin]} | median)
  y=$(printf '%s\n' ${ms[yield]} | median)
  awk -v n="$n" -v l="dp $dp x pp $pp x tp $tp" -v s="$s" -v y="$y" \
    'BEGIN { printf "| %d | %s | %.0f | %.0f | %.2f |\n", n, l, s, y, s / y }'
  echo "  runs: spin ${ms[spin]}; yield ${ms[yield]}" >&2
  unset ms
done
