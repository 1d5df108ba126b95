#!/usr/bin/env bash
# Real English text: Debian's `fortunes` package (about 2.6 MB of fortune cookies, installed by
# scripts/install-deps.sh) becomes a dataset with a 2000-piece BPE tokenizer, the tiny GPT trains
# on it on 2 ranks with the validation loss every 50 steps, and samples a continuation.
# Ends with "validation loss fell from A to B" (exit 1 if it did not fall).
#   bash scripts/fortunes.sh [STEPS] [OUT_DIR]        (defaults: 300, gridlm-out/fortunes)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
out=${2:-gridlm-out/fortunes}
gridlm=${GRIDLM:-build/bin/gridlm}
corpus=/usr/share/games/fortunes
[[ -d $corpus ]] || { echo "fortunes.sh: no $corpus; apt-get install fortunes" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
mpiexec -n 2 "$gridlm" prepare-data "$corpus" --vocab-size 2000 --valid-fraction 0.05 \
  -o "$out/fortunes.h5"
mpiexec -n 2 "$gridlm" train --config configs/tiny.toml --set data.source="$out/fortunes.h5" \
  --set model.vocab_size=2000 --set train.micro_batch=4 --set train.steps="$steps" \
  --set train.eval_every=50 --set train.eval_batches=8 --set train.log_every=100 \
  --set output.dir="$out"
"$gridlm" sample --weights "$out/model.h5" --prompt "The computer" --tokens 60
# The validation losses from the metrics: first and last (a diverged model's null is a failure:
# it reads as no number, and awk would take it for 0).
vals=$(sed -n 's/.*"val_loss":\([^,}]*\).*/\1/p' "$out/metrics.jsonl")
first=$(head -1 <<<"$vals")
last=$(tail -1 <<<"$vals")
echo "validation loss fell from $first to $last"
[[ $first =~ ^[0-9] && $last =~ ^[0-9] ]] || exit 1
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.2) }'
