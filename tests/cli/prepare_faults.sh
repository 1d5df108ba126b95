#!/usr/bin/env bash
# Faults while `gridlm prepare-data` writes its file over a good one (2 ranks):
#   full       the output's file system (a 640 KiB tmpfs; needs root) lacks room for the new
#              file: the job ends before writing, saying what it needs and what is free;
#   rank_fails one rank's write fails half way (the test-only GRIDLM_FAULT_DATASET_WRITE=1, as a
#              full disk or an I/O error on that rank alone): every rank ends, none waits in
#              the next collective write, and the message names the rank;
#   enospc     one rank's writes fail with ENOSPC from the C library after 100 kB (LD_PRELOAD of
#              FAIL_LIB, tests/cli/fail_writes.cpp), as a quota or a full storage target fails
#              one rank alone, which the free-space check cannot see: before, every rank hung
#              inside HDF5's collective write;
#   hang       one rank stops as the file is about to be created (the test-only
#              GRIDLM_FAULT=hang_in_save:1:1, a stalled file system): with --timeout-seconds 2
#              the watchdog names it and the job ends with status 76 (before, prepare-data had
#              no watchdog and waited for the batch system's limit).
# Either way: a non-zero status within the time limit, the good file byte for byte as it was,
# and no .partial left.
# Usage: prepare_faults.sh full|rank_fails|enospc|hang GRIDLM MPIEXEC WORKDIR [FAIL_LIB]
set -u
mode=$1 gridlm=$2 mpiexec=$3 work=$4 fail_lib=${5:-}
rm -rf "$work"
mkdir -p "$work"
prepare() { # $1: documents, $2: output
  timeout -k 5 60 "$mpiexec" -n 2 "$gridlm" prepare-data --synthetic --synthetic-documents "$1" \
    --vocab-size 128 -o "$2" ${timeout_args:-}
}
case $mode in
  full)
    mkdir -p "$work/disk"
    mount -t tmpfs -o size=640k tmpfs "$work/disk" || { echo "cannot mount a tmpfs (needs root)"; exit 1; }
    trap 'umount "$work/disk"' EXIT
    out=$work/disk/data.h5
    prepare 50 "$out" >/dev/null || { echo "setup: the small file failed"; exit 1; }
    ;;
  rank_fails)
    out=$work/data.h5
    prepare 50 "$out" >/dev/null || { echo "setup: the small file failed"; exit 1; }
    export GRIDLM_FAULT_DATASET_WRITE=1
    ;;
  hang)
    out=$work/data.h5
    prepare 50 "$out" >/dev/null || { echo "setup: the small file failed"; exit 1; }
    export GRIDLM_FAULT=hang_in_save:1:1
    timeout_args="--timeout-seconds 2"
    ;;
  enospc)
    out=$work/data.h5
    prepare 50 "$out" >/dev/null || { echo "setup: the small file failed"; exit 1; }
    export LD_PRELOAD=$fail_lib GRIDLM_TEST_FAIL_RANK=1 GRIDLM_TEST_FAIL_AFTER=100000
    ;;
esac
cp "$out" "$work/before.h5"
prepare 3000 "$out" 2>&1
status=$?
echo "prepare: exit status $status"
((status == 124 || status == 137)) && echo "prepare: timed out (a rank hung)"
cmp -s "$out" "$work/before.h5" && echo "the good file is as it was"
ls "$(dirname "$out")"/*.partial 2>/dev/null || echo "no .partial left"
