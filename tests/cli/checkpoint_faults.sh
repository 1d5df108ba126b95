#!/usr/bin/env bash
# Faults during a save, as a job meets them (2 ranks, data parallel, a checkpoint every 2
# steps of 6):
#   kill  the last rank is killed (SIGKILL, the test-only GRIDLM_FAULT_KILL_DURING_SAVE=4) half
#         way through writing step 4: the job ends, `latest` still names step 2, the broken
#         file is only a .partial, and --resume auto goes on from step 2 to the end;
#   attributes  the last rank's writing of step 4's attributes fails (the test-only
#         GRIDLM_FAULT_SAVE_ATTRIBUTES=4), after its tensors: it ends the job within seconds
#         with the message (before, every rank hung in HDF5's close), and `latest` still
#         names step 2, the broken file only a .partial;
#   enospc  the last rank's writes to step 4's file fail with ENOSPC from the C library
#         (LD_PRELOAD of FAIL_LIB, tests/cli/fail_writes.cpp), as a quota or a full storage
#         target fails one rank alone: the job ends within seconds naming the cause (before,
#         the ranks waited inside HDF5's flush until the watchdog named a hang), `latest` still
#         names step 2, which verifies;
#   full  the checkpoint directory is a 640 KiB file system (tmpfs; needs root): step 2 fits,
#         step 4 does not: the job ends with one message saying so before writing it, and
#         step 2 stays intact (gridlm checkpoint verify);
#   full_continue  the same under checkpoint.on_save_error = continue: step 4's failure is
#         logged and passed over, the run goes on to step 6, whose save (the last) must succeed:
#         it fails, and the job ends saying so, step 2 intact and no .partial left;
#   usr2_full  under checkpoint.on_save_error = continue, SIGUSR2 (save and go on) while the
#         checkpoint file system is full: that save's failure is passed over like a periodic
#         one's; room is made again, and SIGUSR1 stops the run with a checkpoint (status 75);
#   readonly  checkpoint.dir is an existing directory that cannot be written (a read-only tmpfs,
#         since root ignores permission bits; needs root), and then a directory to be made
#         inside it: at 1, 2 and 4 ranks each run ends before step 1 with the directory, the
#         reason and the fix, and without a hang.
# Usage: checkpoint_faults.sh kill|attributes|enospc|full|full_continue|usr2_full|readonly GRIDLM
#        MPIEXEC CONFIG WORKDIR [FAIL_LIB]
set -u
mode=$1 gridlm=$2 mpiexec=$3 config=$4 work=$5 fail_lib=${6:-}
rm -rf "$work"
mkdir -p "$work"
ranks=2
run() { timeout 60 "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" --set train.steps=6 \
  --set checkpoint.every=2 --set output.dir="$work/out" "$@"; }
case $mode in
  kill)
    GRIDLM_FAULT_KILL_DURING_SAVE=4 run --set checkpoint.dir=ck >"$work/killed.log" 2>&1
    echo "killed run: exit status $?"
    echo "files: $(ls "$work/out/ck" | tr '\n' ' ')"
    echo "latest: $(cat "$work/out/ck/latest")"
    run --set checkpoint.dir=ck --resume auto
    ;;
  attributes)
    start=$(date +%s)
    GRIDLM_FAULT_SAVE_ATTRIBUTES=4 run --set checkpoint.dir=ck --set parallel.timeout_seconds=60 2>&1
    echo "failed run: exit status $? after $(($(date +%s) - start)) s"
    echo "files: $(ls "$work/out/ck" | tr '\n' ' ')"
    echo "latest: $(cat "$work/out/ck/latest")"
    ;;
  enospc)
    start=$(date +%s)
    LD_PRELOAD=$fail_lib GRIDLM_TEST_FAIL_RANK=$((ranks - 1)) GRIDLM_TEST_FAIL_AFTER=0 \
      GRIDLM_TEST_FAIL_SUFFIX=step-000004.h5.partial run --set checkpoint.dir=ck \
      --set parallel.timeout_seconds=20 2>&1
    echo "failed run: exit status $? after $(($(date +%s) - start)) s"
    echo "latest: $(cat "$work/out/ck/latest")"
    "$gridlm" checkpoint verify "$work/out/ck/step-000002.h5"
    ;;
  full | full_continue)
    policy=stop
    [[ $mode == full_continue ]] && policy=continue
    mkdir -p "$work/disk"
    mount -t tmpfs -o size=640k tmpfs "$work/disk" || { echo "cannot mount a tmpfs (needs root)"; exit 1; }
    trap 'umount "$work/disk"' EXIT
    run --set checkpoint.dir="$work/disk/ck" --set checkpoint.on_save_error=$policy 2>&1
    echo "full run: exit status $?"
    echo "files: $(ls "$work/disk/ck" | tr '\n' ' ')"
    "$gridlm" checkpoint verify "$work/disk/ck/step-000002.h5"
    ;;
  usr2_full)
    mkdir -p "$work/disk"
    mount -t tmpfs -o size=640k tmpfs "$work/disk" || { echo "cannot mount a tmpfs (needs root)"; exit 1; }
    trap 'umount "$work/disk"' EXIT
    metrics=$work/out/metrics.jsonl
    run --set train.steps=1000000 --set checkpoint.every=0 --set checkpoint.dir="$work/disk/ck" \
      --set checkpoint.on_save_error=continue --set output.metrics=metrics.jsonl \
      --set train.log_every=100000 2>&1 &
    pid=$!
    waited() { # whether $1 matches a line of the metrics within 30 s
      for _ in $(seq 300); do grep -q "$1" "$metrics" 2>/dev/null && return 0; sleep 0.1; done
      return 1
    }
    signal() { pkill "-$1" -f "^[^ ]*gridlm train .*output\.dir=$work/out( |$)"; }
    waited '"step":20,' || { kill $pid; echo "the run did not reach step 20"; exit 1; }
    # All but ~16 KiB of the file system taken: no checkpoint fits.
    head -c $(($(df -k --output=avail "$work/disk" | tail -1) * 1024 - 16384)) /dev/zero \
      >"$work/disk/filler"
    signal USR2
    waited checkpoint_error || { kill $pid; echo "no failed save in the metrics"; exit 1; }
    # Room again; the run goes on until SIGUSR1 stops it with a checkpoint, which must succeed.
    rm "$work/disk/filler"
    sleep 0.5
    signal USR1
    wait $pid
    echo "run: exit status $?"
    echo "files: $(ls "$work/disk/ck" | tr '\n' ' ')"
    ;;
  readonly)
    mkdir -p "$work/ro"
    mount -t tmpfs -o ro,size=64k tmpfs "$work/ro" || { echo "cannot mount a tmpfs (needs root)"; exit 1; }
    trap 'umount "$work/ro"' EXIT
    for ranks in 1 2 4; do
      for dir in "$work/ro" "$work/ro/ck"; do
        run --set checkpoint.dir="$dir" 2>&1
        echo "$ranks ranks, checkpoint.dir $dir: exit status $?"
      done
    done
    ;;
esac
