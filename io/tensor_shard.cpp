// What ranks compute about their tensor shards without the file: element counts and the
// order-free checksum that lets any layout verify what any other wrote.
#include <cstring>

#include "io/parallel_h5.hpp"

namespace gridlm::io {

namespace {

// splitmix64 of (flat index, value bits): every element and its position count, in any order.
inline std::uint64_t element_hash(std::uint64_t global, std::uint32_t bits) {
  std::uint64_t z = (global << 32 ^ global >> 32) ^ (std::uint64_t(bits) * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

std::uint64_t elements(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape)
    n *= d;
  return n;
}

std::uint64_t shard_checksum(const TensorShard& shard, Span<const float> local) {
  std::uint64_t sum = 0;
  const std::size_t dims = shard.global_shape.size();
  if (dims == 0) {
    std::uint32_t bits = 0;
    if (!shard.file.empty()) std::memcpy(&bits, local.data(), sizeof bits);
    return shard.file.empty() ? 0 : element_hash(0, bits);
  }
  // Walk each box in rows of its last dimension, contiguous in both arrays: the start of a row
  // is computed once, the elements of a row follow by +1.
  std::vector<std::uint64_t> at(dims);
  for (std::size_t b = 0; b < shard.file.size(); ++b) {
    const Box& f = shard.file[b];
    const Box& m = shard.memory[b];
    const std::uint64_t row = f.count[dims - 1], rows = row == 0 ? 0 : elements(f.count) / row;
    for (std::uint64_t r = 0; r < rows; ++r) {
      std::uint64_t rest = r, global = 0, local_index = 0;
      at[dims - 1] = 0;
      for (std::size_t d = dims - 1; d-- > 0;) {
        at[d] = rest % f.count[d];
        rest /= f.count[d];
      }
      for (std::size_t d = 0; d < dims; ++d) {
        global = global * shard.global_shape[d] + f.start[d] + at[d];
        local_index = local_index * shard.local_shape[d] + m.start[d] + at[d];
      }
      const float* x = local.data() + local_index;
      for (std::uint64_t i = 0; i < row; ++i) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, x + i, sizeof bits);
        sum += element_hash(global + i, bits);
      }
    }
  }
  return sum;
}

} // namespace gridlm::io
