// `gridlm profile`'s measurements: on the ranks of the job, all at once (as a run's ranks
// compute together and share the node's cores and memory bandwidth), the seconds of the forward,
// fused backward, and split input- and weight-gradient halves of one transformer block, the
// embedding and the head, per micro-batch size and tensor-parallel degree (the tp all-reduces
// inside); the AdamW update per parameter; and all-reduce, reduce-scatter, all-gather and
// send/receive against message size inside a node and, when the job spans nodes, across them.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "engine/profile.hpp"
#include "layers/model_config.hpp"

namespace gridlm::engine {

struct ProfileRequest {
  layers::ModelConfig model;                  // the model whose ops are timed
  std::string precision = "fp32";             // of its matrix products (train.precision)
  std::vector<int> tp{1};                     // tensor-parallel degrees (each divides the ranks)
  std::vector<int> micro_batches{1, 2, 4, 8}; // sequences per micro-batch
  int repeats = 5;                            // timed repetitions of each op (the median is kept)
  int passes = 3; // passes over every op, one after another; each op keeps its median pass
  std::vector<double> message_bytes{4096, 65536, 1 << 20, 8 << 20}; // collective sizes timed
};

// Collective over `world`; every rank returns rank 0's profile. Throws the same Error on every
// rank for a request that cannot be measured here (a tp that does not divide the ranks or the
// heads, a micro-batch of no sequences).
Profile measure_profile(const ProfileRequest& request, MPI_Comm world);

} // namespace gridlm::engine
