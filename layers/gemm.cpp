// GEMM through KokkosBlas::gemm, which Kokkos 3.4 and 4.x both provide with this signature.
#include "layers/gemm.hpp"

#include <KokkosBlas3_gemm.hpp>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::layers {

void gemm(Matrix out, ConstMatrix a, Trans trans_a, ConstMatrix b, Trans trans_b, float alpha,
          float beta) {
  const std::size_t m = trans_a == Trans::no ? a.extent(0) : a.extent(1);
  const std::size_t ka = trans_a == Trans::no ? a.extent(1) : a.extent(0);
  const std::size_t kb = trans_b == Trans::no ? b.extent(0) : b.extent(1);
  const std::size_t n = trans_b == Trans::no ? b.extent(1) : b.extent(0);
  if (ka != kb || out.extent(0) != m || out.extent(1) != n) {
    throw Error(fmt::format("gemm: shapes do not match: out [{}x{}] = op(a) [{}x{}] * op(b) "
                            "[{}x{}]",
                            out.extent(0), out.extent(1), m, ka, kb, n));
  }
  KokkosBlas::gemm(trans_a == Trans::no ? "N" : "T", trans_b == Trans::no ? "N" : "T", alpha, a, b,
                   beta, out);
}

} // namespace gridlm::layers
