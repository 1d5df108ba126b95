#!/usr/bin/env bash
# Where a GPU step's time goes, kernel by kernel: Nsight Compute (ncu, on the device machines)
# times every kernel of a few bf16 steps of the GPT-2 124M shape with 2 blocks instead of 12
# (the same kernels, fewer launches), and the kernels are summed by the gridlm function that
# launched them (or the library's name for cuBLAS and NCCL). Prints the table, largest first.
# Run after bench/gpu_check.sh has unpacked the bundle (GPU_CHECK_ROOT, /tmp/gridlm-gpu).
# Usage: bench/gpu_kernels.sh OUT_DIR [STEPS=2]
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: bench/gpu_kernels.sh OUT_DIR [STEPS=2]" >&2; exit 2; }
out=$1 steps=${2:-2}
root=${GPU_CHECK_ROOT:-/tmp/gridlm-gpu}
source "$(dirname "$0")/gpu_env.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null |
  head -n 1)
[[ -n $ncu ]] || { echo "gpu_kernels: no ncu here"; exit 1; }
mkdir -p "$out"
"$ncu" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  "$root/bin/gridlm" train --config "$root/configs/tiny.toml" --set model.vocab_size=50257 \
  --set model.seq_len=256 --set model.n_layer=2 --set model.n_head=12 --set model.d_model=768 \
  --set train.micro_batch=16 --set train.steps="$steps" --set train.precision=bf16 \
  --set output.weights= --set output.dir="$out/run" >"$out/ncu.txt" 2>&1 ||
  { tail -n 20 "$out/ncu.txt"; exit 1; }
# Python without the bundle's libraries (its own OpenSSL and C++ runtime must win).
env -u LD_LIBRARY_PATH python3 - "$out/ncu.txt" "$steps" <<'PY'
import re, sys
text, steps = open(sys.argv[1]).read(), int(sys.argv[2])
scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
kinds = {}
for block in re.split(r"\n  (?=\S)", text):
    calls = re.search(r"Invocations (\d+)", block)
    t = re.search(r"gpu__time_duration.sum\s+(\w+)\s+[\d.,]+\s+[\d.,]+\s+([\d.,]+)", block)
    if not (calls and t):
        continue
    name = block.split("\n")[0]
    # The function whose lambda the kernel is (Kokkos names kernels by their functor).
    who = re.search(r"((?:\w+::)?\w+)(?:<[^()]*?>)?\([^()]*\)::\[lambda", name)
    key = who.group(1).replace("gridlm::", "") if who else re.split(r"[<(]", name)[0][:60]
    if any(k in name for k in ("gemm", "cutlass", "xmma", "nvjet")):
        key = "cuBLAS GEMM" + (" (tf32)" if "tf32" in name else " (bf16)" if "bf16" in name else "")
    us = float(t.group(2).replace(",", "")) * scale[t.group(1)] * int(calls.group(1))
    n = kinds.setdefault(key, [0.0, 0])
    n[0] += us
    n[1] += int(calls.group(1))
if not kinds:
    sys.exit("gpu_kernels: no kernel times in the ncu output")
total = sum(v[0] for v in kinds.values())
print(f"gpu_kernels: {total / steps / 1e3:.2f} ms of kernels a step ({steps} steps, 2 blocks;"
      " start-up kernels included)")
for key, (us, calls) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
    print(f"{us / steps / 1e3:8.3f} ms a step {100 * us / total:5.1f}% {calls / steps:6.0f} launches  {key}")
PY
