#!/usr/bin/env bash
# The configuration a weights file stores (its `config` attribute, which checkpoint inspect
# prints) is TOML that parses back, also for a string holding a quote and a backslash (they were
# written unescaped). Usage: config_round_trip.sh GRIDLM WORKDIR
set -u
G=$1 W=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W" || exit 1
name='m\q"x.jsonl'
"$G" train --config "$here/configs/tiny_fast.toml" --set train.steps=1 --set output.dir="$W" \
  --set output.weights=model.h5 --set "output.metrics=$name" >/dev/null || exit 1
"$G" checkpoint inspect --json "$W/model.h5" | /usr/bin/python3 -c '
import json, sys, tomllib
stored = tomllib.loads(json.load(sys.stdin)["config"])
print("metrics", stored["output"]["metrics"], "==", sys.argv[1], stored["output"]["metrics"] == sys.argv[1])
' "$name"
