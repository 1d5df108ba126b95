// Which BLAS library the process really calls: Kokkos Kernels uses whatever libblas.so.3 the
// system points at, and the reference BLAS is ten times slower than OpenBLAS. Reported by
// `gridlm --version` and checked by the tests.
#pragma once

#include <string>

namespace gridlm::layers {

// Resolved path of the shared library that provides sgemm_, or "" if it cannot be told or no
// library in the process provides it (GEMMs through cuBLAS alone).
std::string blas_library_path();

// True for the netlib reference implementation (Debian's /usr/lib/<arch>/blas/libblas.so.3).
bool is_reference_blas(const std::string& path);

} // namespace gridlm::layers
