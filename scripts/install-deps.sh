#!/usr/bin/env bash
# Installs the Debian packages gridlm needs to build, test and run on one machine.
# Idempotent: quiet and quick when everything is already present. python3-torch is the
# PyTorch reference the tests and benchmarks compare with (run as /usr/bin/python3). clang and
# libclang-rt-dev (libFuzzer and the sanitizer runtimes, only recommended by clang) are for the
# fuzz build (scripts/build.sh fuzz). On anything but Debian/Ubuntu it stops and points at the
# Spack recipe, which is how clusters install gridlm.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  mpich libmpich-dev
  libhdf5-mpich-dev hdf5-tools
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libopenblas-dev libopenblas0-pthread
  libgtest-dev libgmock-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev
  libsentencepiece-dev
  fortunes
  python3 python3-torch python3-h5py python3-numpy
  slurmctld slurmd slurm-client munge
  clang libclang-rt-dev
)

if [[ ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null; then
  echo "install-deps.sh: this is not a Debian-like system (no /etc/debian_version or apt-get)." >&2
  echo "  Install gridlm with Spack instead: spack repo add spack/ && spack install gridlm" >&2
  echo "  (see spack/README.md)." >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

if ((${#missing[@]})); then
  echo "install-deps.sh: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Kokkos Kernels calls whatever libblas.so.3 the alternatives system points at. Point it (and
# LAPACK) at OpenBLAS, or every GEMM silently runs on the reference BLAS, ten times slower.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3; do
  want=$(update-alternatives --list "$lib-$arch" 2>/dev/null | grep openblas-pthread | head -n1 || true)
  have=$(readlink -f "/etc/alternatives/$lib-$arch" 2>/dev/null || true)
  if [[ -n "$want" && "$(readlink -f "$want")" != "$have" ]]; then
    echo "install-deps.sh: pointing $lib at OpenBLAS ($want)"
    "${sudo_cmd[@]}" update-alternatives --quiet --set "$lib-$arch" "$want"
  fi
done

# MPICH must be the MPI that mpiexec and the compiler wrappers name, since HDF5 is built on it.
if ! mpiexec --version 2>/dev/null | grep -qi "hydra\|mpich"; then
  echo "install-deps.sh: pointing mpiexec and mpicc at MPICH"
  "${sudo_cmd[@]}" update-alternatives --quiet --set mpi "/usr/bin/mpicc.mpich" || true
  "${sudo_cmd[@]}" update-alternatives --quiet --set mpirun "/usr/bin/mpirun.mpich" || true
fi
