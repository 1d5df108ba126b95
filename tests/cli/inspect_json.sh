#!/usr/bin/env bash
# checkpoint inspect --json of a weights file that one training step writes, read back by Python:
#   config  the stored configuration (its `config` attribute) parses back as TOML, also for a
#           string holding a quote and a backslash (they were written unescaped);
#   bytes   a file name that is not UTF-8: JSON out, such bytes replaced, not a fatal error and
#           MPI_Abort.
# Usage: inspect_json.sh MODE GRIDLM WORKDIR
set -u
mode=$1 G=$2 W=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W" || exit 1
name='m\q"x.jsonl'
"$G" train --config "$here/configs/tiny_fast.toml" --set train.steps=1 --set output.dir="$W" \
  --set output.weights=model.h5 --set "output.metrics=$name" >/dev/null || exit 1
case $mode in
  config)
    "$G" checkpoint inspect --json "$W/model.h5" | /usr/bin/python3 -c '
import json, sys, tomllib
stored = tomllib.loads(json.load(sys.stdin)["config"])
print("metrics", stored["output"]["metrics"], "==", sys.argv[1], stored["output"]["metrics"] == sys.argv[1])
' "$name"
    ;;
  bytes)
    odd=$W/$'lat\xe9.h5'
    cp "$W/model.h5" "$odd" || exit 1
    "$G" checkpoint inspect --json "$odd" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print("tensors", len(j["tensors"]), "path ends", j["path"][-6:])'
    ;;
  *) echo "inspect_json.sh: unknown mode $mode" >&2; exit 2 ;;
esac
