#!/usr/bin/env bash
# On a node with more ranks than cores, `gridlm profile` times each op beside a computing
# core-mate, and the planner takes the rank's share of the core out again: no op may then come
# out much faster than on a core of its own. A rank that started its clock when its core came
# back (not when the host's last rank reached the barrier) timed ops shorter than the
# scheduler's slice at a whole core's speed: the head of configs/tiny.toml at 4 ranks on 2
# cores cost half of what it does alone, and pipelines ran 10-15% slower than planned.
# Usage: profile_sharing.sh MPIEXEC GRIDLM CONFIG RANKS (ops of milliseconds: configs/tiny.toml)
set -euo pipefail
mpiexec=$1 gridlm=$2 config=$3 ranks=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
b=$(sed -n 's/^micro_batch *= *\([0-9]*\).*/\1/p' "$config")
"$mpiexec" -n "$ranks" "$gridlm" profile --config "$config" --tp 1 --micro-batches "$b" \
  -o "$out/shared.json" >/dev/null
"$mpiexec" -n 1 "$gridlm" profile --config "$config" --tp 1 --micro-batches "$b" \
  -o "$out/alone.json" >/dev/null
/usr/bin/python3 - "$out/shared.json" "$out/alone.json" <<'PY'
import json, sys
shared, alone = (json.load(open(f)) for f in sys.argv[1:3])
if shared['core_share'] >= 1:
    sys.exit(f"FAIL: {shared['ranks']} ranks had a core each; run this on more ranks than cores")
def ops(p):
    e = p['ops'][0]
    return {f"{part} {k[:-2]}": v for part in ('block', 'head') for k, v in e[part].items()}
a = ops(alone)
s = {k: v * shared['core_share'] for k, v in ops(shared).items()}  # the share taken out
for k in a:
    print(f"{k}: {s[k] * 1e3:.2f} ms shared (share taken out), {a[k] * 1e3:.2f} ms alone: "
          f"{s[k] / a[k]:.2f}")
worst = min(a, key=lambda k: s[k] / a[k])
r = s[worst] / a[worst]
print(("FAIL: " if r < 0.75 else "") + f"lowest ratio {r:.2f} ({worst}); at least 0.75 wanted")
PY
