// Locates the library behind sgemm_ with dlsym and dladdr: looked up at run time, not linked,
// since a Kokkos Kernels that reaches only cuBLAS brings no sgemm_ into the process.
#include "layers/blas_info.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace gridlm::layers {

std::string blas_library_path() {
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info{};
  if (sgemm == nullptr || dladdr(sgemm, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX] = {};
  if (realpath(info.dli_fname, resolved) == nullptr) return info.dli_fname;
  return resolved;
}

bool is_reference_blas(const std::string& path) {
  // Debian's netlib build lives in .../blas/; elsewhere (Spack's netlib-lapack) a bare
  // libblas.so that names no optimised implementation is the reference one too.
  if (path.find("/blas/libblas") != std::string::npos) return true;
  if (path.find("libblas.so") == std::string::npos) return false;
  for (const char* fast : {"openblas", "blis", "mkl", "atlas", "armpl", "cray"}) {
    if (path.find(fast) != std::string::npos) return false;
  }
  return true;
}

int blas_threads() {
  using Get = int (*)();
  const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get != nullptr ? std::max(1, get()) : 1;
}

bool default_blas_threads(int threads) {
  // Set means a count OpenBLAS takes: a positive whole number (it ignores '', 0 or 'abc').
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    char* end = nullptr;
    if (value != nullptr && std::strtol(value, &end, 10) > 0 && end != value) return false;
  }
  using Set = void (*)(int);
  const auto set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(std::max(1, threads));
  return true;
}

} // namespace gridlm::layers
