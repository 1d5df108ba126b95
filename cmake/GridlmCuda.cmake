# The optional GPU build: CUDA device code compiled by nvcc, cuBLAS and NCCL linked. It must
# compile and link on machines without a GPU (CI does exactly that); running needs a GPU.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
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
