#!/usr/bin/env bash
# Benchmark: data-parallel scaling in one run, against one rank and against PyTorch's
# DistributedDataParallel (gloo, 2 processes). For each model the same global batch of B
# sequences per step runs as: gridlm on 1 rank; dp 2 (B/2 per replica, gradients reduced in
# parallel.grad_bucket_mb buckets during the backward); dp 2 with ZeRO-1; tp 2; pp 2 (1f1b, 2
# micro-batches of B/2); PyTorch on 1 process and DDP on 2. One BLAS/OpenMP thread per rank, alternated RUNS
# times; medians of tokens/s, the ratios to one rank, and for dp 2 the gradient reduction's
# exposed time (the step waiting for it after the backward) as a share of the step; for ZeRO-1
# the same (reduce-scatter and the parameter all-gather the forward waited for), and the share of
# the all-gather's time in flight that the forward did not wait for ("gather hidden").
#   bash bench/dp_scaling.sh [RUNS] [MODELS...]   (default: 3 runs; tiny small 124m, where 124m
#                                                  runs once: one of its steps takes ~15 s here)
# Needs build/ (scripts/build.sh) and /usr/bin/python3 with torch (scripts/install-deps.sh).
source "$(dirname "$0")/common.sh"
runs=${1:-3}
shift || true
models=("$@")
((${#models[@]})) || models=(tiny small 124m)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
tokens() { sed -n 's/.*, \([0-9.]*\) tokens\/s (median).*/\1/p'; }
# Median over the steps after the first of a metrics field.
field() { tail -n +2 "$out/m.jsonl" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | median; }

echo "dp_scaling: commit $(git rev-parse --short HEAD), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $(nproc --all) cores"
printf '| model | B | 1 rank tok/s | dp 2 | dp 2 ZeRO-1 | tp 2 | pp 2 | torch 1 | torch DDP 2 | dp 2 / 1 | ZeRO-1 / dp 2 | tp 2 / 1 | pp 2 / 1 | DDP 2 / torch 1 | gridlm dp 2 / DDP 2 | dp 2 exposed comm | ZeRO-1 exposed comm | gather hidden |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for model in "${models[@]}"; do
  case $model in
    tiny) args=(--config configs/tiny.toml) B=8 steps=12 tsteps=8 n=$runs ;;
    small) args=(--config configs/small.toml) B=4 steps=6 tsteps=4 n=$runs ;;
    124m) args=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12
            --set model.vocab_size=50257 --set model.seq_len=256) B=4 steps=3 tsteps=2 n=1 ;;
    *) echo "unknown model $model (tiny, small or 124m)" >&2; exit 2 ;;
  esac
  common=("${args[@]}" --set train.steps=$steps --set train.log_every=1000 --set output.weights=
    --set output.dir="$out" --set output.metrics=m.jsonl)
  one=() dp=() zero=() tp=() pp=() t1=() t2=() exposed=() zexposed=() hidden=()
  for ((r = 0; r < n; r++)); do
    one+=("$("$gridlm" train "${common[@]}" --set train.micro_batch=$B | tokens)")
    dp+=("$(mpiexec -n 2 "$gridlm" train "${common[@]}" --set train.micro_batch=$((B / 2)) \
      --set parallel.dp=2 | tokens)")
    exposed+=("$(awk -v e="$(field dp_exposed_ms)" -v s="$(field ms_per_step)" 'BEGIN {print 100 * e / s}')")
    zero+=("$(mpiexec -n 2 "$gridlm" train "${common[@]}" --set train.micro_batch=$((B / 2)) \
      --set parallel.dp=2 --set parallel.zero=1 | tokens)")
    zexposed+=("$(awk -v e="$(field dp_exposed_ms)" -v s="$(field ms_per_step)" 'BEGIN {print 100 * e / s}')")
    hidden+=("$(awk -v e="$(field dp_gather_exposed_ms)" -v g="$(field dp_gather_ms)" \
      'BEGIN {print (g > 0 ? 100 * (1 - e / g) : 0)}')")
    tp+=("$(mpiexec -n 2 "$gridlm" train "${common[@]}" --set train.micro_batch=$B \
      --set parallel.dp=1 --set parallel.tp=2 | tokens)")
    pp+=("$(mpiexec -n 2 "$gridlm" train "${common[@]}" --set train.micro_batch=$((B / 2)) \
      --set train.grad_accum=2 --set parallel.dp=1 --set parallel.pp=2 | tokens)")
    t1+=("$(/usr/bin/python3 bench/torch_gpt.py --config "$model" --steps $tsteps --warmup 1 |
      sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')")
    t2+=("$(/usr/bin/python3 bench/torch_gpt.py --config "$model" --steps $tsteps --warmup 1 \
      --world 2 | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')")
  done
  m1=$(printf '%s\n' "${one[@]}" | median) md=$(printf '%s\n' "${dp[@]}" | median)
  mz=$(printf '%s\n' "${zero[@]}" | median)
  mt=$(printf '%s\n' "${tp[@]}" | median) mp=$(printf '%s\n' "${pp[@]}" | median)
  q1=$(printf '%s\n' "${t1[@]}" | median) q2=$(printf '%s\n' "${t2[@]}" | median)
  me=$(printf '%s\n' "${exposed[@]}" | median)
  mze=$(printf '%s\n' "${zexposed[@]}" | median) mh=$(printf '%s\n' "${hidden[@]}" | median)
  awk -v m="$model" -v B="$B" -v a="$m1" -v d="$md" -v z="$mz" -v t="$mt" -v p="$mp" -v q="$q1" -v w="$q2" \
    -v e="$me" -v ze="$mze" -v h="$mh" 'BEGIN {
    printf "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f%% | %.1f%% | %.0f%% |\n",
      m, B, a, d, z, t, p, q, w, d / a, z / d, t / a, p / a, w / q, d / w, e, ze, h }'
  echo "  runs: 1 rank ${one[*]}; dp 2 ${dp[*]}; ZeRO-1 ${zero[*]}; tp 2 ${tp[*]}; pp 2 ${pp[*]}; torch ${t1[*]}; DDP ${t2[*]}"
done
