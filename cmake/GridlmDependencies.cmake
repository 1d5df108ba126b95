# Every third-party library gridlm uses, found the CMake way (config packages or Find modules),
# so that Debian packages, Spack installs and module systems all work without edits.

find_package(MPI 3.0 REQUIRED COMPONENTS C)

# HDF5 must be the parallel build: checkpoints and datasets are written collectively via MPI-IO.
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "The HDF5 found (${HDF5_C_INCLUDE_DIRS}) is a serial build; gridlm needs parallel HDF5 "
    "(MPI-IO). On Debian: apt-get install libhdf5-mpich-dev (scripts/install-deps.sh does it). "
    "With Spack: spack install hdf5+mpi. Or point CMake at one: -DHDF5_ROOT=/path/to/parallel/hdf5.")
endif()
if(NOT TARGET HDF5::HDF5)
  add_library(HDF5::HDF5 INTERFACE IMPORTED)
  target_include_directories(HDF5::HDF5 INTERFACE ${HDF5_C_INCLUDE_DIRS})
  target_link_libraries(HDF5::HDF5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(HDF5::HDF5 INTERFACE ${HDF5_C_DEFINITIONS})
endif()

find_package(CLI11 REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)

if(GRIDLM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
