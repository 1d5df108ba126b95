#!/usr/bin/env bash
# Trains the same model (4 layers, a padded vocabulary of 61, 4 micro-batches a step) for 20
# steps on one rank and on N ranks in another layout, then compares the written weight files
# tensor by tensor at their global shapes (tolerance 2e-3 of each tensor's largest value: 20
# AdamW steps amplify the different order of floating-point sums).
# Usage: layout_weights.sh GRIDLM MPIEXEC WORKDIR N NAME [--set parallel.x=y ...]
set -euo pipefail
gridlm=$1 mpiexec=$2 work=$3 n=$4 name=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
cfg="$here/../cli/configs/tiny_fast.toml"
common=(--config "$cfg" --set model.vocab_size=61 --set model.n_head=4 --set model.n_layer=4
        --set train.grad_accum=4 --set train.micro_batch=1 --set output.weights=w.h5)
"$gridlm" train "${common[@]}" --set output.dir="$work/one" >/dev/null
"$mpiexec" -n "$n" "$gridlm" train "${common[@]}" "$@" --set output.dir="$work/$name" >/dev/null
exec /usr/bin/python3 "$here/compare_weights.py" "$work/one/w.h5" "$work/$name/w.h5" 2e-3
