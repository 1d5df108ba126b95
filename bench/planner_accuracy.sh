#!/usr/bin/env bash
# Benchmark: the layout planner's predictions against measured step times. For each model,
# rank count N and m in MICRO: `gridlm profile` at N ranks (tp 1, 2, 4 where they divide N and
# the heads), `gridlm plan --auto` at global batches b x m x dp (b: the model's
# train.micro_batch; dp dividing N), and every ranked layout with dp replicas of m
# micro-batches of b trained STEPS steps, or more where the predicted step is short: enough
# for MIN_SECONDS after the first 2 (a step of tiny at 4 ranks on 2 cores varies by 15% from
# one to the next). The measured step time is the median of metrics.jsonl's ms_per_step after
# the first 2 steps. "planner first" compares, per global batch, the measured layout the
# planner ranked highest with the fastest measured one (among the layouts measured at that
# batch).
# Prints a Markdown table (predicted, measured, error) per layout, the share within 15%, the
# mean absolute error and the share by m, and whether the layout the planner ranks first is
# within 5% of the fastest measured one.
# With REPEATS=K, every layout of an m runs K times, in K passes over them (so that the host's
# drift spreads over all of them), each pass after a profile of its own; predicted and measured
# times are the medians over the passes. With PROFILE_EACH=1, each run's prediction comes from a
# profile taken right before it, as `gridlm train` with a layout key `auto` profiles in its
# first seconds and then trains. The ranking (planner first) comes from the first profile of m.
#   bash bench/planner_accuracy.sh [MODEL[:RANKS,...]]...   (default: tiny:1,2,4 small:1,2)
# Environment: STEPS (8), MIN_SECONDS (2), MICRO ("1 2 4 8 16"), PROFILE_EACH (0), REPEATS (1).
# One BLAS thread per rank.
# Needs build/ (scripts/build.sh).
source "$(dirname "$0")/common.sh"
specs=("$@")
((${#specs[@]})) || specs=(tiny:1,2,4 small:1,2)
steps=${STEPS:-8}
min_seconds=${MIN_SECONDS:-2}
micro=(${MICRO:-1 2 4 8 16})
profile_each=${PROFILE_EACH:-0}
repeats=${REPEATS:-1}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

echo "planner_accuracy: commit $(git rev-parse --short HEAD), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $(nproc --all) cores, $steps steps (at least ${min_seconds} s after the first 2), a profile per $( ((profile_each)) && echo "layout run" || echo "m and pass"), $repeats run(s) per layout"
# The ranked layouts of N ranks with dp replicas of m micro-batches of b, from $out/p.json:
# global batch, rank in the plan, predicted ms, name, flags (tab-separated).
candidates() {
  local n=$1 b=$2 m=$3 dp=$4
  "$gridlm" plan --auto --ranks "$n" --config "$config" --profile "$out/p.json" \
    --global-batch $((b * m * dp)) --json "$out/plan.json" >/dev/null
  /usr/bin/python3 - "$out/plan.json" "$b" "$m" "$dp" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
b, m, dp = (int(x) for x in sys.argv[2:5])
for rank, c in enumerate(plan['ranked']):
    if c['micro_batch'] == b and c['micro_batches'] == m and c['dp'] == dp:
        name = f"dp {c['dp']} x pp {c['pp']} x tp {c['tp']}, {c['schedule']}" + \
            (f" x{c['chunks']}" if c['chunks'] > 1 else '') + f", m {c['micro_batches']}, zero {c['zero']}"
        print(f"{plan['global_batch']}\t{rank}\t{c['step_s'] * 1e3:.2f}\t{name}\t{c['flags']}")
PY
}
# Every ranked layout of N ranks and m micro-batches of b, each dp dividing N, best first per
# global batch (the lines of `candidates`).
predict_all() {
  local dp
  for ((dp = 1; dp <= $1; dp++)); do
    if (($1 % dp == 0)); then candidates "$1" "$2" "$3" "$dp"; fi
  done | sort -u | sort -t$'\t' -k1,1n -k2,2n
}
# $out/p.json: the model profiled at N ranks.
profile() {
  mpiexec -n "$1" "$gridlm" profile --config "$config" --tp "$tp" --micro-batches "$b" \
    -o "$out/p.json" >"$out/profile.log" </dev/null
}
# Trains a layout (N ranks, its flags) for enough steps at its predicted ms; prints the
# median ms per step after the first 2.
measure() {
  local n=$1 pred=$2 flags=$3 n_steps
  n_steps=$(awk -v s="$steps" -v p="$pred" -v t="$min_seconds" \
    'BEGIN { k = int(1000 * t / p + 0.999) + 2; print (k > s ? k : s) }')
  # shellcheck disable=SC2086 # the flags are words
  mpiexec -n "$n" "$gridlm" train --config "$config" $flags --set train.steps="$n_steps" \
    --set train.log_every=1000 --set output.dir="$out/run" --set output.weights= \
    --set output.metrics=m.jsonl >/dev/null </dev/null
  tail -n +3 "$out/run/m.jsonl" | sed -n 's/.*"ms_per_step":\([0-9.e+-]*\).*/\1/p' | median
}

for spec in "${specs[@]}"; do
  model=${spec%%:*}
  IFS=, read -r -a rank_list <<<"${spec#*:}"
  [[ $spec == *:* ]] || rank_list=(1 2)
  config=configs/$model.toml
  b=$(sed -n 's/^micro_batch *= *\([0-9]*\).*/\1/p' "$config")
  heads=$(sed -n 's/^n_head *= *\([0-9]*\).*/\1/p' "$config")
  for n in "${rank_list[@]}"; do
    tp=1
    for t in 2 4; do ((n % t == 0 && heads % t == 0)) && tp+=",$t"; done
    echo
    echo "### $model, $n rank(s)"
    echo "| layout | global batch | predicted ms | measured ms | error |"
    echo "| --- | --- | --- | --- | --- |"
    : >"$out/rows"
    # Per m, a profile right before its layouts run, so that the host's speed moves little
    # between the prediction and the measurement (at 4 ranks on 2 cores it drifts by 10-30% over
    # a quarter of an hour). Each layout with dp replicas at micro-batches of b and m of them: a
    # global batch b x m x dp.
    for m in "${micro[@]}"; do
      profile "$n"
      predict_all "$n" "$b" "$m" >"$out/cands"
      mapfile -t lines <"$out/cands"
      preds=() meas=()
      for ((pass = 0; pass < repeats; pass++)); do
        for i in "${!lines[@]}"; do
          IFS=$'\t' read -r gb rank pred name flags <<<"${lines[$i]}"
          # A later pass, or each run with PROFILE_EACH, predicts from a profile of its own.
          if ((profile_each || (pass > 0 && i == 0))); then
            profile "$n"
            predict_all "$n" "$b" "$m" >"$out/fresh"
          fi
          if ((pass > 0 || profile_each)); then
            fresh=$(awk -F'\t' -v w="$name" '$4 == w { print $3 }' "$out/fresh")
            pred=${fresh:-$pred}
          fi
          preds[$i]+="$pred "
          meas[$i]+="$(measure "$n" "$pred" "$flags") "
        done
      done
      for i in "${!lines[@]}"; do
        IFS=$'\t' read -r gb rank _ name _ <<<"${lines[$i]}"
        pred=$(tr ' ' '\n' <<<"${preds[$i]}" | grep . | median)
        med=$(tr ' ' '\n' <<<"${meas[$i]}" | grep . | median)
        err=$(awk -v p="$pred" -v m="$med" 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
        runs=""
        if ((repeats > 1)); then runs=" (runs: $(printf '%.1f ' ${meas[$i]} | sed 's/ $//'))"; fi
        printf '| %s | %s | %s | %.2f%s | %s |\n' "$name" "$gb" "$pred" "$med" "$runs" "$err"
        printf '%s\t%s\t%s\t%s\t%s\n' "$gb" "$rank" "$pred" "$med" "$m" >>"$out/rows"
      done
    done
    echo "layouts: $(wc -l <"$out/rows")"
    awk -F'\t' '{ e = ($3 - $4) / $4; if (e < 0) e = -e; n++; if (e <= 0.15) ok++ }
      END { printf "within 15%%: %d of %d layouts (%.0f%%)\n", ok, n, 100 * ok / n }' "$out/rows"
    awk -F'\t' '{ e = 100 * ($3 - $4) / $4; a = e < 0 ? -e : e; sum += a; n++
                  if (a > worst) { worst = a; signed = e }
                  if (e < 0) fast++
                  seen[$5]++; if (a <= 15) ok[$5]++ }
      END { printf "mean absolute error %.1f%% (largest %+.1f%%), %d of %d predicted too fast; within 15%% by m:", sum / n, signed, fast, n
            k = split(order, ms, " ")
            for (i = 1; i <= k; i++) if (ms[i] in seen) printf " m = %s: %d of %d;", ms[i], ok[ms[i]], seen[ms[i]]
            printf "\n" }' order="${micro[*]}" "$out/rows"
    # Per global batch: the planner's first against the fastest measured (layouts of different m
    # at one global batch were ranked with their own m's profile).
    awk -F'\t' '{ if (!($1 in best) || $4 < best[$1]) best[$1] = $4
                  if (!($1 in first) || $2 < firstrank[$1]) { first[$1] = $4; firstrank[$1] = $2 } }
      END { for (g in best) printf "global batch %s: planner first %.2f ms, fastest %.2f ms (%+.1f%%)\n",
              g, first[g], best[g], 100 * (first[g] - best[g]) / best[g] }' "$out/rows" | sort -n -k3
  done
done
