#!/usr/bin/env bash
# The end of a batch job, as a run meets it under mpiexec (2 ranks, data parallel):
#   signal    SIGUSR1 (what `sbatch --signal=USR1@N` sends) reaches every rank mid-run: the run
#             saves a checkpoint, stops with exit status 75, and `--resume auto` finishes it with
#             the weights of an uninterrupted run, bit for bit;
#   save      SIGUSR2 mid-run: a checkpoint, and the run goes on to the end (status 0);
#   deadline  a Slurm job whose time limit ends 20 s after the start (SLURM_JOB_ID and
#             SLURM_JOB_END_TIME, as Slurm sets them) with train.exit_margin_minutes = 0.25: the
#             run stops by itself with status 75 before the limit, no signal sent;
#   nodir     SIGTERM to a run without checkpoint.dir: status 1, a message naming why, and the
#             weights of that step in the weights file.
# Usage: job_stop.sh signal|save|deadline|nodir GRIDLM MPIEXEC CONFIG WORKDIR
set -u
mode=$1 gridlm=$2 mpiexec=$3 config=$4 work=$5
rm -rf "$work"
mkdir -p "$work"
steps=2000
# One BLAS thread per rank, as in a job: the same bits from run to run whatever the load.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The training command, in the background; its metrics say how far it got.
start() {
  timeout 120 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set train.steps=$steps \
    --set train.log_every=100 --set output.metrics=metrics.jsonl --set output.weights=model.h5 "$@" &
  pid=$!
}
# Waits until the run has done N steps (its metrics file has N lines).
wait_steps() {
  for _ in $(seq 600); do
    [[ -f $1/metrics.jsonl && $(wc -l <"$1/metrics.jsonl") -ge $2 ]] && return 0
    sleep 0.1
  done
  echo "the run did not reach step $2"
  exit 1
}
# Sends a signal to every rank of the run writing into $1 (its processes, not mpiexec's).
signal_ranks() { pkill "-$2" -f "^[^ ]*gridlm train .*output\.dir=$1( |$)"; }
same_weights() { /usr/bin/python3 "$(dirname "$0")/same_weights.py" "$1" "$2"; }
case $mode in
  signal)
    start --set checkpoint.dir=ck --set output.dir="$work/stopped"
    wait_steps "$work/stopped" 20
    signal_ranks "$work/stopped" USR1
    wait $pid
    echo "stopped run: exit status $?"
    echo "files: $(ls "$work/stopped/ck" | tr '\n' ' ')"
    timeout 120 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set train.steps=$steps \
      --set train.log_every=100 --set checkpoint.dir=ck --set output.dir="$work/stopped" \
      --set output.weights=model.h5 --set output.metrics=metrics.jsonl \
      --resume auto
    echo "resumed run: exit status $?"
    timeout 120 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set train.steps=$steps \
      --set train.log_every=100 --set output.weights=model.h5 --set output.dir="$work/whole" >/dev/null
    same_weights "$work/stopped/model.h5" "$work/whole/model.h5"
    ;;
  save)
    start --set checkpoint.dir=ck --set output.dir="$work/saved"
    wait_steps "$work/saved" 20
    signal_ranks "$work/saved" USR2
    wait $pid
    echo "run: exit status $?"
    echo "files: $(ls "$work/saved/ck" | tr '\n' ' ')"
    ;;
  deadline)
    # Given to the ranks only (-genv): mpiexec itself would take SLURM_JOB_ID for an allocation.
    t0=$(date +%s)
    timeout 120 "$mpiexec" -genv SLURM_JOB_ID 1 -genv SLURM_JOB_END_TIME $((t0 + 20)) -n 2 \
      "$gridlm" train --config "$config" --set train.steps=1000000 --set train.log_every=1000 \
      --set checkpoint.dir=ck --set output.dir="$work/limit" --set train.exit_margin_minutes=0.25
    status=$?
    echo "run: exit status $status, $(($(date +%s) - t0)) s after its start (limit: 20 s)"
    echo "files: $(ls "$work/limit/ck" | tr '\n' ' ')"
    ;;
  nodir)
    start --set output.dir="$work/nodir"
    wait_steps "$work/nodir" 20
    signal_ranks "$work/nodir" TERM
    wait $pid
    echo "run: exit status $?"
    echo "weights file: $(ls "$work/nodir/model.h5")"
    ;;
esac
