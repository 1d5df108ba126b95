#!/usr/bin/env bash
# Trains the same model 20 steps on one rank and with tensor parallelism over N ranks (a padded
# vocabulary of 61), then compares the written weight files tensor by tensor at their global
# shapes (tolerance 2e-3 of each tensor's largest value: 20 AdamW steps amplify the different
# order of floating-point sums). Usage: tp_weights.sh GRIDLM MPIEXEC WORKDIR N
set -euo pipefail
gridlm=$1 mpiexec=$2 work=$3 n=$4
here=$(cd "$(dirname "$0")" && pwd)
cfg="$here/../cli/configs/tiny_fast.toml"
common=(--config "$cfg" --set model.vocab_size=61 --set model.n_head=4 --set output.weights=w.h5)
"$gridlm" train "${common[@]}" --set output.dir="$work/tp1" >/dev/null
"$mpiexec" -n "$n" "$gridlm" train "${common[@]}" --set parallel.tp="$n" \
  --set output.dir="$work/tp$n" >/dev/null
exec /usr/bin/python3 "$here/compare_weights.py" "$work/tp1/w.h5" "$work/tp$n/w.h5" 2e-3
