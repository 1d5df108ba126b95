#!/usr/bin/env bash
# The job scripts under a real Slurm (tests/slurm/cluster.sh: two nodes on this machine),
# submitted with sbatch as a user would:
#   grid       jobscripts/grid.sbatch on 2 nodes x 2 tasks: --tp auto fills a node, and each
#              tensor group is inside one node;
#   prepare    jobscripts/prepare-data.sbatch on 2 nodes: a corpus tokenized into one dataset;
#   limit      train.sbatch with a 1-minute time limit for a run that does not fit in one (1200
#              steps, a 42 s exit margin): it saves a checkpoint before the limit (no signal),
#              exits 75, requeues itself, resumes and finishes; the final weights equal an
#              uninterrupted run's, bit for bit;
#   extend     the time limit of a running 2-minute job raised to 5 (`scontrol update
#              TimeLimit`) before its exit margin comes: the run trains on past the old stop
#              (then the test cancels it);
#   signal     `scancel --signal=USR1` mid-run: a checkpoint, a requeue, the end of the run;
#   preempt    `scontrol requeue` of the running job, which is what a preemption with
#              PreemptMode=REQUEUE does: SIGTERM to the batch script and every rank, SIGKILL
#              KillWait (5 s here) later, the job back in the queue. gridlm saves within it, the
#              job runs again from that checkpoint and finishes with an uninterrupted run's
#              weights, bit for bit;
#   campaign   two jobs of the same name chained with --dependency=singleton: the first finishes
#              a short run, the second finds it done and exits at once;
#   badconfig  a configuration with an error fails within seconds, its error in the job output;
#   crash      one rank is killed mid-run (SIGKILL): the whole job ends within seconds, and the
#              next job resumes from the newest complete checkpoint and finishes;
#   hang       one rank sleeps forever (GRIDLM_FAULT): the watchdog ends the job, whose exit
#              code is 76 (srun alone reports the kill of the other rank), not requeued.
# Usage: jobs.sh MODE GRIDLM SOURCE_DIR WORKDIR   (with SLURM_CONF set to the cluster's)
set -u
mode=$1 gridlm=$2 src=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
cp "$src/tests/slurm/run.toml" .
log() { echo "jobs.sh: $*"; }
# Until job $1 has left the queue (done, failed or cancelled), at most $2 seconds. Slurm holds
# a requeued job for about two minutes (Reason=BeginTime); the test lets it start once the
# previous run's step daemons are gone (a new step of the same id started while the old one
# still cleans up loses its PMI socket to that cleanup) and it has been held at least 3 s: started
# within a second of its requeue, a job was killed as "non-startable: Job credential revoked"
# (the nodes still held the revocation of the run before).
# Also released: the other jobs in `watch` (a campaign's).
watch=()
declare -A held_since=()
release() {
  local info
  info=$(scontrol show job "$1" -o 2>/dev/null)
  if [[ $info != *JobState=PENDING* || $info != *Reason=BeginTime* ]]; then
    unset "held_since[$1]"
    return 0
  fi
  [[ -n ${held_since[$1]:-} ]] || held_since[$1]=$SECONDS
  if ((SECONDS - held_since[$1] >= 4)) && ! pgrep -f "slurmstepd: \[$1\." >/dev/null; then
    scontrol update JobId="$1" StartTime=now && log "job $1 requeued; let it start now"
    unset "held_since[$1]"
  fi
}
wait_job() {
  local state="" info
  for ((i = 0; i < $2 * 4; i++)); do
    for other in ${watch[@]+"${watch[@]}"} "$1"; do release "$other"; done
    info=$(scontrol show job "$1" -o 2>/dev/null)
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | "")
        log "job $1 ended: ${state:-gone}"
        return 0
        ;;
    esac
    sleep 0.25
  done
  log "job $1 still $state after $2 s"
  scancel "$1"
  return 1
}
# Until the run's metrics have $1 lines.
wait_steps() {
  for _ in $(seq 1200); do
    [[ -f out/metrics.jsonl && $(wc -l <out/metrics.jsonl) -ge $1 ]] && return 0
    sleep 0.25
  done
  log "the run did not reach step $1"
  return 1
}
submit() { sbatch --parsable --chdir="$work" --export=ALL,GRIDLM="$gridlm",GRIDLM_MODE=cpu "$@"; }
same_weights() { /usr/bin/python3 "$src/tests/cli/same_weights.py" "$1" "$2"; }
train=$src/jobscripts/train.sbatch
export GRIDLM_CONFIG=run.toml
case $mode in
  grid)
    job=$(PATH=$(dirname "$gridlm"):$PATH submit --nodes=2 --ntasks-per-node=2 \
      "$src/jobscripts/grid.sbatch")
    wait_job "$job" 60
    cat gridlm-grid-"$job".out
    ;;
  prepare)
    job=$(GRIDLM_CORPUS=$src/tests/cli/corpus GRIDLM_DATASET=data/corpus.h5 GRIDLM_VOCAB=200 \
      submit --nodes=2 --ntasks-per-node=1 "$src/jobscripts/prepare-data.sbatch" \
      --valid-fraction 0.2)
    wait_job "$job" 120
    cat gridlm-prepare-data-"$job".out
    "$gridlm" prepare-data --help >/dev/null && h5ls data/corpus.h5
    ;;
  limit)
    # SIGCONT in place of the script's SIGUSR1, which Slurm would send at once to a job shorter
    # than its 5 minutes: only the time limit may stop this run. An exit margin of 42 s leaves
    # each 1-minute job about 15 s of steps, so a run of 1200 steps (18 s at the fastest
    # 15 ms a step seen here, 50 s under load) needs 2 to 4 jobs; the run and the uninterrupted
    # one cost half of what they cost at 2500 steps with the measured margin (20 s).
    sed -i 's/^steps = .*/steps = 1200/' run.toml
    t0=$(date +%s)
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=1 --signal=CONT@5 "$train" \
      --set train.exit_margin_minutes=0.7)
    wait_job "$job" 600
    log "$(($(date +%s) - t0)) s in all"
    cat gridlm-train-"$job".out
    # The same run without a stop, with the job's one BLAS thread per rank.
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 timeout 300 mpiexec -n 2 "$gridlm" train \
      --config run.toml --set output.dir=whole --set checkpoint.dir= >/dev/null
    same_weights out/model.h5 whole/model.h5
    ;;
  campaign)
    # A requeued job still counts for the singleton, so the chain is tested on a run that ends
    # within its first job (the time-limit test covers the requeues).
    sed -i 's/^steps = .*/steps = 300/' run.toml
    first=$(submit --nodes=2 --ntasks-per-node=1 --time=10 --dependency=singleton "$train")
    second=$(submit --nodes=2 --ntasks-per-node=1 --time=10 --dependency=singleton "$train")
    watch=("$first" "$second")
    wait_job "$first" 300
    wait_job "$second" 300
    grep -Eq "step +300/300" gridlm-train-"$first".out && log "campaign: job $first ran the run"
    grep -q "0 steps would run from step 300" gridlm-train-"$second".out &&
      log "campaign: job $second found the run done"
    cat gridlm-train-"$second".out
    ;;
  extend)
    # With a 72 s exit margin the 2-minute job would stop about 48 s after its start; gridlm
    # asks squeue again 20 s before that, some 28 s after the start and long after the limit is
    # raised here (once the run trains: it read the old end at its start). The run (too long to
    # end) must still train 58 s after the job's start, past the old stop; its output then is
    # what the test reads, and the job is cancelled.
    sed -i 's/^steps = .*/steps = 1000000/' run.toml
    sed -i 's/^log_every = .*/log_every = 100000/' run.toml
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=2 --signal=CONT@5 "$train" \
      --set train.exit_margin_minutes=1.2)
    wait_steps 20
    scontrol update JobId="$job" TimeLimit=5 && log "raised job $job's time limit to 5 minutes"
    ran=0
    for _ in $(seq 480); do
      info=$(scontrol show job "$job" -o 2>/dev/null)
      ran=$(sed -n 's/.*RunTime=\([0-9:]*\).*/\1/p' <<<"$info" | awk -F: '{print $(NF-1) * 60 + $NF}')
      [[ $info == *JobState=RUNNING* && ${ran:-0} -ge 58 ]] && break
      grep -q "stopped after step" gridlm-train-"$job".out 2>/dev/null && break
      sleep 0.25
    done
    [[ $info == *JobState=RUNNING* ]] && log "job $job still training $ran s after its start"
    cat gridlm-train-"$job".out
    # Not requeued by its script when gridlm saves on the cancel's SIGTERM and exits 75.
    scontrol update JobId="$job" Requeue=0 && scancel "$job"
    wait_job "$job" 60
    ;;
  signal)
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=10 "$train" --set train.steps=400)
    wait_steps 100
    scancel --signal=USR1 "$job"
    log "sent SIGUSR1 to job $job"
    wait_job "$job" 400
    cat gridlm-train-"$job".out
    ;;
  preempt)
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=10 "$train" --set train.steps=400)
    wait_steps 100
    scontrol requeue "$job" && log "requeued job $job while it ran, as a preemption does"
    wait_job "$job" 400
    cat gridlm-train-"$job".out
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 timeout 300 mpiexec -n 2 "$gridlm" train \
      --config run.toml --set train.steps=400 --set output.dir=whole --set checkpoint.dir= \
      >/dev/null
    same_weights out/model.h5 whole/model.h5
    ;;
  badconfig)
    echo 'bogus_key = 1' >>run.toml
    t0=$(date +%s)
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=10 "$train")
    wait_job "$job" 120
    log "ended $(($(date +%s) - t0)) s after submission"
    cat gridlm-train-"$job".out
    ;;
  hang)
    job=$(GRIDLM_FAULT=hang:1:30 submit --nodes=2 --ntasks-per-node=1 --time=10 "$train" \
      --set train.steps=400 --set parallel.timeout_seconds=2)
    wait_job "$job" 120
    log "job $job: $(scontrol show job "$job" | grep -o 'ExitCode=[0-9:]*')"
    cat gridlm-train-"$job".out
    log "status files left: $(ls -A | grep -c '^\.gridlm-status')"
    ;;
  crash)
    job=$(submit --nodes=2 --ntasks-per-node=1 --time=10 "$train" --set train.steps=400 \
      --set checkpoint.every=20)
    wait_steps 50
    pkill -KILL -n -f "^[^ ]*gridlm train --config run.toml"
    t0=$(date +%s)
    log "killed the newest rank of job $job"
    wait_job "$job" 120
    log "job ended $(($(date +%s) - t0)) s after the kill"
    cat gridlm-train-"$job".out
    log "newest complete checkpoint: $(cat out/ck/latest)"
    # The next job (train.sbatch resumes with --resume auto) goes on from it to the end.
    again=$(submit --nodes=2 --ntasks-per-node=1 --time=10 "$train" --set train.steps=400 \
      --set checkpoint.every=20)
    wait_job "$again" 120
    cat gridlm-train-"$again".out
    ;;
esac
