#!/usr/bin/env bash
# A hung job explains itself (parallel/watchdog.hpp). GRIDLM_FAULT makes one rank drop a send or
# sleep forever; with parallel.timeout_seconds = 2 the job must end on its own with status 76,
# a report from every rank in output.dir/hang/, and the culprit named. Or, with `dump`, SIGQUIT
# to one rank mid-run writes every rank's state and the run goes on to the end.
# Usage: hang.sh GRIDLM MPIEXEC CONFIG WORKDIR RANKS FAULT|dump [--set ...]
# Prints the run's output, "exit status N after S s" and "reports: K of RANKS".
set -u
gridlm=$1 mpiexec=$2 config=$3 work=$4 ranks=$5 fault=$6
shift 6
rm -rf "$work"
mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
start=$(date +%s)
if [[ $fault == dump ]]; then
  timeout 120 "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" --set train.steps=1500 \
    --set train.log_every=500 --set output.metrics=metrics.jsonl --set output.dir="$work" "$@" &
  pid=$!
  for _ in $(seq 600); do
    [[ -f $work/metrics.jsonl && $(wc -l <"$work/metrics.jsonl") -ge 20 ]] && break
    sleep 0.1
  done
  # One rank's process (not mpiexec's): the others learn of it through output.dir/hang/request.
  pkill -QUIT -o -f "^[^ ]*gridlm train .*output\.dir=$work( |$)"
  for _ in $(seq 100); do [[ -f $work/hang/report.txt ]] && break; sleep 0.1; done
  wait $pid
else
  GRIDLM_FAULT=$fault timeout 120 "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" \
    --set train.steps=50 --set parallel.timeout_seconds=2 --set output.dir="$work" "$@"
fi
rc=$?
echo "exit status $rc after $(($(date +%s) - start)) s"
echo "reports: $(ls "$work"/hang/rank-*.json 2>/dev/null | wc -l) of $ranks"
[[ -f $work/hang/report.txt ]] && sed 's/^/report.txt: /' "$work/hang/report.txt"
exit 0
