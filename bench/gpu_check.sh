#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and CUDA 13 but none of gridlm's other
# libraries (the `device` machines): unpacks the tarball of bench/gpu_bundle.sh and runs, each
# step bounded in time and logged under OUT_DIR,
#   1. the device and the build (nvidia-smi, gridlm --version);
#   2. the tiny model's first 20 fp32 steps on the GPU against the CPU build's (carried in the
#      bundle): every loss within 1e-3 of the CPU's (cuBLAS and the CPU BLAS sum in other orders);
#   3. the same 20 steps in bf16 against the GPU's fp32: within 5e-3 (the tiny model's 200 steps
#      stay within 2e-4 on the CPU; 20 steps of an untrained model differ less);
#   4. the NCCL backend's test at one rank (test_nccl_comm), and the unit tests whose kernels
#      work on device memory (layers' gradient checks, GEMMs, attention, bf16, stages), each on
#      the GPU against its own CPU-independent expectations;
#   5. the GEMM rate through layers::matmul (8192^3, fp32 and bf16): the ceiling of the MFU;
#   6. a GPT-2 124M-shaped model (12 layers, width 768, vocabulary 50257, context 256) for 12 steps
#      in bf16 and fp32 with micro-batches of 16 sequences, and in bf16 with 64: tokens/s and MFU
#      against the GPU's bf16 peak (H100/H200 SXM: 989 TFLOP/s dense; GPU_PEAK_TFLOPS to change
#      it);
#   7. `gridlm profile` of that shape in bf16 (OUT_DIR/profile-124m-bf16.json, for the planner),
#      and `gridlm plan --auto` for one 8-GPU node priced by it.
# Prints one summary line per step and exits non-zero if any failed.
# GPU_CHECK_124M_STEPS (12), GPU_CHECK_124M_LARGE_MB (64), GPU_CHECK_GEMM_N (8192) and
# GPU_CHECK_PROFILE_MB (1,2,4,8,16) shorten steps 5-7;
# GPU_CHECK_MAX_STEP_SECONDS caps every step's time limit (a hung step then costs a short device
# lease less).
# Usage: bench/gpu_check.sh BUNDLE.tar.xz [OUT_DIR]
set -uo pipefail
bundle=$1 out=${2:-gpu-check}
root=${GPU_CHECK_ROOT:-/tmp/gridlm-gpu}
peak=${GPU_PEAK_TFLOPS:-989}
rm -rf "$root" && mkdir -p "$root" "$out" && tar -C "$root" -xJf "$bundle" || exit 1
source "$(dirname "$0")/gpu_env.sh"
gridlm=$root/bin/gridlm
failed=0
step() { # name, seconds, command...: runs it, logs it, reports it
  local name=$1 seconds=$2 rc
  shift 2
  local cap=${GPU_CHECK_MAX_STEP_SECONDS:-600}
  ((seconds > cap)) && seconds=$cap
  timeout "$seconds" "$@" >"$out/$name.log" 2>&1
  rc=$?
  if [[ $rc == 0 ]]; then echo "gpu_check: $name: ok"; else
    echo "gpu_check: $name: FAILED (exit status $rc; $out/$name.log):"
    tail -n 15 "$out/$name.log"
    failed=1
  fi
  return $rc
}
# Python without the bundle's libraries (its own OpenSSL and C++ runtime must win).
py=(env -u LD_LIBRARY_PATH python3)
compare=("${py[@]}" "$(dirname "$0")/compare_losses.py")
tiny=(train --config "$root/configs/tiny.toml" --set train.steps=20 --set output.weights=)

# A bundle whose model runs on the CPU would pass every check below: the device step refuses it,
# and nothing else runs without a GPU and a CUDA build (the device lease is short).
step device 60 bash -c "nvidia-smi -L || exit 1; v=\$('$gridlm' --version) || exit 1
  echo \"\$v\"; echo bundle commit \$(cat '$root/commit')
  grep -q 'execution space Cuda' <<<\"\$v\" || { echo 'the bundle runs its model on the CPU,' \
    'not on CUDA: build it against a CUDA Kokkos (docs/gpu.md)'; exit 1; }" ||
  { echo "gpu_check: stopped: no GPU, or a bundle that does not use it ($out/device.log)"; exit 1; }
