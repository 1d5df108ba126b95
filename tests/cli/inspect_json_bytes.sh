#!/usr/bin/env bash
# checkpoint inspect --json of a file whose name (or attributes) holds bytes that are not UTF-8:
# JSON out, such bytes replaced, not a fatal error and MPI_Abort. Usage: inspect_json_bytes.sh
# GRIDLM WORKDIR
set -u
G=$1 W=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W" || exit 1
"$G" train --config "$here/configs/tiny_fast.toml" --set train.steps=1 --set output.dir="$W" \
  --set output.weights=model.h5 >/dev/null || exit 1
odd=$W/$'lat\xe9.h5'
cp "$W/model.h5" "$odd" || exit 1
"$G" checkpoint inspect --json "$odd" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print("tensors", len(j["tensors"]), "path ends", j["path"][-6:])'
