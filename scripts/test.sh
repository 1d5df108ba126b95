#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what gridlm needs, builds the CPU
# configuration and runs every CTest test (unit, MPI at 1-8 ranks, command line, repository
# checks), after building the CUDA + NCCL configuration too, to prove it compiles and links. Its GPU
# tests need a GPU and are not run here (ctest -L gpu in build-cuda/ runs them on a GPU node).
# Then the sanitizer build (gcc, ASan + UBSan) runs the unit and MPI tests at 1 and 2 ranks
# again, while the fuzz build (clang) fuzzes the dataset reader under libFuzzer for a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh cpu

nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ -x $nvcc ]]; then
  # The executable and the GPU tests: all the code that differs with CUDA and NCCL
  # (engine/comm_backend.cpp, parallel/'s NCCL backend, tests/gpu), linked against CUDA.
  echo "test.sh: building the CUDA + NCCL configuration (compile and link only)"
  GRIDLM_BUILD_TARGETS="gridlm test_nccl_comm" bash scripts/build.sh cuda
  echo "test.sh: CUDA + NCCL build OK"
elif [[ ${CI:-} == true ]]; then
  echo "test.sh: CI needs the CUDA build, but there is no nvcc at $nvcc" >&2
  exit 1
else
  echo "test.sh: no nvcc at $nvcc: CUDA build not checked (set CUDACXX to check it)"
fi

fuzz=false
if command -v clang++ >/dev/null; then
  fuzz=true
elif [[ ${CI:-} == true ]]; then
  echo "test.sh: CI needs the fuzz build, but there is no clang++" >&2
  exit 1
else
  echo "test.sh: no clang++: fuzz target not run (its replay test in build/ checked the seeds)"
fi

# The sanitizer and fuzz builds compile meanwhile at the lowest priority: the suite leaves about
# a third of the cores' time idle (ranks waiting on each other, on Slurm, on time limits), and
# a niced compiler mostly takes only that. Not setsid: a new session is a new scheduler
# autogroup, which gets an equal share of the CPU whatever its nice value. Job control (set -m)
# gives the builds their own process group instead, so that a failure can stop them.
echo "test.sh: building the sanitizer and fuzz configurations at nice 19 while the suite runs" \
  "(build-extras.log)"
set -m
(
  renice -n 19 -p "$BASHPID" >/dev/null
  bash scripts/build.sh sanitize
  if $fuzz; then bash scripts/build.sh fuzz; fi
) >build-extras.log 2>&1 &
extras=$!
set +m

# 8 ranks oversubscribe 2 cores; tests stay correct, only slower.
suite=0
ctest --test-dir build --output-on-failure --parallel "$(nproc)" -LE gpu || suite=$?
if [[ $suite != 0 ]]; then
  kill -- "-$extras" 2>/dev/null || true # its process group: the compilers too
  exit "$suite"
fi
if ! wait "$extras"; then
  cat build-extras.log >&2
  echo "test.sh: the sanitizer or fuzz build failed (build-extras.log above)" >&2
  exit 1
fi

# The fuzz target of the dataset reader (tests/fuzz), under libFuzzer, ASan and UBSan for
# GRIDLM_FUZZ_SECONDS (60 unless configured otherwise), one process beside the sanitizer tests,
# which leave more than half of the two cores idle.
if $fuzz; then
  echo "test.sh: fuzzing the dataset reader (build-fuzz/, build-fuzz.log) beside the sanitizer tests"
  ctest --test-dir build-fuzz --output-on-failure -L fuzz >build-fuzz.log 2>&1 &
  fuzzing=$!
fi

# Every unit and MPI test at 1 and 2 ranks under AddressSanitizer and UndefinedBehaviorSanitizer
# (build-sanitize/): the first fault a sanitizer finds fails its test with the report.
echo "test.sh: running the unit and MPI tests at 1 and 2 ranks under ASan and UBSan"
sanitized=0
ctest --test-dir build-sanitize --output-on-failure --parallel "$(nproc)" -L sanitize ||
  sanitized=$?

fuzzed=0
if $fuzz; then
  wait "$fuzzing" || fuzzed=$?
  cat build-fuzz.log
fi
[[ $sanitized == 0 && $fuzzed == 0 ]] || exit 1
