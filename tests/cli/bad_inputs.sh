#!/usr/bin/env bash
# The catalogue of bad inputs (bad_inputs.tsv), run at one rank count:
#   bad_inputs.sh GRIDLM RANKS SCRATCH_DIR MPIEXEC [MPIEXEC_ARGS...]
# Each row whose rank counts include RANKS must end every rank within LIMIT seconds with a
# status 1 (docs/errors.md), its message, at most one "gridlm: error" report, no crash (signal, abort
# trace, uncaught exception), no half-written file (*.partial, write probes) left behind, and
# the good model.h5 and metrics.jsonl in the output directory untouched.
#   bad_inputs.sh --markdown   prints the catalogue as the table in docs/errors.md
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
table=$here/bad_inputs.tsv
rows() { grep -v '^#' "$table"; }

if [[ ${1:-} == --markdown ]]; then
  echo "| input | ranks | environment | message (regular expression) | gridlm arguments |"
  echo "| --- | --- | --- | --- | --- |"
  rows | while IFS=$'\t' read -r name ranks env regex args; do
    printf '| %s | %s | %s | `%s` | `%s` |\n' "$name" "$ranks" "${env/#-/}" \
      "${regex//|/\\|}" "${args//|/\\|}"
  done
  exit 0
fi

G=$(realpath "$1") R=$2 W=$3
shift 3
MPIEXEC=("$@")
LIMIT=${GRIDLM_BAD_INPUT_SECONDS:-20}
CFG=$here/configs/tiny_fast.toml
CONFIGS=$here/configs
ROOT=$(cd "$here/../.." && pwd) # the source tree (bench/machines)
OUT=$W/out

# The prepared files: good ones to damage, and damaged ones.
rm -rf "$W" && mkdir -p "$W/dir" "$OUT" || exit 1
"$G" train --config "$CFG" --set train.steps=2 --set output.dir="$W" \
  --set output.weights=good.h5 >/dev/null || { echo "setup: training failed"; exit 1; }
"$G" prepare-data --synthetic --synthetic-documents 300 --vocab-size 128 -o "$W/data.h5" \
  >/dev/null || { echo "setup: prepare-data failed"; exit 1; }
cp "$W/good.h5" "$OUT/model.h5"
# The last run's metrics in the output directory, which a refused run leaves as they were: the
# runs here write metrics.jsonl (tiny_fast.toml with output.metrics set).
sed 's/^metrics = .*/metrics = "metrics.jsonl"/' "$CFG" >"$W/tiny_fast.toml" && CFG=$W/tiny_fast.toml
printf '{"step": 1, "loss": 4.2}\n' >"$OUT/metrics.jsonl"
head -c 3000 "$W/good.h5" >"$W/truncated.h5"
head -c 3000 "$W/data.h5" >"$W/truncated_data.h5"
printf 'step,loss\n1,4.2\n' >"$W/text.csv"
: >"$W/empty.h5"
mkdir -p "$W/ck_empty_latest" && : >"$W/ck_empty_latest/latest" # a save cut short by a crash
# Weights files that training refuses: the first step's gradients, a NaN written over a
# tensor (its checksum fails), a checksum table cut to its first line.
"$G" train --config "$CFG" --set train.steps=1 --set output.dir="$W" \
  --set output.gradients=grads.h5 >/dev/null || { echo "setup: gradients failed"; exit 1; }
# A model whose vocabulary (160) is padded past its tokenizer's 128 pieces.
"$G" train --config "$CFG" --set train.steps=1 --set model.vocab_size=160 \
  --set data.source="$W/data.h5" --set output.dir="$W" --set output.weights=padded.h5 \
  >/dev/null || { echo "setup: the padded model failed"; exit 1; }
cp "$W/good.h5" "$W/nan.h5" && cp "$W/good.h5" "$W/cut_table.h5" && /usr/bin/python3 -c "
import h5py
h5py.File('$W/nan.h5', 'r+')['wte.weight'][0, 0] = float('nan')
f = h5py.File('$W/cut_table.h5', 'r+')
f.attrs['checksums'] = f.attrs['checksums'].splitlines()[0] + '\n'" ||
  { echo "setup: damaging weights with h5py failed"; exit 1; }
