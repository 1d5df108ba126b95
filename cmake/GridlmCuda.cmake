# The optional GPU build: the CUDA runtime (CUDA::cudart) and NCCL linked into gridlm::parallel
# for the NCCL communication backend, and nvcc for the GPU tests' kernels (tests/gpu). gridlm
# links no cuBLAS itself: its GEMMs go through Kokkos Kernels, which can reach cuBLAS only when
# built with that TPL for a CUDA Kokkos (what the Spack recipe's +cuda asks for); the CUDA check
# build of scripts/build.sh, against Debian's Serial Kokkos, does not use it at all. It must
# compile and link on machines without a GPU (CI does exactly that); running needs a GPU.
# nvcc: CMAKE_CUDA_COMPILER, else $CUDACXX, else the one on PATH (a module's, Spack's); only
# when there is none of them the usual /usr/local/cuda.
find_program(gridlm_nvcc_on_path nvcc)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND NOT gridlm_nvcc_on_path
   AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
set(CMAKE_CUDA_ARCHITECTURES ${GRIDLM_CUDA_ARCHITECTURES})
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

if(GRIDLM_ENABLE_NCCL)
  find_path(gridlm_nccl_include_dir nccl.h
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(gridlm_nccl_library nccl
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(NOT gridlm_nccl_include_dir OR NOT gridlm_nccl_library)
    message(FATAL_ERROR "NCCL not found (nccl.h, libnccl). Set -DNCCL_ROOT=/path/to/nccl, "
                        "or build without it: -DGRIDLM_ENABLE_NCCL=OFF.")
  endif()
  add_library(gridlm_nccl INTERFACE)
  add_library(gridlm::nccl ALIAS gridlm_nccl)
  target_include_directories(gridlm_nccl INTERFACE ${gridlm_nccl_include_dir})
  target_link_libraries(gridlm_nccl INTERFACE ${gridlm_nccl_library} CUDA::cudart)
  message(STATUS "gridlm: NCCL ${gridlm_nccl_library}")
endif()
