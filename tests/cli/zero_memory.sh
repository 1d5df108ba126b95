#!/usr/bin/env bash
# ZeRO-1 divides the optimizer state each rank holds by dp: the start-up report's "optimizer
# state" per rank with parallel.zero = 1 is 1/dp of the one with zero = 0 (up to each bucket's
# padding to a multiple of dp), at dp = RANKS; and its "gradients" grow by the reduced shard it
# keeps, 1/dp of them.
# Usage: zero_memory.sh MPIEXEC GRIDLM CONFIG RANKS
set -euo pipefail
mpiexec=$1 gridlm=$2 config=$3 ranks=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Bytes per rank of `$2` ("optimizer state", "gradients") in the report of a run with
# parallel.zero = $1.
state() {
  "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" --set train.steps=1 \
    --set parallel.zero="$1" --set output.dir="$out/z$1" --set output.weights= |
    sed -n "s/.*, $2 \\([0-9.]*\\) \\([KMG]\\)iB.*/\\1 \\2/p" |
    awk '{ f = $2 == "K" ? 2^10 : $2 == "M" ? 2^20 : 2^30; print $1 * f }'
}
gw=$(state 0 gradients) gs=$(state 1 gradients)
echo "gradients per rank at dp $ranks: $gw bytes without ZeRO, $gs with ZeRO-1"
awk -v w="$gw" -v s="$gs" -v n="$ranks" 'BEGIN {
  r = s / w
  if (w <= 0 || r < (1 + 1 / n) * 0.96 || r > (1 + 1 / n) * 1.04) { # the report rounds to 0.1
    printf "FAIL: ZeRO-1 reports %.4f of the gradients, expected 1 + 1/%d\n", r, n; exit 1 } }'
whole=$(state 0 "optimizer state") sharded=$(state 1 "optimizer state")
echo "optimizer state per rank at dp $ranks: $whole bytes without ZeRO, $sharded with ZeRO-1"
awk -v w="$whole" -v s="$sharded" -v n="$ranks" 'BEGIN {
  r = s / w
  if (w <= 0 || r < 1 / n * 0.97 || r > 1 / n * 1.03) { # the report rounds to 0.1
    printf "FAIL: ZeRO-1 holds %.4f of the state, expected 1/%d\n", r, n; exit 1 }
  printf "ok: ZeRO-1 holds %.4f of the state (1/%d)\n", r, n }'
