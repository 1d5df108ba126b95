#!/usr/bin/env bash
# Benchmark: how far apart profiles taken one after another on this host are, and what that does
# to the planner's predictions. For each set of `gridlm profile` options given, K profiles in a
# row of MODEL at N ranks (tp 1, 2, 4 where they divide N and the heads; micro-batches of the
# model's train.micro_batch), and from each the block's F + B and the head's F + B per tp, and
# the predicted step of the plain (1f1b, no ZeRO, one chunk) layouts at global batches
# b x 2 and b x 8. A host whose speed drifts shows as a spread that more repetitions per profile
# do not narrow.
#   bash bench/profile_spread.sh [PROFILE_OPTIONS]...   (default: "" "--repeats 20")
# Environment: MODEL (tiny), N (4), K (4). One BLAS thread per rank. Needs build/.
source "$(dirname "$0")/common.sh"
model=${MODEL:-tiny} n=${N:-4} k=${K:-4}
(($#)) || set -- "" "--repeats 20"
config=configs/$model.toml
b=$(sed -n 's/^micro_batch *= *\([0-9]*\).*/\1/p' "$config")
heads=$(sed -n 's/^n_head *= *\([0-9]*\).*/\1/p' "$config")
tp=1
for t in 2 4; do ((n % t == 0 && heads % t == 0)) && tp+=",$t"; done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
echo "profile_spread: commit $(git rev-parse --short HEAD), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $model at $n ranks, $k profiles per option set"
for options in "$@"; do
  echo "== gridlm profile ${options:-(defaults)}"
  for ((i = 0; i < k; i++)); do
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086 # the options are words
    mpiexec -n "$n" "$gridlm" profile --config "$config" --tp "$tp" --micro-batches "$b" \
      $options -o "$out/p.json" >/dev/null </dev/null
    seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    /usr/bin/python3 - "$out/p.json" "$seconds" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
cells = []
for e in p['ops']:
    blk, head = e['block'], e['head']
    cells.append(f"tp {e['tp']}: block F+B {1e3 * (blk['forward_s'] + blk['backward_s']):6.2f}, "
                 f"head F+B {1e3 * (head['forward_s'] + head['backward_s']):5.2f} ms")
print(f"{sys.argv[2]:>5} s | " + " | ".join(cells))
PY
    for m in 2 8; do
      "$gridlm" plan --auto --ranks "$n" --config "$config" --profile "$out/p.json" \
        --global-batch $((b * m)) --json "$out/plan.json" >/dev/null
      /usr/bin/python3 - "$out/plan.json" "$b" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
b = int(sys.argv[2])
rows = sorted(f"dp {c['dp']} x pp {c['pp']} x tp {c['tp']} m {c['micro_batches']}: "
              f"{c['step_s'] * 1e3:.1f}"
              for c in plan['ranked']
              if c['schedule'] == '1f1b' and not c['zero'] and c['chunks'] == 1
              and c['micro_batch'] == b)
print(f"        global batch {plan['global_batch']}: " + "; ".join(rows))
PY
    done
  done
done
