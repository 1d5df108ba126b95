#!/usr/bin/env bash
# A bad step (train.on_nonfinite, engine/step_guard.hpp): GRIDLM_FAULT puts a NaN into one rank's
# gradient (or a spike into its loss) at one step, and every rank must take the same branch.
# Usage: bad_steps.sh GRIDLM MPIEXEC CONFIG WORKDIR RANKS RANK MODE [--set ...]
#   stop      the run ends on every rank with the message; prints "exit status N after S s"
#   skip      the run goes on without that step's update; its weights are compared with those of
#             a run that skipped the same step by train.skip_steps ("weights: N of M identical")
#   rollback  checkpoints every 2 steps; the run rolls back and finishes; prints the steps of
#             metrics.jsonl, which must hold each step once and in order
#   spike     a loss 100 higher at step 15 is a spike (train.spike_threshold = 6), skipped
#   respike   a NaN at step 7 rolls back to step 4's checkpoint (steps 5 and 6 undone and run
#             again); a spike at step 17 is then judged over 16 losses, each step's once
#   first     with step 1 skipped, step 2's update is Adam's first: every parameter moves by at
#             most the learning rate, and the largest by nearly it ("largest change 0.99.. x lr";
#             counting the skipped step as an update made it 0.73)
#   resume    a run that skipped step 3 (train.skip_steps) checkpoints at step 4, whose
#             moments hold 3 updates ("optimizer_updates 3 at step 4"); a run resumed there ends
#             with its weights ("weights: N of M identical"): AdamW's bias correction counts
#             updates, and the checkpoint carries their count
set -u
gridlm=$1 mpiexec=$2 config=$3 work=$4 ranks=$5 rank=$6 mode=$7
shift 7
rm -rf "$work"
mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
run() { # DIR FAULT ARGS...: a run's output, then its status
  local dir=$1 fault=$2
  shift 2
  GRIDLM_FAULT=$fault timeout 120 "$mpiexec" -n "$ranks" "$gridlm" train --config "$config" \
    --set output.dir="$work/$dir" --set output.metrics=metrics.jsonl "$@"
  echo "$dir: exit status $?"
}
metrics_steps() { /usr/bin/python3 -c "import json; print(*[json.loads(l)['step'] for l in open('$1')])"; }
metrics_of() { # FILE EXPRESSION: the expression over rows, metrics.jsonl's records
  /usr/bin/python3 -c "import json; rows = [json.loads(l) for l in open('$1')]; print($2)"
}
same_weights() { /usr/bin/python3 "$(dirname "$0")/same_weights.py" "$1" "$2"; }
case $mode in
  stop)
    start=$(date +%s)
    run stop "nan_grad:$rank:3" "$@" 2>&1
    echo "after $(($(date +%s) - start)) s"
    ;;
  skip)
    run skipped "nan_grad:$rank:3" --set train.on_nonfinite=skip --set output.weights=model.h5 "$@" 2>&1
    run reference "" --set train.skip_steps=3 --set output.weights=model.h5 "$@" 2>&1
    same_weights "$work/skipped/model.h5" "$work/reference/model.h5"
    # The dropped step computed nothing: no tokens/s of it in metrics.jsonl (it was millions).
    echo "dropped step 3: $(metrics_of "$work/reference/metrics.jsonl" \
      "[(j['tokens_per_s'], j['mfu']) for j in rows if j['step'] == 3]")"
    ;;
  rollback)
    run rolled "nan_grad:$rank:5" --set train.on_nonfinite=rollback --set checkpoint.dir=ck \
      --set checkpoint.every=2 --set output.weights=model.h5 "$@" 2>&1
    echo "metrics steps: $(metrics_steps "$work/rolled/metrics.jsonl") END"
    echo "rolled back: $(metrics_of "$work/rolled/metrics.jsonl" \
      "[(j['rolled_back_from'], j['rolled_back_for']) for j in rows if 'rolled_back_from' in j]")"
    ;;
  spike)
    run spike "loss_spike:$rank:15" --set train.on_nonfinite=skip --set train.spike_threshold=6 "$@" 2>&1
    ;;
  respike)
    run respike "nan_grad:$rank:7,loss_spike:$rank:17" --set train.on_nonfinite=rollback \
      --set train.spike_threshold=6 --set checkpoint.dir=ck --set checkpoint.every=4 "$@" 2>&1
    ;;
  first)
    first=(--set train.skip_steps=1 --set train.weight_decay=0 --set output.weights=model.h5)
    run before "" --set train.steps=1 "${first[@]}" "$@" 2>&1
    run after "" --set train.steps=2 "${first[@]}" "$@" 2>&1
    /usr/bin/python3 -c "import h5py, json, numpy as np
lr = [json.loads(l)['lr'] for l in open('$work/after/metrics.jsonl') if json.loads(l)['step'] == 2][0]
with h5py.File('$work/before/model.h5') as a, h5py.File('$work/after/model.h5') as b:
    change = max(float(np.max(np.abs(b[n][()] - a[n][()]))) for n in a if isinstance(a[n], h5py.Dataset))
print(f'largest change {change / lr:.4f} x lr')"
    ;;
  resume)
    ck=(--set train.skip_steps=3 --set checkpoint.dir=ck --set checkpoint.every=4 --set checkpoint.keep=5
      --set output.weights=model.h5)
    run reference "" "${ck[@]}" "$@" 2>&1
    /usr/bin/python3 -c "import h5py; a = h5py.File('$work/reference/ck/step-000004.h5', 'r').attrs
print('optimizer_updates', a['optimizer_updates'], 'at step', a['step'])"
    mkdir -p "$work/resumed/ck"
    cp "$work/reference/ck/step-000004.h5" "$work/resumed/ck/"
    run resumed "" "${ck[@]}" --resume "$work/resumed/ck/step-000004.h5" "$@" 2>&1
    same_weights "$work/resumed/model.h5" "$work/reference/model.h5"
    ;;
  *)
    echo "bad_steps.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
exit 0
