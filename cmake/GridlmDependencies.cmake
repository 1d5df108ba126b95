# Every third-party library gridlm uses, found the CMake way (config packages or Find modules),
# so that Debian packages, Spack installs and module systems all work without edits.

find_package(MPI 3.0 REQUIRED COMPONENTS C)

# HDF5 must be the parallel build: gridlm prepare-data writes token datasets collectively via
# MPI-IO, and training opens them collectively.
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

# SentencePiece (tokenizer training and encoding for `gridlm prepare-data` and datasets) ships
# no CMake package: pkg-config where it has a .pc file (Debian), else the libraries by name
# (Spack, a prefix in CMAKE_PREFIX_PATH or SentencePiece_ROOT).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
endif()
if(TARGET PkgConfig::SENTENCEPIECE)
  add_library(gridlm_sentencepiece INTERFACE)
  target_link_libraries(gridlm_sentencepiece INTERFACE PkgConfig::SENTENCEPIECE)
else()
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_trainer.h
            HINTS ${SentencePiece_ROOT} PATH_SUFFIXES include)
  find_library(SENTENCEPIECE_LIBRARY sentencepiece HINTS ${SentencePiece_ROOT})
  find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train HINTS ${SentencePiece_ROOT})
  if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY OR NOT SENTENCEPIECE_TRAIN_LIBRARY)
    message(FATAL_ERROR
      "SentencePiece not found (sentencepiece_trainer.h, libsentencepiece, "
      "libsentencepiece_train); gridlm needs it for tokenized datasets. On Debian: apt-get "
      "install libsentencepiece-dev (scripts/install-deps.sh does it). With Spack: spack "
      "install sentencepiece. Or point CMake at one: -DSentencePiece_ROOT=/path/to/prefix.")
  endif()
  add_library(gridlm_sentencepiece INTERFACE)
  target_include_directories(gridlm_sentencepiece SYSTEM INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(gridlm_sentencepiece INTERFACE ${SENTENCEPIECE_TRAIN_LIBRARY}
                                                       ${SENTENCEPIECE_LIBRARY})
endif()
add_library(gridlm::sentencepiece ALIAS gridlm_sentencepiece)

if(GRIDLM_BUILD_TESTS AND NOT GRIDLM_BUILD_FUZZ)
  find_package(GTest REQUIRED)
endif()
