// Which BLAS library the process really calls: Kokkos Kernels uses whatever libblas.so.3 the
// system points at, and the reference BLAS is ten times slower than OpenBLAS. Reported by
// `gridlm --version` and checked by the tests; and how many threads it computes with.
#pragma once

#include <string>

namespace gridlm::layers {

// Resolved path of the shared library that provides sgemm_, or "" if it cannot be told or no
// library in the process provides it (GEMMs through cuBLAS alone).
std::string blas_library_path();

// True for the netlib reference implementation (Debian's /usr/lib/<arch>/blas/libblas.so.3).
bool is_reference_blas(const std::string& path);

// The threads the BLAS library computes a product with: OpenBLAS's count (its
// openblas_get_num_threads, looked up at run time), 1 for a library that does not say.
int blas_threads();

// OpenBLAS left to choose (none of OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS set)
// starts a thread per CPU it sees in every rank, so ranks sharing a node would run several
// threads on each core: then its count is set to `threads`. Returns whether it set it.
bool default_blas_threads(int threads);

} // namespace gridlm::layers
