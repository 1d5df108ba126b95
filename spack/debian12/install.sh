#!/usr/bin/env bash
# Installs gridlm with Spack 1.x on a Debian 12 machine without network, as a cluster user
# would install it (spack/spack.yaml's environment, the recipe in spack/spack_repo), against
# Debian's packages as externals (spack/debian12/packages.yaml), then runs the installed binary
# under mpiexec and, when Slurm is installed, under srun on the test cluster of tests/slurm/.
#
#   spack/debian12/install.sh SPACK_ROOT SPACK_PACKAGES CLINGO_SRC WORK_DIR
#
# SPACK_ROOT: a checkout of Spack (tag v1.1.0); SPACK_PACKAGES: a checkout of spack-packages
# (tag v2025.11.0); CLINGO_SRC: clingo's source with its submodules (tag v5.7.1), from which
# Spack's concretizer module is built because no bootstrap source can be downloaded here;
# WORK_DIR: where the configuration, the clingo build and the install tree go (made if missing).
# It never writes into the gridlm checkout except the environment's spack.lock and .spack-env/.
set -euo pipefail

if [[ $# -ne 4 ]]; then
  sed -n '7,13p' "$0" >&2
  exit 2
fi
spack_root=$(realpath "$1")
spack_packages=$(realpath "$2")
clingo_src=$(realpath "$3")
mkdir -p "$4"
work=$(realpath "$4")
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../.." && pwd)
for f in "$spack_root/bin/spack" "$spack_packages/repos/spack_repo/builtin/repo.yaml" \
  "$clingo_src/clasp/libpotassco/CMakeLists.txt"; do
  [[ -f $f ]] || { echo "install.sh: $f is missing: check the three source folders" >&2; exit 2; }
done

step() { echo "== install.sh: $* ($(date +%T))"; }

# Spack's concretizer (clingo) as a Python module of Debian's python3.
pyclingo="$work/clingo/python"
if ! PYTHONPATH="$pyclingo" /usr/bin/python3 -c 'import clingo' 2>/dev/null; then
  step "building clingo's Python module"
  dpkg -s python3-dev python3-cffi >/dev/null 2>&1 || apt-get install -y -q python3-dev python3-cffi
  cmake -S "$clingo_src" -B "$work/clingo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCLINGO_BUILD_APPS=OFF -DCLINGO_BUILD_WITH_LUA=OFF -DCLINGO_BUILD_WITH_PYTHON=ON \
    -DPython_EXECUTABLE=/usr/bin/python3 -DPYCLINGO_INSTALL_DIR="$pyclingo" \
    -DCMAKE_INSTALL_PREFIX="$work/clingo/prefix" >"$work/clingo-configure.log"
  cmake --build "$work/clingo/build" -j "$(nproc)" >"$work/clingo-build.log"
  cmake --install "$work/clingo/build" >"$work/clingo-install.log"
  PYTHONPATH="$pyclingo" /usr/bin/python3 -c 'import clingo; print("clingo", clingo.__version__)'
fi

# Debian's parallel HDF5 lives under mpich-flavour folders; Spack wants one prefix.
prefixes="$work/prefixes"
mkdir -p "$prefixes/hdf5-mpich/bin"
ln -sfn /usr/include/hdf5/mpich "$prefixes/hdf5-mpich/include"
ln -sfn /usr/lib/x86_64-linux-gnu/hdf5/mpich "$prefixes/hdf5-mpich/lib"
for tool in h5pcc h5dump h5ls; do
  ln -sfn "/usr/bin/$tool.mpich" "$prefixes/hdf5-mpich/bin/$tool"
done

# A configuration of its own: no ~/.spack, no bootstrapping, the builtin recipes from disk.
config="$work/config"
mkdir -p "$config"
sed "s|@PREFIX@|$prefixes|" "$here/packages.yaml" >"$config/packages.yaml"
cat >"$config/config.yaml" <<EOF
config:
  install_tree:
    root: $work/opt
  build_stage: [$work/stage]
  source_cache: $work/cache
  misc_cache: $work/misc-cache
  build_jobs: $(nproc)
EOF
cat >"$config/bootstrap.yaml" <<EOF
bootstrap:
  enable: false
EOF
cat >"$config/repos.yaml" <<EOF
repos:
  builtin: $spack_packages/repos/spack_repo/builtin
EOF
export SPACK_PYTHON=/usr/bin/python3
export PYTHONPATH="$pyclingo${PYTHONPATH:+:$PYTHONPATH}"
export SPACK_USER_CONFIG_PATH="$config" SPACK_USER_CACHE_PATH="$work/user-cache"
# A command-line scope (-C) outranks every other one, so the site's own ~/.spack cannot interfere.
spack() { "$spack_root/bin/spack" -C "$config" "$@"; }

step "spack $(spack --version): does gridlm +cuda cuda_arch=90 concretize?"
cuda_config="$work/config-cuda"
mkdir -p "$cuda_config"
cp "$here/packages-cuda.yaml" "$cuda_config/packages.yaml"
printf 'repos:\n  gridlm: %s\n' "$checkout/spack/spack_repo/gridlm" >"$cuda_config/repos.yaml"
cuda_spec=$(spack -C "$cuda_config" spec gridlm@main +cuda +nccl cuda_arch=90)
for dep in "kokkos@" "kokkos-kernels@" "nccl@"; do
  grep -E "\\^$dep[^ ]*.*cuda_arch:?=90" <<<"$cuda_spec" >/dev/null ||
    { echo "$cuda_spec"; echo "install.sh: cuda_arch=90 did not reach $dep" >&2; exit 1; }
done
grep -E "\\^kokkos@[^ ]*.*\\+wrapper" <<<"$cuda_spec" >/dev/null ||
  { echo "install.sh: +cuda did not ask for kokkos+wrapper" >&2; exit 1; }
echo "gridlm +cuda cuda_arch=90: kokkos, kokkos-kernels and nccl get cuda_arch=90"

step "concretizing spack/spack.yaml"
env_dir="$checkout/spack"
spack -e "$env_dir" concretize --fresh --force
step "installing"
spack -e "$env_dir" install --fail-fast
gridlm="$(spack -e "$env_dir" location -i gridlm)/bin/gridlm"
step "installed: $gridlm"

"$gridlm" --version
mpiexec -n 2 "$gridlm" --version
run_dir="$work/run"
rm -rf "$run_dir" && mkdir -p "$run_dir"
(cd "$run_dir" && OPENBLAS_NUM_THREADS=1 mpiexec -n 2 "$gridlm" train --set parallel.dp=2 \
  --set train.steps=5 --set output.dir="\"$run_dir/out\"")
[[ -s $run_dir/out/metrics.jsonl ]] || { echo "install.sh: the 5-step run wrote no metrics" >&2; exit 1; }

if command -v slurmctld >/dev/null && command -v srun >/dev/null; then
  cluster="$work/slurm"
  step "srun on the two-node test cluster of tests/slurm"
  bash "$checkout/tests/slurm/cluster.sh" start "$cluster"
  trap 'bash "$checkout/tests/slurm/cluster.sh" stop "$cluster"' EXIT
  export SLURM_CONF=$cluster/slurm.conf
  srun -N 2 -n 2 --mpi=pmi2 "$gridlm" --version
  srun -N 2 -n 4 --mpi=pmi2 "$gridlm" grid --tp auto
fi
step "done"
