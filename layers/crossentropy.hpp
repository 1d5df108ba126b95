// Softmax + cross-entropy fused over the vocabulary. Forward and backward side by side.
#pragma once

#include <cstdint>

namespace gridlm::layers {

// In place: logits[N,V] become probabilities; losses[N] = -log p[target]. Returns the mean loss.
double crossentropy_forward(float* logits_to_probs, float* losses, const std::int32_t* targets,
                            long N, int V);
// In place: probabilities become d loss / d logits = (p - onehot(target)) * dloss, where dloss
// is the weight of each token in the loss (1/N for a mean over one batch).
void crossentropy_backward(float* probs_to_dlogits, const std::int32_t* targets, float dloss,
                           long N, int V);

} // namespace gridlm::layers