# A checkpoint of a run on remade.h5, which is then remade at the same path with fewer documents
# and the same tokenizer; and one of a run on retok.h5 (the same first dataset), remade with
# another tokenizer.
"$G" prepare-data --synthetic --synthetic-documents 300 --vocab-size 128 -o "$W/remade.h5" \
  >/dev/null && cp "$W/remade.h5" "$W/tok.h5" && cp "$W/remade.h5" "$W/retok.h5" &&
  "$G" train --config "$CFG" --set train.steps=2 --set model.vocab_size=128 \
  --set data.source="$W/remade.h5" --set output.dir="$W" --set checkpoint.dir=ck_remade \
  >/dev/null && "$G" prepare-data --synthetic --synthetic-documents 200 --tokenizer "$W/tok.h5" \
  -o "$W/remade.h5" >/dev/null && "$G" train --config "$CFG" --set train.steps=2 \
  --set model.vocab_size=128 --set data.source="$W/retok.h5" --set output.dir="$W" \
  --set checkpoint.dir=ck_retok >/dev/null && "$G" prepare-data --synthetic \
  --synthetic-documents 300 --vocab-size 100 -o "$W/retok.h5" >/dev/null ||
  { echo "setup: the remade datasets failed"; exit 1; }
# A checkpoint whose moments claim more updates than its steps (a damaged attribute).
cp "$W/ck_remade/step-000002.h5" "$W/bad_updates.h5" && /usr/bin/python3 -c "
import h5py
h5py.File('$W/bad_updates.h5', 'r+').attrs['optimizer_updates'] = 5" ||
  { echo "setup: damaging optimizer_updates failed"; exit 1; }
ln -sfn loop "$W/loop" # a path that cannot be looked at: a loop of links
printf 'The cat sat on the mat.\n\nA dog ran in the park.\n' >"$W/corpus.txt"
mkdir -p "$W/corpus_dir" && cp "$W/corpus.txt" "$W/corpus_dir/a.txt"
printf 'The cat sat in the caf\xe9.\n' >"$W/latin1.txt"
head -c 4000 "$G" >"$W/binary.txt"
good_sum=$(md5sum <"$OUT/model.h5") metrics_sum=$(md5sum <"$OUT/metrics.jsonl")

failures=0 ran=0
while IFS=$'\t' read -r name ranks env regex args; do
  [[ ,$ranks, == *,$R,* ]] || continue
  ran=$((ran + 1))
  argv=()
  [[ $args == - ]] || eval "argv=($args)"
  envs=()
  [[ $env == - ]] || envs=("$env")
  start=${EPOCHREALTIME/./}
  out=$(cd "$W" && timeout -k 5 60 env "${envs[@]}" "${MPIEXEC[@]}" -n "$R" "$G" "${argv[@]}" 2>&1 </dev/null)
  rc=$?
  micros=$((${EPOCHREALTIME/./} - start))
  seconds=$((micros / 1000000)).$((micros / 100000 % 10))
  problems=()
  ((rc == 0)) && problems+=("exit status 0")
  ((rc != 0 && rc < 124 && rc != 1)) && problems+=("exit status $rc, not 1 (docs/errors.md)")
  ((rc >= 124)) && problems+=("killed, timed out or signalled (exit status $rc)")
  ((micros > LIMIT * 1000000)) && problems+=("took ${seconds}s, more than ${LIMIT}s")
  grep -Ezq -- "$regex" <<<"$out" || problems+=("message lacks /$regex/")
  grep -Eq 'BAD TERMINATION|Segmentation|terminate called|bad_alloc|core dumped|Assertion' \
    <<<"$out" && problems+=("crashed")
  (($(grep -c 'gridlm: error' <<<"$out") > 1)) && problems+=("more than one error report")
  left=$(find "$W" \( -name '*.partial' -o -name '*.gridlm-write-test' \) -print -delete)
  [[ -z $left ]] || problems+=("left behind: $left")
  [[ $(md5sum <"$OUT/model.h5") == "$good_sum" ]] || {
    problems+=("changed the good model.h5")
    cp "$W/good.h5" "$OUT/model.h5"
  }
  [[ $(md5sum <"$OUT/metrics.jsonl" 2>/dev/null) == "$metrics_sum" ]] || {
    problems+=("changed the last run's metrics.jsonl")
    printf '{"step": 1, "loss": 4.2}\n' >"$OUT/metrics.jsonl"
  }
  if ((${#problems[@]} == 0)); then
    printf 'ok    %-40s %5ss\n' "$name" "$seconds"
  else
    failures=$((failures + 1))
    printf 'FAIL  %-40s %s\n' "$name" "$(IFS=';'; echo "${problems[*]}")"
    printf '%s\n' "$out" | sed 's/^/      | /' | tail -n 8
  fi
done < <(rows)
echo "bad_inputs.sh: $ran inputs at $R rank(s), $failures failed"
((ran > 0 && failures == 0))
