#!/usr/bin/env bash
# prepare-data on documents that are each one line of ~25 kB (JSON without line breaks, minified
# text): the tokenizer must learn from them, though SentencePiece skips any training text over
# 16 kB.
# Usage: prepare_long_lines.sh GRIDLM WORKDIR
set -u
gridlm=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
awk 'BEGIN {
  srand(1)
  n = split("the cat sat on a mat and dog ran in park while bird sang over tree", w, " ")
  for (d = 0; d < 40; d++) {
    line = ""
    for (i = 0; i < 6000; i++) line = line w[int(rand() * n) + 1] " "
    print line
    print ""
  }
}' >"$work/long.txt"
echo "longest line: $(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$work/long.txt") bytes"
"$gridlm" prepare-data "$work/long.txt" --vocab-size 100 -o "$work/long.h5"
