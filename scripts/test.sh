#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what gridlm needs, builds the CPU
# configuration and runs every CTest test (unit, MPI at 1-8 ranks, command line, repository
# checks), after building the CUDA + NCCL configuration too, to prove it compiles and links. Its GPU
# tests need a GPU and are not run here (ctest -L gpu in build-cuda/ runs them on a GPU node).
# Then the sanitizer build (gcc, ASan + UBSan): the unit and MPI tests at 1 and 2 ranks again.
# Last, the fuzz build (clang): the dataset reader's fuzz target runs under libFuzzer for a
# minute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh cpu

nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ -x $nvcc ]]; then
  echo "test.sh: building the CUDA + NCCL configuration (compile and link only)"
  bash scripts/build.sh cuda
  echo "test.sh: CUDA + NCCL build OK"
elif [[ ${CI:-} == true ]]; then
  echo "test.sh: CI needs the CUDA build, but there is no nvcc at $nvcc" >&2
  exit 1
else
  echo "test.sh: no nvcc at $nvcc: CUDA build not checked (set CUDACXX to check it)"
fi

# The sanitizer build compiles meanwhile at the lowest priority: the suite leaves about a third
# of the cores' time idle (ranks waiting on each other, on Slurm, on time limits), and a niced
# compiler takes only that, so the suite's timings are what they would be without it.
# Not setsid: a new session is a new scheduler autogroup, which gets an equal share of the CPU
# whatever its nice value. Job control (set -m) gives the build its own process group instead.
echo "test.sh: building the sanitizer configuration (build-sanitize/) at nice 19 while the suite runs"
set -m
nice -n 19 bash scripts/build.sh sanitize >build-sanitize.log 2>&1 &
sanitize_build=$!
set +m

# 8 ranks oversubscribe 2 cores; tests stay correct, only slower.
suite=0
ctest --test-dir build --output-on-failure --parallel "$(nproc)" -LE gpu || suite=$?
if [[ $suite != 0 ]]; then
  kill -- "-$sanitize_build" 2>/dev/null || true # its process group: the compilers too
  exit "$suite"
fi

# Every unit and MPI test at 1 and 2 ranks under AddressSanitizer and UndefinedBehaviorSanitizer
# (build-sanitize/): the first fault a sanitizer finds fails its test with the report.
if ! wait "$sanitize_build"; then
  cat build-sanitize.log >&2
  echo "test.sh: the sanitizer build failed (build-sanitize.log above)" >&2
  exit 1
fi
echo "test.sh: running the unit and MPI tests at 1 and 2 ranks under ASan and UBSan"
ctest --test-dir build-sanitize --output-on-failure --parallel "$(nproc)" -L 'unit|mpi' \
  -R "${GRIDLM_SANITIZE_TESTS:-\.np[12]\$}"

# The fuzz target of the dataset reader (tests/fuzz), under libFuzzer, ASan and UBSan for
# GRIDLM_FUZZ_SECONDS (60 unless configured otherwise), after half a minute to build (2 cores).
if command -v clang++ >/dev/null; then
  echo "test.sh: building the fuzz configuration and fuzzing (build-fuzz/)"
  bash scripts/build.sh fuzz
  ctest --test-dir build-fuzz --output-on-failure -L fuzz
elif [[ ${CI:-} == true ]]; then
  echo "test.sh: CI needs the fuzz build, but there is no clang++" >&2
  exit 1
else
  echo "test.sh: no clang++: fuzz target not run (its replay test in build/ checked the seeds)"
fi
