#!/usr/bin/env bash
# The size that "--vocab-size N is more than this corpus can fill" advises must work when given,
# for a too-large size with byte pieces (N >= 512, where the corpus fills fewer than 512) and
# without them.
# Usage: prepare_vocab_advice.sh GRIDLM CORPUS WORKDIR
set -u
gridlm=$1 corpus=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
for asked in 600 400; do
  said=$("$gridlm" prepare-data "$corpus" --vocab-size "$asked" -o "$work/d.h5" 2>&1)
  advised=$(sed -n 's/.*give --vocab-size \([0-9]*\) or less.*/\1/p' <<<"$said")
  [[ -n $advised ]] || { echo "asked $asked: no advice in: $said"; exit 1; }
  if "$gridlm" prepare-data "$corpus" --vocab-size "$advised" -o "$work/d.h5" >"$work/log" 2>&1; then
    echo "asked $asked, advised $advised: it works"
  else
    echo "asked $asked, advised $advised: refused: $(cat "$work/log")"
  fi
done
