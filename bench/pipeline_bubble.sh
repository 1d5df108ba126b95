#!/usr/bin/env bash
# Benchmark: pipeline bubbles, measured against the simulator, for every schedule kind.
# Trains an 8-block GPT of width 128 (configs/tiny.toml with n_layer = 8, micro-batches of
# 4 x 128 tokens) with pp = 2 (one core per stage) and pp = 4 (4 ranks on 2 cores:
# oversubscribed, so only indicative), for m = 4 and 16 micro-batches per step, one BLAS thread
# per rank. For each run: the median over steps 2.. of the measured bubble, of the simulator's
# bubble for the op costs measured in the same step, and of tokens/s; each figure is then the
# median over RUNS repetitions, kinds alternating.
#   bash bench/pipeline_bubble.sh [RUNS] [PP...]      (defaults: 3 runs, pp 2 4)
source "$(dirname "$0")/common.sh"
runs=${1:-3}
shift || true
pps=("$@")
[[ ${#pps[@]} -gt 0 ]] || pps=(2 4)
export OPENBLAS_NUM_THREADS=1
field() { tail -n +3 "$out/m.jsonl" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | median; }
kinds=(gpipe 1f1b interleaved-1f1b zb-h1)
declare -A bubble predicted rate
for pp in "${pps[@]}"; do
  for m in 4 16; do
    for ((r = 0; r < runs; r++)); do
      for kind in "${kinds[@]}"; do
        chunks=1
        [[ $kind == interleaved-1f1b ]] && chunks=2
        mpiexec -n "$pp" "$gridlm" train --config configs/tiny.toml --set model.n_layer=8 \
          --set train.micro_batch=4 --set train.grad_accum="$m" --set train.steps=8 \
          --set parallel.pp="$pp" --set parallel.dp=1 --set parallel.schedule="$kind" \
          --set parallel.chunks="$chunks" --set output.weights= --set output.dir="$out" \
          --set output.metrics=m.jsonl --set train.log_every=1000 >/dev/null
        key="$pp/$m/$kind"
        bubble[$key]+="$(field bubble) "
        predicted[$key]+="$(field bubble_predicted) "
        rate[$key]+="$(field tokens_per_s) "
      done
    done
  done
done
echo "| pp | m | schedule | measured bubble | simulated (measured costs) | formula (uniform) | tokens/s |"
echo "|---:|---:|---|---:|---:|---:|---:|"
for pp in "${pps[@]}"; do
  for m in 4 16; do
    for kind in "${kinds[@]}"; do
      key="$pp/$m/$kind"
      b=$(tr ' ' '\n' <<<"${bubble[$key]}" | grep . | median)
      s=$(tr ' ' '\n' <<<"${predicted[$key]}" | grep . | median)
      t=$(tr ' ' '\n' <<<"${rate[$key]}" | grep . | median)
      chunks=1
      [[ $kind == interleaved-1f1b ]] && chunks=2
      u=$("$gridlm" plan --pp "$pp" --micro-batches "$m" --chunks "$chunks" --schedule "$kind" \
        --svg "$out/p.svg" | sed -n 's/.*bubble \([0-9.]*\)%.*/\1/p' | head -1)
      label=$pp
      ((pp > 2)) && label="$pp (oversubscribed)"
      awk -v l="$label" -v m="$m" -v k="$kind" -v b="$b" -v s="$s" -v u="$u" -v t="$t" 'BEGIN {
        printf "| %s | %d | %s | %.1f%% | %.1f%% | %s%% | %.0f |\n", l, m, k, 100 * b, 100 * s, u, t }'
    done
  done
done
