#!/usr/bin/env bash
# Configures and builds gridlm. Usage:
#   scripts/build.sh [cpu|cuda|fuzz|sanitize] [extra cmake args...]
#   cpu  (default) -> build/           the CPU build: MPI + Kokkos Serial + OpenBLAS
#   cuda           -> build-cuda/      adds the CUDA runtime, NCCL and the gpu tests (needs nvcc)
#   fuzz           -> build-fuzz/      the fuzz targets alone, with clang, libFuzzer, ASan, UBSan
#   sanitize       -> build-sanitize/  the CPU build's unit and MPI tests at 1 and 2 ranks (label
#                                      sanitize), with ASan and UBSan (gcc, -O1)
# Warnings are errors, as in CI. Re-running only rebuilds what changed. GRIDLM_BUILD_TARGETS
# ("gridlm test_nccl_comm") builds only those targets and what they need.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-cpu}
shift || true
jobs=${GRIDLM_BUILD_JOBS:-$(nproc)}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

case $flavour in
  cpu) dir=build; flags=() ;;
  cuda)
    dir=build-cuda
    nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
    if [[ ! -x $nvcc ]]; then
      echo "build.sh: no CUDA compiler at $nvcc; set CUDACXX to nvcc's path" >&2
      exit 1
    fi
    flags=(-DGRIDLM_ENABLE_CUDA=ON -DGRIDLM_ENABLE_NCCL=ON -DCMAKE_CUDA_COMPILER="$nvcc")
    ;;
  fuzz)
    dir=build-fuzz
    clangxx=${GRIDLM_FUZZ_CXX:-clang++}
    if ! command -v "$clangxx" >/dev/null; then
      echo "build.sh: no clang++ for the fuzz build; install it (scripts/install-deps.sh) or set" \
        "GRIDLM_FUZZ_CXX to its path" >&2
      exit 1
    fi
    # Portable code: sanitizer builds are for finding faults, not for speed.
    flags=(-DGRIDLM_BUILD_FUZZ=ON -DCMAKE_CXX_COMPILER="$clangxx" -DGRIDLM_NATIVE_ARCH=OFF)
    ;;
  sanitize)
    dir=build-sanitize
    # -O1: sanitizer builds are for finding faults; asserts stay on (no NDEBUG).
    flags=(-DGRIDLM_SANITIZE=ON -DGRIDLM_BUILD_BENCH=OFF -DGRIDLM_NATIVE_ARCH=OFF
      "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1" "-DCMAKE_C_FLAGS_RELEASE=-O1 -g1")
    ;;
  *) echo "build.sh: unknown flavour '$flavour'; use cpu, cuda, fuzz or sanitize" >&2; exit 2 ;;
esac

# ccache, when installed (GRIDLM_CCACHE=0 turns it off), lets the CUDA check build reuse the CPU
# build's objects: in its preprocessor mode a file whose preprocessed text is the same hits, and
# only the few that see CUDA, NCCL or version.hpp compile again (167 s down to about 40 s here).
# Its cache lives in build-ccache/ unless CCACHE_DIR says otherwise, so a fresh clone starts cold;
# the launcher carries the setting, so that ninja run by hand in a build folder uses it too.
# The sanitizer and fuzz builds share no object with another, so they go without it.
launcher=()
if [[ ${GRIDLM_CCACHE:-1} != 0 && ($flavour == cpu || $flavour == cuda) ]] &&
  command -v ccache >/dev/null; then
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_DIR=${CCACHE_DIR:-$PWD/build-ccache};CCACHE_BASEDIR=$PWD;ccache")
fi

# A Kokkos given anew must replace the one the folder found before (CI configures build-cuda
# against Debian's): find_package keeps a cached Kokkos_DIR whatever Kokkos_ROOT says.
forget=()
for arg in "$@"; do
  if [[ $arg == -DKokkos_ROOT=* || $arg == -DKokkosKernels_ROOT=* || $arg == -DKokkos_DIR=* ||
    $arg == -DKokkosKernels_DIR=* || $arg == -DCMAKE_PREFIX_PATH=* ]]; then
    forget=(-UKokkos_DIR -UKokkosKernels_DIR -Ugridlm_kokkos_include_dir
      -Ugridlm_kokkoskernels_include_dir)
  fi
done
# Configured once; again when CMake arguments are given (they would be ignored otherwise).
if [[ ! -f $dir/CMakeCache.txt || $# -gt 0 ]]; then
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGRIDLM_WARNINGS_AS_ERRORS=ON "${launcher[@]}" "${flags[@]}" "${forget[@]}" "$@" \
    >"$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log" >&2
    exit 1
  }
  # What was found (which Kokkos, its backend), for the user to see without opening the log.
  grep -E '^-- gridlm: ' "$dir.configure.log" || true
fi
targets=()
if [[ -n ${GRIDLM_BUILD_TARGETS:-} ]]; then
  read -r -a targets <<<"$GRIDLM_BUILD_TARGETS"
  targets=(--target "${targets[@]}")
elif [[ $flavour == sanitize ]]; then
  # Only the executables of the tests labelled sanitize (tests/CMakeLists.txt), which
  # scripts/test.sh runs in this build; configured again first, so the list is today's.
  cmake -S . -B "$dir" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log" >&2; exit 1; }
  mapfile -t targets < <(ctest --test-dir "$dir" -N -L sanitize |
    sed -nE 's/^ *Test +#[0-9]+: ([A-Za-z0-9_]+)\.np[0-9]+$/\1/p' | sort -u)
  [[ ${#targets[@]} -gt 0 ]] || { echo "build.sh: no tests to build in $dir" >&2; exit 1; }
  targets=(--target "${targets[@]}")
fi
cmake --build "$dir" --parallel "$jobs" "${targets[@]}"
