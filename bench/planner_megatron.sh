#!/usr/bin/env bash
# Benchmark on paper: the layout planner with a DGX A100 machine file (bench/machines/) against
# the per-GPU throughput Megatron-LM published for its weak-scaling runs (bench/megatron_table1.tsv,
# 1.7 B to 1 T parameters on 32 to 3072 GPUs). Per row: the planner prices the published layout
# (dp = GPUs / (tp pp), the best micro-batch size up to MAX_B and schedule for it) with activation
# recomputation as the paper ran, and searches every layout for its own pick, in bf16 (the machine
# file's bf16 GEMM curve: Megatron ran fp16 mixed precision on the same tensor cores). Throughput is
# counted as the paper counts it: 96 B s l h^2 (1 + s / 6h + V / 16lh) FLOPs per step (recomputation
# included) over the predicted step time and the GPUs.
#   bash bench/planner_megatron.sh [MACHINE_FILE]   (default bench/machines/dgx-a100.json)
# Environment: MAX_B (largest micro-batch size tried, 2). Needs build/ (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
machine=${1:-bench/machines/dgx-a100.json}
max_b=${MAX_B:-2}
gridlm=build/bin/gridlm
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
peak=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['peak_flops'])" "$machine")

echo "planner_megatron: commit $(git rev-parse --short HEAD), machine $machine, micro-batches up to $max_b"
echo "| parameters | GPUs | published layout (dp x pp x tp) | published TFLOP/s per GPU | predicted for it | predicted / published | planner's pick | its schedule, micro-batch x count, ZeRO | predicted TFLOP/s per GPU |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
grep -v '^#' bench/megatron_table1.tsv | while IFS=$'\t' read -r params heads hidden layers tp pp gpus batch published; do
  dp=$((gpus / (tp * pp)))
  printf '[model]\nvocab_size = 51200\nseq_len = 2048\nn_layer = %s\nn_head = %s\nd_model = %s\n[train]\nmicro_batch = 1\ngrad_accum = 1\nprecision = "bf16"\n' \
    "$layers" "$heads" "$hidden" >"$out/m.toml"
  common=(plan --auto --ranks "$gpus" --config "$out/m.toml" --machine "$machine"
    --global-batch "$batch" --recompute --max-micro-batch "$max_b")
  "$gridlm" "${common[@]}" --layout "${dp}x${pp}x${tp}" --json "$out/theirs.json" >/dev/null
  "$gridlm" "${common[@]}" --json "$out/ours.json" >/dev/null
  /usr/bin/python3 - "$out" "$batch" "$layers" "$hidden" "$gpus" "$published" "$peak" "${dp}x${pp}x${tp}" "$params" <<'PY'
import json, sys
d, B, l, h, n, pub, peak, lay, params = sys.argv[1], *map(float, sys.argv[2:8]), sys.argv[8], sys.argv[9]
s, V = 2048.0, 51200.0
flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
def tf(c): return flops / c['step_s'] / n / 1e12
theirs = json.load(open(f"{d}/theirs.json"))['ranked']
ours = json.load(open(f"{d}/ours.json"))['ranked']
t = tf(theirs[0]) if theirs else float('nan')
o = ours[0]
sched = o['schedule'] + (f" x{o['chunks']}" if o['chunks'] > 1 else '')
print(f"| {params} B | {int(n)} | {lay.replace('x', ' x ')} | {pub:.0f} ({100 * pub * 1e12 / peak:.0f}%) | "
      f"{t:.0f} ({100 * t * 1e12 / peak:.0f}%) | {t / pub:.2f} | {o['dp']} x {o['pp']} x {o['tp']} | "
      f"{sched}, {o['micro_batch']} x {o['micro_batches']}, {o['zero']} | {tf(o):.0f} |")
PY
done
