#!/usr/bin/env bash
# Packs a CUDA build of gridlm for a GPU machine that has CUDA, its driver and Python but none of
# gridlm's other libraries (MPICH, parallel HDF5, OpenBLAS, SentencePiece, ...), such as the
# `device` machines of this workplace: the executables (gridlm, the GPU tests, the unit tests that
# run on device memory, the GEMM benchmark, MPICH's launcher),
# every shared library they load except the C runtime and CUDA's own (the machine brings those:
# the driver's libcuda, and cudart, cuBLAS and NCCL of its CUDA), the benchmark configurations,
# and the fp32 losses of this machine's CPU build for bench/gpu_check.sh to compare against.
# One xz tarball, small enough to travel with the working tree (64 MiB).
# Usage: bench/gpu_bundle.sh CUDA_BUILD_DIR CPU_GRIDLM OUT.tar.xz
#   CUDA_BUILD_DIR: configured with -DGRIDLM_ENABLE_CUDA=ON, a CUDA Kokkos (docs/gpu.md) and
#   -DGRIDLM_NATIVE_ARCH=OFF (the GPU machine's processor may lack this one's instructions);
#   GPU_BUNDLE_ANY_ARCH=1 skips both checks, to try the bundle with a CPU build on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 cpu_gridlm=$2 out=$3
gpu_unit_tests="test_gemm test_gradcheck test_gpt test_bf16 test_attention test_sampler"
if [[ -z ${GPU_BUNDLE_ANY_ARCH:-} ]] && grep -q '^GRIDLM_NATIVE_ARCH:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "gpu_bundle: $build is built for this processor (GRIDLM_NATIVE_ARCH=ON); reconfigure" \
    "with -DGRIDLM_NATIVE_ARCH=OFF" >&2
  exit 1
fi
# A build against a Kokkos without CUDA (Debian's, or a folder configured before the CUDA Kokkos
# was given) links CUDA and NCCL but runs the model on the CPU: every check would pass on the CPU.
if [[ -z ${GPU_BUNDLE_ANY_ARCH:-} ]] && ! grep -q '^GRIDLM_KOKKOS_CUDA:INTERNAL=ON' "$build/CMakeCache.txt"; then
  echo "gpu_bundle: $build is built against a Kokkos without the CUDA backend (its model would run" \
    "on the CPU); configure it with -DKokkos_ROOT=<a CUDA Kokkos> (docs/gpu.md)" >&2
  exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/configs" "$stage/reference"
bins=("$build/bin/gridlm" "$(readlink -f "$(command -v mpiexec)")" "$(command -v hydra_pmi_proxy)")
[[ -x $build/tests/gpu/test_nccl_comm ]] && bins+=("$build/tests/gpu/test_nccl_comm")
[[ -x $build/bin/bench_sgemm_peak ]] && bins+=("$build/bin/bench_sgemm_peak")
# The unit tests whose kernels read and write only device memory (tests/device_buffer.hpp).
for t in $gpu_unit_tests; do
  [[ -x $build/tests/$t ]] && bins+=("$build/tests/$t")
done
cp "${bins[@]}" "$stage/bin/"
ln -s "$(basename "${bins[1]}")" "$stage/bin/mpiexec"
# The libraries they load, but not those the GPU machine must provide itself.
# The GPU machine's C++ runtime is newer and serves programs built against this one.
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for b in "${bins[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] || cp -L "$lib" "$stage/lib/$name"
done
cp configs/*.toml "$stage/configs/"
# The CPU's fp32 losses of the run gpu_check.sh repeats on the GPU (the same configuration).
OPENBLAS_NUM_THREADS=2 "$cpu_gridlm" train --config configs/tiny.toml --set train.steps=20 \
  --set output.dir="$stage/reference/tiny" --set output.weights= >"$stage/reference/tiny.log"
git rev-parse --short HEAD >"$stage/commit"
tar -C "$stage" -cJf "$out" .
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1)), commit $(cat "$stage/commit"): $(ls "$stage/bin" | tr '\n' ' ')and $(ls "$stage/lib" | wc -l) libraries"
