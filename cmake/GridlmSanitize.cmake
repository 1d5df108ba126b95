# The sanitizer build (-DGRIDLM_SANITIZE=ON, scripts/build.sh sanitize -> build-sanitize/): every
# gridlm source and test checked by AddressSanitizer (out-of-bounds, use-after-free, double free)
# and UndefinedBehaviorSanitizer (overflow, misaligned or null access, bad casts and shifts).
# No recovery: the first fault ends the test with its report. The system libraries (MPI, HDF5,
# OpenBLAS, Kokkos' compiled part) are not instrumented; what they allocate is still checked
# where gridlm's code touches it.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "-DGRIDLM_SANITIZE=ON needs gcc or clang, not ${CMAKE_CXX_COMPILER_ID}.")
endif()
add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
# gcc's flow analysis under ASan's instrumentation sees libstdc++'s own std::function and regex
# members as "maybe uninitialized"; those warnings are false here, and -Werror would stop the build.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-maybe-uninitialized)
endif()
# For every test the build registers (gridlm_sanitizer_env in tests/): MPICH, HDF5 and UCX keep
# allocations until exit that LeakSanitizer would report as leaks of ours; a fault prints its stack.
set(GRIDLM_SANITIZER_ENV "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1"
                         "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
