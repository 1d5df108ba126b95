#!/usr/bin/env bash
# Benchmark: the data path. (1) gridlm prepare-data throughput in MB of text per second on 1 and
# 2 ranks, on the built-in synthetic corpus (100,000 documents, generated in memory) and on
# Debian's fortunes (2.6 MB of files); the tokenizer is trained in every run, as a user would.
# (2) io::TokenDataset delivering training samples (random windows of 129 tokens, direct and
# through the prefetch thread) against a plain sequential read of the same file (dd, page cache
# warm) and against what training the tiny GPT consumes per second on one rank. Medians of RUNS.
#   bash bench/data_io.sh [RUNS]        (default 3)
source "$(dirname "$0")/common.sh"
runs=${1:-3}
export OPENBLAS_NUM_THREADS=1
# "... 3.9 MB of text tokenized in 0.7 s ..." -> MB/s of the whole run (wall clock).
prepare() {
  local ranks=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  mpiexec -n "$ranks" "$gridlm" prepare-data "$@" -o "$out/p.h5" >"$out/p.log"
  t1=$(date +%s.%N)
  local mb s
  mb=$(sed -n 's/.* \([0-9.]*\) MB of text tokenized.*/\1/p' "$out/p.log")
  s=$(sed -n 's/.* MB of text tokenized in \([0-9.]*\) s.*/\1/p' "$out/p.log")
  awk -v mb="$mb" -v s="$s" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f/%.2f\n", mb / (b - a), mb / s }'
}
echo "## prepare-data: MB of text per second, whole run (tokenizer training included) / tokenizing and writing only"
for input in synthetic fortunes; do
  for ranks in 1 2; do
    vals=()
    for ((r = 0; r < runs; r++)); do
      if [[ $input == synthetic ]]; then
        vals+=("$(prepare "$ranks" --synthetic --synthetic-documents 100000 --vocab-size 512)")
      else
        vals+=("$(prepare "$ranks" /usr/share/games/fortunes --vocab-size 2000)")
      fi
    done
    whole=$(printf '%s\n' "${vals[@]}" | cut -d/ -f1 | median)
    phase=$(printf '%s\n' "${vals[@]}" | cut -d/ -f2 | median)
    echo "prepare-data $input, $ranks rank(s): $whole MB/s whole run, $phase MB/s tokenizing (runs: ${vals[*]})"
  done
done

echo "## reading a dataset"
mpiexec -n 1 "$gridlm" prepare-data --synthetic --synthetic-documents 100000 --vocab-size 512 \
  -o "$out/data.h5" >/dev/null
bytes=$(stat -c %s "$out/data.h5")
dd_vals=() direct=() pre=() train=()
for ((r = 0; r < runs; r++)); do
  cat "$out/data.h5" >/dev/null # warm the page cache
  t0=$(date +%s.%N)
  dd if="$out/data.h5" of=/dev/null bs=1M status=none
  t1=$(date +%s.%N)
  dd_vals+=("$(awk -v n="$bytes" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }')")
  res=$(build/bin/bench_reader_throughput "$out/data.h5" 128 8 2000)
  direct+=("$(sed -n 's/.*reader=direct tokens_per_s=\([0-9]*\).*/\1/p' <<<"$res")")
  pre+=("$(sed -n 's/.*reader=prefetched tokens_per_s=\([0-9]*\).*/\1/p' <<<"$res")")
  train+=("$("$gridlm" train --config configs/tiny.toml --set data.source="$out/data.h5" \
    --set train.steps=15 --set output.dir="$out/train" --set output.weights= |
    sed -n 's/.*, \([0-9.]*\) tokens\/s (median).*/\1/p')")
done
m_dd=$(printf '%s\n' "${dd_vals[@]}" | median)
m_direct=$(printf '%s\n' "${direct[@]}" | median)
m_pre=$(printf '%s\n' "${pre[@]}" | median)
m_train=$(printf '%s\n' "${train[@]}" | median)
awk -v dd="$m_dd" -v d="$m_direct" -v p="$m_pre" -v t="$m_train" 'BEGIN {
  printf "dd (sequential, 1 MiB blocks): %.0f MB/s = %.0f M tokens/s of uint16\n", dd, dd / 2
  printf "TokenDataset, random 129-token windows: direct %.2f M tokens/s (%.1f MB/s), prefetched %.2f M tokens/s\n", d / 1e6, 2 * d / 1e6, p / 1e6
  printf "training the tiny GPT on 1 rank consumes %.0f tokens/s: the reader is %.0fx faster (prefetched %.0fx)\n", t, d / t, p / t }'
