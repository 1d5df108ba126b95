// Softmax + cross-entropy fused over the vocabulary. Forward and backward side by side. The
// logits may be one rank's slice of a vocabulary split over a tensor-parallel group: the row
// maximum, the sum of exponentials and the target's logit are then reduced over the group
// (three numbers per row), and the full logits never exist on one rank. Columns at or beyond
// the vocabulary size are padding: never predicted, never in the loss.
#pragma once

#include <cstdint>

#include "layers/kernels.hpp"

namespace gridlm::parallel {
class Comm;
}

namespace gridlm::layers {

// Where this rank's logit columns sit in the vocabulary.
struct VocabSlice {
  long begin = 0;                  // global id of local column 0
  long local = 0;                  // columns held (padding included)
  long vocab_size = 0;             // real vocabulary size: columns at or past it are padding
  parallel::Comm* group = nullptr; // tensor-parallel group, or null for the whole vocabulary
  double* comm_seconds = nullptr;  // when given, the group's all-reduces add their seconds
};

// In place: logits[N, slice.local] become their exponentials exp(logit - row max), unnormalised
// (0 in padding columns); losses[N] = -log p[target]; scratch holds 3N floats: the row maxima,
// then the rows' sums of exponentials and target logits, which the backward reads. Returns the
// mean loss.
double crossentropy_forward(float* logits_to_exps, float* losses, float* scratch,
                            const std::int32_t* targets, long N, const VocabSlice& slice);
// In place: the forward's exponentials become d loss / d logits = (p - onehot(target)) * dloss,
// with the forward's `scratch`; in bf16 rounded to bf16 (only the head's products read them).
void crossentropy_backward(float* exps_to_dlogits, const float* scratch,
                           const std::int32_t* targets, float dloss, long N,
                           const VocabSlice& slice, Precision precision = Precision::fp32);

// The whole vocabulary on one rank.
double crossentropy_forward(float* logits_to_exps, float* losses, float* scratch,
                            const std::int32_t* targets, long N, int V);
void crossentropy_backward(float* exps_to_dlogits, const float* scratch,
                           const std::int32_t* targets, float dloss, long N, int V);

} // namespace gridlm::layers
