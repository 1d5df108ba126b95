// Embedding lookups and their scatter-add backwards.
#include "layers/encoder.hpp"

#include <vector>

#include "layers/kernels.hpp"

namespace gridlm::layers {

void token_embedding_forward(float* out, const std::int32_t* tokens, const float* wte, int B, int T,
                             int C, long vocab_begin, long vocab_local) {
  for_each_element(
      "layers::Encoder::token_forward", long(B) * T, C, KOKKOS_LAMBDA(long bt, long i) {
        const long row = long(tokens[bt]) - vocab_begin;
        out[bt * C + i] = row < 0 || row >= vocab_local ? 0.0f : wte[row * C + i];
      });
}

void same_token_links(std::int32_t* links, const std::int32_t* tokens, long N, long V) {
  std::vector<std::int32_t> later(std::size_t(V), -1); // token -> its next position, walking back
  for (long i = N - 1; i >= 0; --i) {
    links[i] = later[std::size_t(tokens[i])];
    later[std::size_t(tokens[i])] = std::int32_t(i);
  }
  for (long i = 0; i < N; ++i)
    links[N + i] = later[std::size_t(tokens[i])] == i ? 1 : 0;
}

void token_embedding_backward(float* dwte, const float* dout, const std::int32_t* tokens, int B,
                              int T, int C, long vocab_begin, long vocab_local,
                              const std::int32_t* links) {
  const long N = long(B) * T;
  if (!host_teams && links != nullptr) {
    // A GPU: a thread per (token's first position, column) walks that token's chain of
    // positions in order, as the CPU's blocks do (the same bits; atomics would add in an order
    // that varies between runs), and writes its row's element once.
    const bool narrow = N * C <= 0x7fffffffL;
    for_each(
        "layers::Encoder::token_backward", N * C, KOKKOS_LAMBDA(long e) {
          // 32-bit division where it fits: a GPU divides 64-bit integers in software.
          const long first = narrow ? long(int(e) / C) : e / C,
                     i = narrow ? long(int(e) % C) : e % C;
          const long row = long(tokens[first]) - vocab_begin;
          if (links[N + first] == 0 || row < 0 || row >= vocab_local) return;
          float acc = dwte[row * C + i];
          for (long p = first; p >= 0; p = links[p])
            acc += dout[p * C + i];
          dwte[row * C + i] = acc;
        });
  } else if constexpr (!host_teams) {
    // A GPU without the chains: a thread per column walks every position.
    for_each(
        "layers::Encoder::token_backward", long(C), KOKKOS_LAMBDA(long i) {
          for (long bt = 0; bt < N; ++bt) {
            const long row = long(tokens[bt]) - vocab_begin;
            if (row >= 0 && row < vocab_local) dwte[row * C + i] += dout[bt * C + i];
          }
        });
  } else {
    // Rows of dwte are shared between positions holding the same token: each column block owns
    // its columns, so the scatter has no races when blocks run in parallel.
    for_each(
        "layers::Encoder::token_backward", column_blocks(C), KOKKOS_LAMBDA(long blk) {
          const int i0 = int(blk) * column_block,
                    i1 = i0 + column_block < C ? i0 + column_block : C;
          for (long bt = 0; bt < long(B) * T; ++bt) {
            const long row = long(tokens[bt]) - vocab_begin;
            if (row < 0 || row >= vocab_local) continue;
            const float* d = dout + bt * C;
            float* te = dwte + row * C;
            for (int i = i0; i < i1; ++i)
              te[i] += d[i];
          }
        });
  }
}

void position_embedding_forward(float* out, const float* wpe, int B, int T, int C) {
  for_each_element(
      "layers::Encoder::position_forward", long(B) * T, C,
      KOKKOS_LAMBDA(long bt, long i) { out[bt * C + i] += wpe[(bt % T) * C + i]; });
}

void position_embedding_backward(float* dwpe, const float* dout, int B, int T, int C) {
  if constexpr (!host_teams) {
    // A GPU: a thread per (position, column), adding the sequences in the CPU's order.
    for_each(
        "layers::Encoder::position_backward", long(T) * C, KOKKOS_LAMBDA(long e) {
          float acc = dwpe[e];
          for (int b = 0; b < B; ++b)
            acc += dout[long(b) * T * C + e];
          dwpe[e] = acc;
        });
  } else {
    for_each(
        "layers::Encoder::position_backward", long(T), KOKKOS_LAMBDA(long t) {
          float* pe = dwpe + t * C;
          for (int b = 0; b < B; ++b) {
            const float* d = dout + (long(b) * T + t) * C;
            for (int i = 0; i < C; ++i)
              pe[i] += d[i];
          }
        });
  }
}

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C) {
  token_embedding_forward(out, tokens, wte, B, T, C, 0, 1L << 40);
  position_embedding_forward(out, wpe, B, T, C);
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C) {
  token_embedding_backward(dwte, dout, tokens, B, T, C, 0, 1L << 40);
  position_embedding_backward(dwpe, dout, B, T, C);
}

} // namespace gridlm::layers
