# The fuzz build (-DGRIDLM_BUILD_FUZZ=ON, scripts/build.sh fuzz -> build-fuzz/): clang, with
# every gridlm source instrumented for libFuzzer's coverage and checked by AddressSanitizer and
# UndefinedBehaviorSanitizer, so a fault in the code under test stops the fuzzer at once. The
# system libraries (HDF5, MPI) are not instrumented: their faults are not what we look for.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "-DGRIDLM_BUILD_FUZZ=ON needs clang (libFuzzer), not "
                      "${CMAKE_CXX_COMPILER_ID}: configure with -DCMAKE_CXX_COMPILER=clang++ "
                      "(scripts/build.sh fuzz does), and install clang with scripts/install-deps.sh.")
endif()

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles([[
  #include <cstddef>
  #include <cstdint>
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
]] GRIDLM_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT GRIDLM_HAVE_LIBFUZZER)
  message(FATAL_ERROR "${CMAKE_CXX_COMPILER} cannot link -fsanitize=fuzzer,address,undefined: "
                      "libFuzzer's runtime is missing (on Debian: apt-get install "
                      "libclang-rt-dev; scripts/install-deps.sh does it).")
endif()

# fuzzer-no-link: coverage for libFuzzer without its main(); the fuzz targets link it
# (-fsanitize=fuzzer), the replay drivers do not. No recovery: the first fault ends the run.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer -gline-tables-only)
add_link_options(-fsanitize=address,undefined)
set(GRIDLM_KOKKOS_VERSION "none (fuzz build)")
