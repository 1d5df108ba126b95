#!/usr/bin/env bash
# Benchmark: training throughput of gridlm against PyTorch (CPU) on the same model, the same
# number of threads and the machine's BLAS setting, in one run; plus single-core SGEMM as the
# ceiling for MFU. Alternates the two programs RUNS times per config and reports medians.
#   bash bench/train_vs_torch.sh [RUNS] [CONFIGS...]      (default: 3 runs, tiny small 124m;
#   124m is the GPT-2 124M shape at context 256, batch 4, and runs once: a step takes ~10 s)
# Needs build/ (scripts/build.sh) and /usr/bin/python3 with torch (scripts/install-deps.sh).
source "$(dirname "$0")/common.sh"
runs=${1:-3}
shift || true
configs=("$@")
((${#configs[@]})) || configs=(tiny small 124m)
cores=$(nproc) # before OMP_NUM_THREADS=1, which nproc obeys
# One thread each; PyTorch's OpenMP threads spin unless told to wait passively.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE


sgemm=$(build/bin/bench_sgemm_peak 1024 9 | sed -n 's/.*sgemm_gflops=\([0-9.]*\).*/\1/p')
echo "single-core SGEMM (1024^3, through layers::matmul): $sgemm GFLOP/s"
echo "train_vs_torch: commit $(git rev-parse --short HEAD), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $cores cores, $runs runs each"
# The ratio cannot pass SGEMM / (PyTorch's model GFLOP/s): both call the same OpenBLAS here.
printf '%-6s %12s %12s %7s %14s %10s %10s %10s\n' config gridlm_tok/s torch_tok/s ratio \
  model_GFLOP/s MFU torch_MFU max_ratio
for cfg in "${configs[@]}"; do
  case $cfg in
    tiny) steps=12 tsteps=8 n=$runs args=(--config configs/tiny.toml) ;;
    small) steps=6 tsteps=4 n=$runs args=(--config configs/small.toml) ;;
    124m) steps=3 tsteps=2 n=1 args=(--set model.n_layer=12 --set model.d_model=768
            --set model.n_head=12 --set model.vocab_size=50257 --set model.seq_len=256
            --set train.micro_batch=4) ;;
    *) echo "unknown config $cfg (tiny, small or 124m)" >&2; exit 2 ;;
  esac
  g=() t=()
  for ((r = 0; r < n; r++)); do
    g+=("$("$gridlm" train "${args[@]}" --set train.steps=$steps \
      --set output.dir="$out" --set output.weights= --set output.metrics= |
      sed -n 's/.*, \([0-9.]*\) tokens\/s (median).*/\1/p')")
    t+=("$(/usr/bin/python3 bench/torch_gpt.py --config "$cfg" --steps $tsteps --warmup 1 \
      --threads 1 | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')")
  done
  gm=$(printf '%s\n' "${g[@]}" | median)
  tm=$(printf '%s\n' "${t[@]}" | median)
  # Model FLOPs per token, as layers::flops_per_token counts them.
  flops=$(awk -v c="$cfg" 'BEGIN {
    if (c == "tiny") { L=4; C=128; V=512; T=128 } else if (c == "small") { L=6; C=384; V=8192; T=256 }
    else { L=12; C=768; V=50257; T=256 }
    print 6 * (L * 12 * C * C + V * C) + 3 * 4 * L * T * C }')
  awk -v c="$cfg" -v g="$gm" -v t="$tm" -v f="$flops" -v s="$sgemm" 'BEGIN {
    printf "%-6s %12.0f %12.0f %7.2f %14.1f %9.1f%% %9.1f%% %10.2f\n", c, g, t, g / t, g * f / 1e9,
      100 * g * f / 1e9 / s, 100 * t * f / 1e9 / s, s / (t * f / 1e9) }'
  echo "  gridlm runs: ${g[*]}; torch runs: ${t[*]}"
done
