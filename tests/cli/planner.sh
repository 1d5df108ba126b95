#!/usr/bin/env bash
# The layout planner end to end at RANKS ranks: `gridlm profile` measures the configuration's
# model here, `gridlm plan --auto` ranks every layout, every layout it ranks passes the engine's
# own checks (`gridlm train --dry-run` with its flags, at RANKS ranks), and the best one trains.
# Usage: planner.sh MPIEXEC GRIDLM CONFIG RANKS [CHECKED]: CHECKED (default all) bounds how many
# of the ranked layouts, best first, are dry-run (each dry run at 4 oversubscribed ranks costs
# seconds).
set -euo pipefail
mpiexec=$1 gridlm=$2 config=$3 ranks=$4 checked=${5:-0}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
heads=$(sed -n 's/^n_head *= *\([0-9]*\).*/\1/p' "$config")
tp=1
for t in 2 4; do ((ranks % t == 0 && heads % t == 0)) && tp+=",$t"; done
"$mpiexec" -n "$ranks" "$gridlm" profile --config "$config" --tp "$tp" --micro-batches 1,2,4 \
  --repeats 2 -o "$out/profile.json"
# It records the node's cores (at most the CPUs this shell may use), the share of one each
# rank had while the ops were timed, and how late a message reaches a rank waiting for it: none
# on a node of one rank; on an oversubscribed node (parallel.wait = auto: yield) at least a
# tenth of a 500 us nap, as the waiting rank sleeps.
cpus=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
/usr/bin/python3 - "$out/profile.json" "$ranks" "$cpus" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ranks, cpus = int(sys.argv[2]), int(sys.argv[3])
cores = p['cores_per_node']
share = min(1.0, cores / (ranks * p['threads_per_rank']))
if not 1 <= cores <= cpus or abs(p['core_share'] - share) > 1e-9:
    sys.exit(f"FAIL: the profile records {cores} cores and a share of {p['core_share']}; "
             f"want 1 to {cpus} cores and a share of {share}")
wake = p['wake_s']
low, high = (0, 0) if ranks == 1 else (50e-6 if share < 1 else 1e-9, 0.05)
if not low <= wake <= high:
    sys.exit(f"FAIL: the profile records wake_s = {wake}; want {low} to {high} at {ranks} ranks")
# A CPU build's collectives are MPI's (a GPU build's NCCL's).
if p['comm_backend'] != 'mpi':
    sys.exit(f"FAIL: the profile's links were timed on {p['comm_backend']!r}, not 'mpi'")
PY
"$mpiexec" -n 1 "$gridlm" plan --auto --ranks "$ranks" --config "$config" \
  --profile "$out/profile.json" --json "$out/plan.json" --top 5
mapfile -t flags < <(/usr/bin/python3 -c "
import json, sys
for c in json.load(open(sys.argv[1]))['ranked']: print(c['flags'])" "$out/plan.json")
((${#flags[@]} > 0)) || { echo "FAIL: the planner ranked no layout"; exit 1; }
((checked > 0 && checked < ${#flags[@]})) && flags=("${flags[@]:0:checked}")
for f in "${flags[@]}"; do
  # shellcheck disable=SC2086 # the flags are words
  if ! "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" $f --set output.dir="$out/run" \
    --dry-run >"$out/dry.log" 2>&1; then
    echo "FAIL: the planner ranked a layout the engine refuses: $f"
    cat "$out/dry.log"
    exit 1
  fi
done
echo "all ${#flags[@]} ranked layouts checked pass gridlm train --dry-run"
# shellcheck disable=SC2086
"$mpiexec" -n "$ranks" "$gridlm" train --config "$config" ${flags[0]} --set train.steps=3 \
  --set output.dir="$out/run" | tail -n 1