step tiny_fp32 300 "$gridlm" "${tiny[@]}" --set output.dir="$out/tiny_fp32" &&
  step tiny_fp32_vs_cpu 30 "${compare[@]}" "$out/tiny_fp32/metrics.jsonl" \
    "$root/reference/tiny/metrics.jsonl" 1e-3
step tiny_bf16 300 "$gridlm" "${tiny[@]}" --set train.precision=bf16 \
  --set output.dir="$out/tiny_bf16" &&
  step tiny_bf16_vs_fp32 30 "${compare[@]}" "$out/tiny_bf16/metrics.jsonl" \
    "$out/tiny_fp32/metrics.jsonl" 5e-3
if [[ -x $root/bin/test_nccl_comm ]]; then
  step nccl_comm 120 mpiexec -n 1 "$root/bin/test_nccl_comm"
fi
# Blas.*: which library serves sgemm_ on the host, which a GPU build need not have at all.
for t in test_gemm test_gradcheck test_gpt test_bf16 test_attention test_sampler; do
  [[ -x $root/bin/$t ]] && step "$t" 300 mpiexec -n 1 "$root/bin/$t" '--gtest_filter=-Blas.*'
done
if [[ -x $root/bin/bench_sgemm_peak ]]; then
  for precision in fp32 bf16; do
    step "gemm_$precision" 120 "$root/bin/bench_sgemm_peak" "${GPU_CHECK_GEMM_N:-8192}" 9 $precision &&
      sed -n 's/^RESULT /gemm: /p' "$out/gemm_$precision.log"
  done
fi
gpt2_124m=(--config "$root/configs/tiny.toml" --set model.vocab_size=50257 --set model.seq_len=256
  --set model.n_layer=12 --set model.n_head=12 --set model.d_model=768)
# Micro-batches of 16 sequences in both precisions, then 64 in bf16: how much of the step is
# per-step work (optimizer, gradient norm, launches) that more tokens would spread out.
for run in bf16:16 fp32:16 "bf16:${GPU_CHECK_124M_LARGE_MB:-64}"; do
  precision=${run%:*} micro=${run#*:}
  name=gpt2_124m_$precision$([[ $micro == 16 ]] || echo "_mb$micro")
  step "$name" 600 "$gridlm" train "${gpt2_124m[@]}" --set train.micro_batch="$micro" \
    --set train.steps="${GPU_CHECK_124M_STEPS:-12}" --set train.log_every=1 --set train.precision=$precision \
    --set train.peak_gflops="$((peak * 1000))" --set output.weights= \
    --set output.dir="$out/$name" &&
    "${py[@]}" - "$out/$name/metrics.jsonl" "$name" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[2:] or rows  # the first two steps warm up
print(f"{sys.argv[2]}: median of {len(rows)} steps: "
      f"{statistics.median(r['tokens_per_s'] for r in rows):.0f} tokens/s, "
      f"MFU {100 * statistics.median(r['mfu'] for r in rows):.1f}% of the bf16 peak")
PY
done
step profile_124m_bf16 300 "$gridlm" profile "${gpt2_124m[@]}" --set train.precision=bf16 \
  --micro-batches "${GPU_CHECK_PROFILE_MB:-1,2,4,8,16}" -o "$out/profile-124m-bf16.json" &&
  step plan_124m_bf16 60 "$gridlm" plan --auto "${gpt2_124m[@]}" --set train.precision=bf16 \
    --ranks 8 --ranks-per-node 8 --global-batch 128 --profile "$out/profile-124m-bf16.json" &&
  head -n 5 "$out/plan_124m_bf16.log"
exit $failed
