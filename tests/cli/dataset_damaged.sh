#!/usr/bin/env bash
# A dataset file damaged while the job reads it (2 ranks, data parallel): once the run has made
# a few steps, its copy of the dataset is cut to half its size (truncate) or written over in
# place (bytes set to 0xff, the size unchanged). The job must end within seconds with the
# message that the dataset changed, naming the rank, not train on zeros or garbage ids.
# Usage: dataset_damaged.sh truncate|overwrite GRIDLM MPIEXEC CONFIG DATASET WORKDIR
set -u
mode=$1 gridlm=$2 mpiexec=$3 config=$4 dataset=$5 work=$6
rm -rf "$work"
mkdir -p "$work"
cp "$dataset" "$work/data.h5"
timeout 180 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set model.vocab_size=512 \
  --set train.steps=100000 --set train.log_every=1000 --set data.source="$work/data.h5" \
  --set output.dir="$work/out" --set output.metrics=metrics.jsonl >"$work/run.log" 2>&1 &
job=$!
# Damage only a run under way: steps logged means the dataset was opened and checked. Under a
# loaded machine (a parallel ctest) that can take long; a run that never gets there fails here.
steps=0
for _ in $(seq 2400); do
  [[ -f $work/out/metrics.jsonl ]] && steps=$(wc -l <"$work/out/metrics.jsonl")
  ((steps >= 5)) && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
if ((steps < 5)); then
  kill "$job" 2>/dev/null
  wait "$job"
  echo "dataset_damaged.sh: the run logged $steps steps in 120 s (or ended): nothing damaged"
  cat "$work/run.log"
  exit 1
fi
size=$(stat -c %s "$work/data.h5")
case $mode in
  truncate) truncate -s $((size / 2)) "$work/data.h5" ;;
  overwrite)
    /usr/bin/python3 -c "
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(int(sys.argv[2]) // 2)
    f.write(b'\xff' * 65536)" "$work/data.h5" "$size"
    ;;
esac
t0=$(date +%s%N)
wait "$job"
rc=$?
echo "damaged run: exit status $rc, ended $((($(date +%s%N) - t0) / 1000000)) ms after the damage"
echo "steps logged: $(wc -l <"$work/out/metrics.jsonl")"
cat "$work/run.log"
