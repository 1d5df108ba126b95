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
#             weights of that step in the weights file, which says that step;
#   kill      SIGKILL to one rank mid-run (a node lost): the whole job ends within seconds, and
#             `--resume auto` goes on from the newest complete checkpoint to the weights of an
#             uninterrupted run, bit for bit.
# Usage: job_stop.sh signal|save|deadline|nodir|kill GRIDLM MPIEXEC CONFIG WORKDIR
set -u
mode=$1 gridlm=$2 mpiexec=$3 config=$4 work=$5
rm -rf "$work"
mkdir -p "$work"
steps=2000
# One BLAS thread per rank, as in a job: the same bits from run to run whatever the load.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The training command; its metrics say how far it got.
train() {
  timeout 120 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set train.steps=$steps \
    --set train.log_every=100 --set output.metrics=metrics.jsonl --set output.weights=model.h5 "$@"
}
# Whether the run writing into $1 has done $2 steps (its metrics file has $2 lines) within 60 s.
wait_steps() {
  for _ in $(seq 600); do
    [[ -f $1/metrics.jsonl && $(wc -l <"$1/metrics.jsonl") -ge $2 ]] && return 0
    sleep 0.1
  done
  echo "the run did not reach step $2"
  return 1
}
# A run into $2 ("$@" after $3: more options) whose ranks (their processes, not mpiexec's) get
# signal $3 once it has done 20 steps; prints "$1: exit status N".
signalled() {
  local name=$1 dir=$2 signal=$3
  shift 3
  train --set output.dir="$dir" "$@" &
  local pid=$!
  wait_steps "$dir" 20 || { kill $pid; exit 1; }
  pkill "-$signal" -f "^[^ ]*gridlm train .*output\.dir=$dir( |$)"
  wait $pid
  echo "$name: exit status $?"
}
same_weights() { /usr/bin/python3 "$(dirname "$0")/same_weights.py" "$1" "$2"; }
case $mode in
  signal)
    signalled "stopped run" "$work/stopped" USR1 --set checkpoint.dir=ck
    echo "files: $(ls "$work/stopped/ck" | tr '\n' ' ')"
    train --set checkpoint.dir=ck --set output.dir="$work/stopped" --resume auto
    echo "resumed run: exit status $?"
    train --set output.dir="$work/whole" >/dev/null
    same_weights "$work/stopped/model.h5" "$work/whole/model.h5"
    ;;
  save)
    signalled run "$work/saved" USR2 --set checkpoint.dir=ck
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
  kill)
    dir=$work/killed
    train --set output.dir="$dir" --set checkpoint.dir=ck --set checkpoint.every=10 &
    pid=$!
    wait_steps "$dir" 35 || { kill $pid; exit 1; }
    t0=$(date +%s%N)
    pkill -KILL -n -f "^[^ ]*gridlm train .*output\.dir=$dir( |$)"
    wait $pid
    status=$?
    echo "killed run: exit status $status, over $((($(date +%s%N) - t0) / 1000000)) ms after the SIGKILL"
    train --set output.dir="$dir" --set checkpoint.dir=ck --set checkpoint.every=10 --resume auto
    echo "resumed run: exit status $?"
    train --set output.dir="$work/whole" >/dev/null
    same_weights "$dir/model.h5" "$work/whole/model.h5"
    ;;
  nodir)
    signalled run "$work/nodir" TERM
    echo "weights file: $(ls "$work/nodir/model.h5") at step $(/usr/bin/python3 -c \
      "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs['step'])" "$work/nodir/model.h5")"
    ;;
esac
