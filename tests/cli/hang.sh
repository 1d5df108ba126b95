#!/usr/bin/env bash
# A hung job explains itself (parallel/watchdog.hpp). GRIDLM_FAULT makes one rank drop a send or
# sleep forever; with parallel.timeout_seconds = 2 the job must end on its own with status 76,
# a report from every rank in output.dir/hang/, and the culprit named. Or, with `dump`, SIGQUIT
# to one rank mid-run writes every rank's state and the run goes on to the end; `dump_all`
# signals every rank at once (as `scancel --signal=QUIT` does). With
# HANG_QUIT_AFTER=S and a fault, SIGQUIT reaches rank HANG_QUIT_RANK (default 1) S seconds after
# step 2 is logged: its states, written while the hang is being concluded, must not cut the
# conclusion short.
# Usage: hang.sh GRIDLM MPIEXEC CONFIG WORKDIR RANKS FAULT|dump [--set ...]
# Prints the run's output, "exit status N after S s", "reports: K of RANKS" and the status file
# (GRIDLM_STATUS_FILE).
set -u
gridlm=$1 mpiexec=$2 config=$3 work=$4 ranks=$5 fault=$6
shift 6
rm -rf "$work"
mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
start=$(date +%s)
if [[ $fault == dump || $fault == dump_all ]]; then
  timeout -k 5 120 "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" --set train.steps=1500 \
    --set train.log_every=500 --set output.metrics=metrics.jsonl --set output.dir="$work" "$@" &
  pid=$!
  for _ in $(seq 600); do
    [[ -f $work/metrics.jsonl && $(wc -l <"$work/metrics.jsonl") -ge 20 ]] && break
    sleep 0.1
  done
  # One rank's process (not mpiexec's): the others learn of it through output.dir/hang/request.
  # Or all of them.
  oldest=(-o)
  [[ $fault == dump_all ]] && oldest=()
  pkill -QUIT "${oldest[@]}" -f "^[^ ]*gridlm train .*output\.dir=$work( |$)"
  for _ in $(seq 100); do [[ -f $work/hang/report.txt ]] && break; sleep 0.1; done
  wait $pid
else
  GRIDLM_FAULT=$fault GRIDLM_STATUS_FILE=$work/status timeout -k 5 120 "$mpiexec" -n "$ranks" \
    "$gridlm" train --config "$config" --set train.steps=50 --set parallel.timeout_seconds=2 \
    --set train.log_every=1 --set output.dir="$work" "$@" >"$work/out" 2>&1 &
  pid=$!
  if [[ -n ${HANG_QUIT_AFTER:-} ]]; then
    for _ in $(seq 600); do grep -Eq "step +2/" "$work/out" 2>/dev/null && break; sleep 0.02; done
    sleep "$HANG_QUIT_AFTER"
    for p in $(pgrep -f "^[^ ]*gridlm train .*output\.dir=$work( |$)"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=${HANG_QUIT_RANK:-1}"; then
        kill -QUIT "$p" && echo "sent SIGQUIT to rank ${HANG_QUIT_RANK:-1}"
      fi
    done
  fi
  wait $pid
  rc=$?
  cat "$work/out"
  (exit $rc)
fi
rc=$?
echo "exit status $rc after $(($(date +%s) - start)) s"
echo "reports: $(ls "$work"/hang/rank-*.json 2>/dev/null | wc -l) of $ranks"
[[ -f $work/status ]] && echo "status file: $(cat "$work/status")"
[[ -f $work/hang/report.txt ]] && sed 's/^/report.txt: /' "$work/hang/report.txt"
exit 0
