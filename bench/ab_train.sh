#!/usr/bin/env bash
# A/B throughput of two gridlm builds (say, before and after a refactor) in alternating runs on
# the same machine: the peer of a change is the binary without it. Each round runs every layout
# once with each binary; a cell is the median over rounds of a run's median tokens/s (steps
# after the first). Prints one row per layout and the ratio NEW / OLD. NEW_ARGS (environment)
# goes to the new runs only, to compare a setting on one binary: NEW_ARGS="--set
# train.precision=bf16" bench/ab_train.sh build/bin/gridlm build/bin/gridlm.
# Usage: [NEW_ARGS=...] bench/ab_train.sh OLD_GRIDLM NEW_GRIDLM [rounds=5]
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-5}
read -r -a new_args <<<"${NEW_ARGS:-}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
common=(--config configs/tiny.toml --set train.steps=30 --set train.log_every=100
        --set output.weights= --set output.dir="$out")
declare -A layouts=(
  ["1 rank"]="1"
  ["dp 2"]="2 --set parallel.dp=2 --set train.micro_batch=4"
  ["tp 2"]="2 --set parallel.dp=1 --set parallel.tp=2"
  ["pp 2 zb-h1, m 4"]="2 --set parallel.pp=2 --set parallel.schedule=zb-h1 --set train.grad_accum=4"
)
rate() { # binary, ranks, extra args -> the run's median tokens/s after the first step
  local bin=$1 n=$2
  shift 2
  mpiexec -n "$n" "$bin" train "${common[@]}" "$@" >/dev/null
  python3 -c "import json, statistics; r = [json.loads(l)['tokens_per_s'] for l in open('$out/metrics.jsonl')][1:]; print(statistics.median(r))"
}
echo "ab_train: old $old ($("$old" --version | head -n1)), new $new ($("$new" --version | head -n1))${NEW_ARGS:+ with $NEW_ARGS}, $rounds rounds, commit $(git rev-parse --short HEAD)"
printf '| layout | old tok/s | new tok/s | new / old |\n| --- | ---: | ---: | ---: |\n'
for name in "1 rank" "dp 2" "tp 2" "pp 2 zb-h1, m 4"; do
  read -r -a spec <<<"${layouts[$name]}"
  a=() b=()
  for ((i = 0; i < rounds; ++i)); do
    a+=("$(rate "$old" "${spec[@]}")")
    b+=("$(rate "$new" "${spec[@]}" ${new_args[@]+"${new_args[@]}"})")
  done
  python3 -c "
import statistics, sys
a = [float(x) for x in '${a[*]}'.split()]; b = [float(x) for x in '${b[*]}'.split()]
print('| $name | {:.0f} | {:.0f} | {:.3f} |'.format(statistics.median(a), statistics.median(b), statistics.median(b) / statistics.median(a)))"
done
