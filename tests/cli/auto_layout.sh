#!/usr/bin/env bash
# parallel.profile: `auto` layout axes chosen by the layout planner at the start of gridlm train.
# At 2 ranks, from a measured profile edited so that tensor parallelism is far faster (the
# planner must choose tp 2) or far slower (dp 2, also with schedule zb-h1); then measured at
# start-up (measure); and without a profile the fixed rules (tp fills the node, as far as the
# heads divide) with no planner line.
# Usage: auto_layout.sh MPIEXEC GRIDLM CONFIG
set -euo pipefail
mpiexec=$1 gridlm=$2 config=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mpiexec" -n 2 "$gridlm" profile --config "$config" --tp 1,2 --micro-batches 1,2,4 --repeats 1 \
  -o "$out/p.json" >/dev/null
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
for name, factor in (("fast_tp", 0.01), ("slow_tp", 100.0)):
    p = json.load(open(f"{d}/p.json"))
    for e in p["ops"]:
        if e["tp"] == 2:
            for piece in ("block", "embedding", "head"):
                for k in e[piece]:
                    e[piece][k] *= factor
    json.dump(p, open(f"{d}/{name}.json", "w"))
PY
train() {
  "$mpiexec" -n 2 "$gridlm" train --config "$config" --set parallel.dp=auto --set parallel.tp=auto \
    --set train.steps=2 --set output.dir="$out/run" "$@"
}
expect() { # expect REGEX LOG
  grep -Eq "$1" "$2" || { echo "FAIL: no '$1' in:"; cat "$2"; exit 1; }
}
train --set parallel.profile="$out/fast_tp.json" >"$out/a.log"
expect 'layout planner \(parallel.profile = .*fast_tp.json\): dp 1 x pp 1 x tp 2' "$out/a.log"
expect '^gridlm train: 2 ranks = dp 1 x pp 1 x tp 2' "$out/a.log"
train --set parallel.profile="$out/slow_tp.json" >"$out/b.log"
expect 'layout planner .*: dp 2 x pp 1 x tp 1' "$out/b.log"
expect '^gridlm train: 2 ranks = dp 2 x pp 1 x tp 1' "$out/b.log"
# A schedule other than 1f1b: one stage runs it as any other (it found no layout at all).
train --set parallel.profile="$out/slow_tp.json" --set parallel.schedule=zb-h1 >"$out/e.log"
expect 'layout planner .*: dp 2 x pp 1 x tp 1' "$out/e.log"
expect '^done: loss' "$out/e.log"
train --set parallel.profile=measure >"$out/c.log"
expect 'layout planner \(parallel.profile = measure\): dp . x pp 1 x tp .' "$out/c.log"
expect '^done: loss' "$out/c.log"
train >"$out/d.log"
expect '^gridlm train: 2 ranks = dp 1 x pp 1 x tp 2' "$out/d.log" # tp fills the node
if grep -q 'layout planner' "$out/d.log"; then echo "FAIL: planned without parallel.profile"; exit 1; fi
# A model of one head: tp = auto fills the node only as far as the heads divide (it chose 2,
# which the model then refused).
train --set model.n_head=1 --dry-run >"$out/f.log"
expect '^gridlm train: 2 ranks = dp 2 x pp 1 x tp 1' "$out/f.log"
# A fixed axis written "02" is 2 to the planner as to the grid (no layout kept "02").
train --set parallel.profile="$out/fast_tp.json" --set parallel.tp=02 --dry-run >"$out/g.log"
expect 'layout planner .*: dp 1 x pp 1 x tp 2' "$out/g.log"
grep -m1 'layout planner' "$out/a.log"
grep -m1 'layout planner' "$out/b.log"
echo "ok: the planner chose tp 2 and dp 2 as the profiles priced them; measure and the fixed rules train"
