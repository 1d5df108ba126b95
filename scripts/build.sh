#!/usr/bin/env bash
# Configures and builds gridlm. Usage: scripts/build.sh [cpu|cuda|fuzz] [extra cmake args...]
#   cpu  (default) -> build/       the CPU build: MPI + Kokkos Serial + OpenBLAS
#   cuda           -> build-cuda/  adds the CUDA runtime, NCCL and the gpu tests (needs nvcc)
#   fuzz           -> build-fuzz/  the fuzz targets alone, with clang, libFuzzer, ASan, UBSan
# Warnings are errors, as in CI. Re-running only rebuilds what changed.
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
  *) echo "build.sh: unknown flavour '$flavour'; use cpu, cuda or fuzz" >&2; exit 2 ;;
esac

if [[ ! -f $dir/CMakeCache.txt ]]; then
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGRIDLM_WARNINGS_AS_ERRORS=ON "${flags[@]}" "$@" >"$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log" >&2
    exit 1
  }
fi
cmake --build "$dir" --parallel "$jobs"
