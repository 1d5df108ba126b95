# Spack recipe for gridlm (package API v2, Spack 1.x): how clusters install it.
#   spack repo add <gridlm checkout>/spack/spack_repo/gridlm
#   spack env create -d . <gridlm checkout>/spack/spack.yaml && spack -e . install
# spack/README.md has the whole story, including how this recipe was installed and tested.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Gridlm(CMakePackage, CudaPackage):
    """Trains GPT-style language models on a data x pipeline x tensor grid of MPI ranks, from
    token datasets that it writes and reads with parallel HDF5."""

    homepage = "https://github.com/gridlm/gridlm"
    git = "https://github.com/gridlm/gridlm.git"

    # No release tarball exists yet: install from a checkout (spack.yaml's `develop` section, or
    # `spack dev-build gridlm@=main` in the checkout).
    version("main", branch="main")

    # One variant per CMake switch of cmake/GridlmOptions.cmake, with cluster defaults.
    variant(
        "native",
        default=False,
        description="Compile for the build machine's CPU (-march=native); off by default, since "
        "a binary built on a login node may not run on compute nodes of another CPU",
    )
    variant("nccl", default=True, when="+cuda", description="NCCL communication backend")
    variant("tests", default=False, description="Build the GoogleTest suite (ctest)")
    variant("bench", default=False, description="Build the benchmarks under bench/")
    variant("werror", default=False, description="Treat compiler warnings as errors")
    variant(
        "max_test_ranks",
        default="8",
        values=lambda x: x.isdigit() and int(x) > 0,
        when="+tests",
        description="Largest rank count the MPI tests are registered at",
    )

    depends_on("cmake@3.20:", type="build")
    depends_on("c", type="build")  # CMakeLists.txt enables C (MPI's and HDF5's C interfaces)
    depends_on("cxx", type="build")
    depends_on("mpi")
    depends_on("hdf5+mpi")
    depends_on("kokkos@3.4:")
    depends_on("kokkos-kernels@3.4:")
    # gridlm links no BLAS itself: its CPU GEMMs reach one only through Kokkos Kernels' BLAS TPL
    # (off by default in its recipe; without it they run Kokkos Kernels' own, slower kernel).
    depends_on("kokkos-kernels+blas", when="~cuda")
    depends_on("blas")
    depends_on("cli11@2:")
    depends_on("tomlplusplus@3:")
    depends_on("nlohmann-json@3:")
    depends_on("fmt@8:")
    depends_on("sentencepiece")
    depends_on("googletest", type=("build", "test"), when="+tests")
    depends_on("nccl", when="+nccl")
    depends_on("kokkos+cuda+wrapper", when="+cuda")
    depends_on("kokkos-kernels+cuda+cublas", when="+cuda")
    # The GPU architecture reaches every CUDA dependency, as in other Kokkos-based recipes.
    for arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")
        depends_on(f"kokkos-kernels cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")
        depends_on(f"nccl cuda_arch={arch}", when=f"+nccl cuda_arch={arch}")
    conflicts("+cuda", when="cuda_arch=none", msg="give the GPU architecture, e.g. cuda_arch=90")

    def cmake_args(self):
        args = [
            self.define_from_variant("GRIDLM_ENABLE_CUDA", "cuda"),
            self.define_from_variant("GRIDLM_ENABLE_NCCL", "nccl"),
            self.define_from_variant("GRIDLM_BUILD_TESTS", "tests"),
            self.define_from_variant("GRIDLM_BUILD_BENCH", "bench"),
            self.define_from_variant("GRIDLM_WARNINGS_AS_ERRORS", "werror"),
            self.define_from_variant("GRIDLM_NATIVE_ARCH", "native"),
        ]
        if self.spec.satisfies("+tests"):
            args.append(self.define_from_variant("GRIDLM_MAX_TEST_RANKS", "max_test_ranks"))
        if self.spec.satisfies("+cuda"):
            # Kokkos' compiler wrapper compiles the Kokkos code for the device; nvcc is the
            # spec's CUDA, wherever Spack or a module put it.
            args.append(self.define("CMAKE_CXX_COMPILER", self["kokkos"].kokkos_cxx))
            args.append(self.define("CMAKE_CUDA_COMPILER", self.spec["cuda"].prefix.bin.nvcc))
            archs = self.spec.variants["cuda_arch"].value
            args.append(self.define("GRIDLM_CUDA_ARCHITECTURES", ";".join(archs)))
        if self.spec.satisfies("+nccl"):
            args.append(self.define("NCCL_ROOT", self.spec["nccl"].prefix))
        return args

    def check(self):
        # `spack install --test=root gridlm+tests` runs the suite that CI runs.
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "-LE", "slurm")
