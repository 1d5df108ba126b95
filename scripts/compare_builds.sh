#!/usr/bin/env bash
# Do two gridlm builds train identically? Runs the same short training under six layouts (one
# rank, dp 2, tp 2, pp 2 with zb-h1, tp 2 x pp 2 interleaved, dp 2 x pp 2; validation on) with
# each binary and compares, bit for bit, every step's loss, gradient norm, learning rate and
# validation loss (metrics.jsonl) and every dataset of the final weights file (h5py; attributes
# such as a format version may differ). For changes that must not change behaviour: a
# refactor, a new build flag. Exit status 1 when anything differs.
# Usage: scripts/compare_builds.sh OLD_GRIDLM NEW_GRIDLM
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
layouts=(
  "one|1|"
  "dp2|2|--set parallel.dp=2 --set train.grad_accum=2"
  "tp2|2|--set parallel.tp=2 --set parallel.dp=1"
  "pp2-zb-h1|2|--set parallel.pp=2 --set parallel.schedule=zb-h1 --set train.grad_accum=4"
  "tp2xpp2-interleaved|4|--set parallel.pp=2 --set parallel.tp=2 --set parallel.schedule=interleaved-1f1b --set parallel.chunks=2 --set train.grad_accum=4"
  "dp2xpp2|4|--set parallel.pp=2 --set parallel.dp=2 --set train.grad_accum=2"
)
run() { # binary, tag, ranks, extra args
  local bin=$1 tag=$2 n=$3
  shift 3
  # shellcheck disable=SC2068
  mpiexec -n "$n" "$bin" train --config configs/tiny.toml --set train.steps=20 \
    --set train.micro_batch=4 --set train.eval_every=10 --set train.eval_batches=2 \
    --set train.log_every=100 --set output.dir="$out/$tag" $@ >"$out/$tag.log" 2>&1
  python3 -c "import json; [print(json.dumps({k: j[k] for k in ('step', 'loss', 'grad_norm', 'lr', 'val_loss') if k in j})) for j in map(json.loads, open('$out/$tag/metrics.jsonl'))]" >"$out/$tag.values"
}
# Every dataset of two HDF5 files, by name, byte for byte (attributes, such as a format's
# version or what wrote the file, may differ).
same_tensors() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
import h5py
def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, o: out.__setitem__(name, o[()].tobytes()) if isinstance(o, h5py.Dataset) else None)
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a == b and a else 1)
PY
}
status=0
for entry in "${layouts[@]}"; do
  IFS='|' read -r tag n args <<<"$entry"
  run "$old" "$tag.old" "$n" "$args"
  run "$new" "$tag.new" "$n" "$args"
  steps=$(wc -l <"$out/$tag.new.values")
  if cmp -s "$out/$tag.old.values" "$out/$tag.new.values" &&
    same_tensors "$out/$tag.old/model.h5" "$out/$tag.new/model.h5"; then
    echo "$tag: identical ($steps steps: losses, gradient norms, learning rates, validation; weights)"
  else
    echo "$tag: DIFFERENT"
    diff "$out/$tag.old.values" "$out/$tag.new.values" | head -n 4 || true
    status=1
  fi
done
exit $status
