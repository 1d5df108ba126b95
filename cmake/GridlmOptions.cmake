# The build's switches, and a guard against misspelled ones: CMake silently ignores an unknown
# -D variable, so -DGRIDLM_ENABLE_CUAD=ON would quietly build without CUDA. We refuse instead.
set(_gridlm_known_options
  GRIDLM_ENABLE_CUDA GRIDLM_ENABLE_NCCL GRIDLM_WARNINGS_AS_ERRORS GRIDLM_BUILD_TESTS
  GRIDLM_BUILD_BENCH GRIDLM_MAX_TEST_RANKS GRIDLM_CUDA_ARCHITECTURES GRIDLM_NATIVE_ARCH
  GRIDLM_BUILD_FUZZ GRIDLM_FUZZ_SECONDS GRIDLM_SANITIZE)

option(GRIDLM_ENABLE_CUDA "Build with the CUDA runtime and the GPU tests (needs nvcc)" OFF)
option(GRIDLM_ENABLE_NCCL "Build the NCCL communication backend (needs CUDA)" OFF)
option(GRIDLM_WARNINGS_AS_ERRORS "Treat compiler warnings as errors (CI builds)" OFF)
option(GRIDLM_BUILD_TESTS "Build the GoogleTest suite and register it in CTest" ON)
option(GRIDLM_BUILD_BENCH "Build the benchmarks under bench/" ON)
option(GRIDLM_NATIVE_ARCH "Compile for this machine's CPU (-march=native); off for portable binaries" ON)
option(GRIDLM_BUILD_FUZZ
  "Fuzz build (clang): only the libraries the fuzz targets reach, with ASan, UBSan and libFuzzer"
  OFF)
option(GRIDLM_SANITIZE
  "Build with AddressSanitizer and UndefinedBehaviorSanitizer (gcc or clang), for the test suite"
  OFF)
set(GRIDLM_MAX_TEST_RANKS 8 CACHE STRING "Largest rank count MPI tests are registered at")
set(GRIDLM_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for")
set(GRIDLM_FUZZ_SECONDS 60 CACHE STRING "How long CTest runs each libFuzzer target (fuzz build)")

get_cmake_property(_gridlm_cache_vars CACHE_VARIABLES)
foreach(_var IN LISTS _gridlm_cache_vars)
  get_property(_type CACHE ${_var} PROPERTY TYPE)
  if(_var MATCHES "^GRIDLM_" AND NOT _type STREQUAL "INTERNAL"
     AND NOT _var IN_LIST _gridlm_known_options)
    string(REPLACE ";" ", " _known "${_gridlm_known_options}")
    message(FATAL_ERROR "Unknown option -D${_var}. gridlm's options are: ${_known}. "
                        "Fix the spelling, or remove the entry from CMakeCache.txt.")
  endif()
endforeach()

foreach(_opt GRIDLM_ENABLE_CUDA GRIDLM_ENABLE_NCCL GRIDLM_WARNINGS_AS_ERRORS GRIDLM_BUILD_TESTS
             GRIDLM_BUILD_BENCH GRIDLM_NATIVE_ARCH GRIDLM_BUILD_FUZZ GRIDLM_SANITIZE)
  string(TOUPPER "${${_opt}}" _val)
  if(NOT _val MATCHES "^(ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
    message(FATAL_ERROR "-D${_opt}=${${_opt}} is not a switch: use ON or OFF.")
  endif()
endforeach()

if(NOT GRIDLM_MAX_TEST_RANKS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "-DGRIDLM_MAX_TEST_RANKS=${GRIDLM_MAX_TEST_RANKS} must be a positive integer.")
endif()

if(NOT GRIDLM_FUZZ_SECONDS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "-DGRIDLM_FUZZ_SECONDS=${GRIDLM_FUZZ_SECONDS} must be a positive integer.")
endif()

if(GRIDLM_BUILD_FUZZ AND GRIDLM_ENABLE_CUDA)
  message(FATAL_ERROR "-DGRIDLM_BUILD_FUZZ=ON is a build of its own (scripts/build.sh fuzz): "
                      "configure it without -DGRIDLM_ENABLE_CUDA=ON.")
endif()

if(GRIDLM_SANITIZE AND (GRIDLM_BUILD_FUZZ OR GRIDLM_ENABLE_CUDA))
  message(FATAL_ERROR "-DGRIDLM_SANITIZE=ON is a CPU build of its own (scripts/build.sh sanitize): "
                      "configure it without -DGRIDLM_BUILD_FUZZ=ON and -DGRIDLM_ENABLE_CUDA=ON "
                      "(the fuzz build has the sanitizers already).")
endif()

if(GRIDLM_ENABLE_NCCL AND NOT GRIDLM_ENABLE_CUDA)
  message(FATAL_ERROR "-DGRIDLM_ENABLE_NCCL=ON needs -DGRIDLM_ENABLE_CUDA=ON as well.")
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
