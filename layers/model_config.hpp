// Shape of the GPT model: the [model] section of the run configuration.
#pragma once

#include "parallel/stage_layout.hpp"

namespace gridlm::layers {

struct ModelConfig {
  int vocab_size = 512;        // tokens in the vocabulary
  int seq_len = 128;           // context length (positions of the learned position embedding)
  int n_layer = 4;             // transformer blocks
  int n_head = 4;              // attention heads per block
  int d_model = 128;           // residual stream width; must be divisible by n_head
  bool tied_embeddings = true; // LM head shares the token embedding matrix
  double init_std = 0.02;      // std of the normal initialisation (GPT-2)
};

// Training-time FLOPs per token for forward + backward: 6 x (non-embedding parameters + LM
// head) plus the attention score and output products (PaLM's formula, full causal matrix).
double flops_per_token(const ModelConfig& m);

// The forward cost of a block, the embedding and the head in multiply-adds per token, for the
// balanced pipeline stage layout: a block's four GEMMs (12 C^2) and its causal attention
// (about T C); the head's logits (C V) and its softmax (a few V); the embedding's lookups (a few
// C). The backward scales every term alike, so forward costs balance both.
parallel::StageCostModel stage_cost_model(const ModelConfig& m);

} // namespace gridlm::layers
