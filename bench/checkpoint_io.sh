#!/usr/bin/env bash
# Checkpoint bandwidth against dd on the same disk, in one run: gridlm writes a checkpoint
# (weights and both AdamW moments, every rank its pipeline stage's shard, through .partial,
# flushed to storage, renamed) and reads it back on resume; dd writes the same number of bytes
# with conv=fsync and reads them back, through the page cache (the peer the goal names) and with
# O_DIRECT (the disk's own rate, which gridlm's direct transfers of large shards can reach;
# checkpoint.direct_io). For the small model (configs/small.toml, 15.7 M
# parameters), a GPT-2 124M-shaped one (12 layers, width 768, vocabulary 50257, context 256) and
# the tiny model (a 10 MiB file: per-dataset costs, not bandwidth) at 1, 2 and 4 ranks (pp =
# ranks; 4 ranks oversubscribe 2 cores). Prints one table row per case: medians of ROUNDS rounds and the
# ratios gridlm / dd (page cache) and gridlm / dd (direct).
#
# Every measured operation, gridlm's and dd's alike, starts from the same state: dirty pages
# synced, the page cache dropped (when run as root) and SETTLE seconds of quiet. On a virtual
# machine that hands free memory back to its host (virtio balloon page reporting, as here) a
# page the guest has not touched for a few seconds costs a hypervisor fault on first use; a
# write that runs right after another process freed memory gets warm pages and runs 3-10x
# faster. Without the pause the order of the runs, not the code, decides the ratio.
# Usage: bench/checkpoint_io.sh [ranks...]   (default: 1 2 4; needs build/bin/gridlm)
#        ROUNDS=3 SETTLE=10 MODELS="small 124m tiny" by default; GRIDLM_ARGS adds gridlm
#        options to both runs (e.g. "--set checkpoint.direct_io=false": the page-cache path).
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=("${@:-1 2 4}")
read -r -a ranks <<<"${ranks[*]}"
rounds=${ROUNDS:-3}
settle_s=${SETTLE:-10}
gridlm=$PWD/build/bin/gridlm
work=$PWD/build/bench-checkpoint # on the disk the checkout is on
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
TIMEFORMAT=%R # bash's time: wall seconds
declare -A models=(
  [tiny]="--config configs/tiny.toml --set train.micro_batch=1"
  [small]="--config configs/small.toml --set train.micro_batch=1"
  [124m]="--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab_size=50257 --set model.seq_len=256 --set train.micro_batch=1"
)
drops=no
if [[ -w /proc/sys/vm/drop_caches ]]; then drops=yes; fi
settle() {
  sync
  if [[ $drops == yes ]]; then echo 3 >/proc/sys/vm/drop_caches; fi
  sleep "$settle_s"
}
py() { python3 -c "import statistics as s; print($1)"; }
mibs() { py "f'{$1 / max($2, 1e-4) / 2**20:.0f}'"; }
median() { py "s.median([$(tr ' ' ',' <<<"$*")])"; }
ratio() { py "f'{$1 / max($2, 1):.2f}'"; }
echo "checkpoint_io: commit $(git rev-parse --short HEAD), $(df -h --output=source,fstype "$work" | tail -n1), gridlm options '${GRIDLM_ARGS:-}'," \
  "page cache dropped before each operation: $drops, settle ${settle_s} s, median of $rounds rounds"
printf '| model | ranks | size | write s | write MiB/s | dd write MiB/s | ratio | dd direct write MiB/s | ratio | read s | read MiB/s | dd read MiB/s | ratio | dd direct read MiB/s | ratio |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for model in ${MODELS:-small 124m tiny}; do
  for n in "${ranks[@]}"; do
    out=$work/$model-$n
    # shellcheck disable=SC2086
    args=(${models[$model]} --set parallel.pp=$n --set parallel.stage_layout=balanced --set train.grad_accum=$n --set train.steps=1
      --set train.log_every=1000 --set checkpoint.dir=ck --set output.dir=$out --set output.weights= ${GRIDLM_ARGS:-})
    writes=() reads=() dd_writes=() dd_reads=() dio_writes=() dio_reads=()
    for ((r = 0; r < rounds; ++r)); do
      rm -rf "$out"
      settle
      mpiexec -n "$n" "$gridlm" train "${args[@]}" >"$out.train.log"
      read -r write_s bytes < <(python3 -c "import json; j = [json.loads(l) for l in open('$out/metrics.jsonl')][-1]; print(j['checkpoint_s'], j['checkpoint_bytes'])")
      settle
      mpiexec -n "$n" "$gridlm" train "${args[@]}" --set output.metrics= --resume auto >"$out.resume.log"
      read_s=$(sed -n 's/.*; read in \([0-9.]*\) s$/\1/p' "$out.resume.log")
      count=$(((bytes + (1 << 23) - 1) >> 23)) # 8 MiB blocks
      settle
      dd_write=$( { time dd if=/dev/zero of="$out/dd" bs=8M count=$count conv=fsync status=none; } 2>&1 )
      settle
      dd_read=$( { time dd if="$out/dd" of=/dev/null bs=8M status=none; } 2>&1 )
      rm -f "$out/dd"
      settle
      dio_write=$( { time dd if=/dev/zero of="$out/dd" bs=8M count=$count oflag=direct conv=fsync status=none; } 2>&1 )
      settle
      dio_read=$( { time dd if="$out/dd" of=/dev/null bs=8M iflag=direct status=none; } 2>&1 )
      rm -f "$out/dd"
      writes+=("$write_s") reads+=("$read_s") dd_writes+=("$dd_write") dd_reads+=("$dd_read")
      dio_writes+=("$dio_write") dio_reads+=("$dio_read")
    done
    rm -rf "$out"
    dd_bytes=$((count << 23))
    write_s=$(median "${writes[*]}") read_s=$(median "${reads[*]}")
    w=$(mibs "$bytes" "$write_s") r=$(mibs "$bytes" "$read_s")
    dw=$(mibs "$dd_bytes" "$(median "${dd_writes[*]}")") dr=$(mibs "$dd_bytes" "$(median "${dd_reads[*]}")")
    xw=$(mibs "$dd_bytes" "$(median "${dio_writes[*]}")") xr=$(mibs "$dd_bytes" "$(median "${dio_reads[*]}")")
    printf '| %s | %d | %s MiB | %.2f | %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s |\n' "$model" "$n" \
      "$(py "f'{$bytes / 2**20:.1f}'")" "$write_s" "$w" "$dw" "$(ratio "$w" "$dw")" "$xw" "$(ratio "$w" "$xw")" \
      "$read_s" "$r" "$dr" "$(ratio "$r" "$dr")" "$xr" "$(ratio "$r" "$xr")"
    echo "  runs: write ${writes[*]} s, dd ${dd_writes[*]} s, dd direct ${dio_writes[*]} s; read ${reads[*]} s, dd ${dd_reads[*]} s, dd direct ${dio_reads[*]} s" >&2
  done
done
