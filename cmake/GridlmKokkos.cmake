# Finds Kokkos and Kokkos Kernels and hands the rest of the build two targets that work the
# same with Kokkos 4.x (Spack: Kokkos::kokkos, Kokkos::kokkoskernels) and with Debian's
# Trilinos-bundled Kokkos 3.4, whose package config points its include directory at a path
# that does not exist (/usr/lib/include). We repair the imported targets here, never the
# system files:
#   gridlm::kokkos         Kokkos core, containers, algorithms
#   gridlm::kokkoskernels  Kokkos Kernels (BLAS through the vendor library)

find_package(Kokkos REQUIRED)
find_package(KokkosKernels REQUIRED)

# Where Kokkos_Core.hpp really lives, for the repair below and the version. Kokkos 4 sets no
# Kokkos_INCLUDE_DIRS: its headers are under the prefix of its package config
# (PREFIX/lib/cmake/Kokkos), searched before Debian's folder, so that a Kokkos 4 given by
# Kokkos_ROOT is not reported (nor versioned) as the system's 3.4.
get_filename_component(_gridlm_kokkos_prefix "${Kokkos_DIR}/../../.." ABSOLUTE)
get_filename_component(_gridlm_kk_prefix "${KokkosKernels_DIR}/../../.." ABSOLUTE)
find_path(gridlm_kokkos_include_dir Kokkos_Core.hpp
  HINTS ${Kokkos_INCLUDE_DIRS} ${KokkosCore_INCLUDE_DIRS} ${_gridlm_kokkos_prefix}/include
        /usr/include/trilinos
  DOC "Directory holding Kokkos_Core.hpp")
find_path(gridlm_kokkoskernels_include_dir KokkosBlas3_gemm.hpp
  HINTS ${KokkosKernels_INCLUDE_DIRS} ${_gridlm_kk_prefix}/include ${gridlm_kokkos_include_dir}
  DOC "Directory holding KokkosBlas3_gemm.hpp")
if(NOT gridlm_kokkos_include_dir OR NOT gridlm_kokkoskernels_include_dir)
  message(FATAL_ERROR "Kokkos or Kokkos Kernels headers not found (Kokkos_Core.hpp, "
                      "KokkosBlas3_gemm.hpp). On Debian: scripts/install-deps.sh; with Spack: "
                      "spack install kokkos-kernels. Or set -DKokkos_ROOT / -DKokkosKernels_ROOT.")
endif()

# Replace include directories that do not exist by the one that does.
function(_gridlm_repair_includes target)
  get_target_property(_aliased ${target} ALIASED_TARGET)
  if(_aliased)
    set(target ${_aliased})
  endif()
  get_target_property(_dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _dirs)
    set(_dirs "")
  endif()
  set(_kept "")
  set(_dropped FALSE)
  foreach(_d IN LISTS _dirs)
    if(_d MATCHES "^\\$<" OR EXISTS "${_d}")
      list(APPEND _kept "${_d}")
    else()
      set(_dropped TRUE)
    endif()
  endforeach()
  if(_dropped)
    message(STATUS "gridlm: repairing ${target}: include dirs '${_dirs}' do not exist; using "
                   "${gridlm_kokkos_include_dir}")
  endif()
  list(APPEND _kept "${gridlm_kokkos_include_dir}")
  list(REMOVE_DUPLICATES _kept)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kept}")
endfunction()

add_library(gridlm_kokkos INTERFACE)
add_library(gridlm::kokkos ALIAS gridlm_kokkos)
add_library(gridlm_kokkoskernels INTERFACE)
add_library(gridlm::kokkoskernels ALIAS gridlm_kokkoskernels)

if(TARGET Kokkos::kokkoskernels)
  # Kokkos 4.x (and 3.x standalone installs): the targets are sound as installed.
  target_link_libraries(gridlm_kokkos INTERFACE Kokkos::kokkos)
  target_link_libraries(gridlm_kokkoskernels INTERFACE Kokkos::kokkoskernels gridlm_kokkos)
elseif(TARGET trilinos_kokkoskernels)
  # Debian/Trilinos 13.x: Kokkos::kokkos carries the broken include dir; the per-package
  # targets carry none at all.
  _gridlm_repair_includes(Kokkos::kokkos)
  foreach(_t trilinos_kokkoscore trilinos_kokkoscontainers trilinos_kokkosalgorithms
             trilinos_kokkoskernels)
    if(TARGET ${_t})
      _gridlm_repair_includes(${_t})
    endif()
  endforeach()
  target_link_libraries(gridlm_kokkos INTERFACE Kokkos::kokkos)
  target_link_libraries(gridlm_kokkoskernels INTERFACE trilinos_kokkoskernels gridlm_kokkos)
else()
  message(FATAL_ERROR "Found Kokkos Kernels (${KokkosKernels_DIR}) but neither the target "
                      "Kokkos::kokkoskernels nor trilinos_kokkoskernels: unsupported install.")
endif()

# Version, for --version and for code that must bridge 3.x and 4.x APIs.
file(STRINGS "${gridlm_kokkos_include_dir}/KokkosCore_config.h" _kv REGEX "#define KOKKOS_VERSION ")
if(_kv MATCHES "KOKKOS_VERSION ([0-9]+)")
  math(EXPR _maj "${CMAKE_MATCH_1} / 10000")
  math(EXPR _min "${CMAKE_MATCH_1} / 100 % 100")
  math(EXPR _pat "${CMAKE_MATCH_1} % 100")
  set(GRIDLM_KOKKOS_VERSION "${_maj}.${_min}.${_pat}")
elseif(Kokkos_VERSION)
  set(GRIDLM_KOKKOS_VERSION "${Kokkos_VERSION}")
else()
  set(GRIDLM_KOKKOS_VERSION "unknown")
endif()
message(STATUS "gridlm: Kokkos ${GRIDLM_KOKKOS_VERSION} (${gridlm_kokkos_include_dir})")

# A CUDA Kokkos compiles every file of a target that links it with nvcc (through
# kokkos_launch_compiler, or nvcc_wrapper as the C++ compiler). The host compiler then sees
# nvcc's rewrite of the file, in which nvcc turns functional casts into C-style ones: for those
# files alone -Wold-style-cast cannot be kept (it comes after the project's warnings, so it wins).
# Host code (app/, io/, parallel/) includes no Kokkos and keeps every warning.
if("CUDA" IN_LIST Kokkos_DEVICES)
  set(GRIDLM_KOKKOS_CUDA ON)
  target_compile_options(gridlm_kokkos INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-old-style-cast>)
  message(STATUS "gridlm: Kokkos has the CUDA backend: the model runs on the GPU")
  # Kokkos' compile rule (kokkos_launch_compiler) goes in front of a compiler launcher, and takes
  # the launcher's first word for the compiler: every file would then go to the host compiler
  # (scripts/build.sh puts ccache there). No launcher for this build.
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    message(STATUS "gridlm: not using the compiler launcher '${CMAKE_CXX_COMPILER_LAUNCHER}' "
                   "with a CUDA Kokkos (its compile rule comes first and would skip nvcc)")
    set(CMAKE_CXX_COMPILER_LAUNCHER "")
  endif()
else()
  set(GRIDLM_KOKKOS_CUDA OFF)
endif()
# For scripts that look at a build folder (bench/gpu_bundle.sh): does its model run on a GPU?
set(GRIDLM_KOKKOS_CUDA ${GRIDLM_KOKKOS_CUDA} CACHE INTERNAL "Kokkos has the CUDA backend")
