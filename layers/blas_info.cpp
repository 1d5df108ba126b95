// Locates the library behind sgemm_ with dlsym and dladdr: looked up at run time, not linked,
// since a Kokkos Kernels that reaches only cuBLAS brings no sgemm_ into the process.
#include "layers/blas_info.hpp"

#include <dlfcn.h>

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

} // namespace gridlm::layers
