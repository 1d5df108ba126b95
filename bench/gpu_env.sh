# Sourced by the GPU scripts: the environment for running an unpacked bundle (bench/gpu_bundle.sh)
# at $root on a machine with CUDA: the bundle's executables and libraries first, then CUDA's
# libraries, the toolkit's or else those of the Python wheels (PyTorch's).
cuda_dirs=$(
  {
    ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null
    python3 -c 'import nvidia, os; [print(p) for p in nvidia.__path__]' 2>/dev/null |
      xargs -r -I{} find {} -name 'lib*.so.*' \( -name 'libcublas*' -o -name 'libnccl*' \
        -o -name 'libcudart*' \) -printf '%h\n'
  } | sort -u | paste -sd:
)
export LD_LIBRARY_PATH=$root/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$root/bin:$PATH OPENBLAS_NUM_THREADS=1
