// The tied-embedding gradient sum of a pipeline: the first virtual stage (token embedding) and
// the last (LM head) each hold a copy of wte and must end a step with the sum of the two copies'
// gradients. Only the two ranks holding the copies take part: an exchange of one message each
// way, posted by each as soon as its copy's gradient is final (the last stage usually finishes
// long before the first), instead of an all-reduce over the whole pipeline in which the middle
// stages add zeros and every round waits for ranks that sleep (parallel.wait = yield).
#pragma once

#include <vector>

#include "parallel/comm.hpp"
#include "parallel/stage.hpp"

namespace gridlm::parallel {

class TiedEmbeddingSum {
public:
  // `pp`: an MPI communicator over the pipeline (host buffers); `first`/`last`: this rank's
  // chunks holding the first and the last virtual stage's copy (null where it holds none);
  // `tag`: a tag no other transfer of the step uses on `pp`.
  TiedEmbeddingSum(Comm& pp, Stage* first, Stage* last, int tag);

  // Whether this rank holds a copy.
  bool holds() const { return first_ != nullptr || last_ != nullptr; }
  // `chunk`'s copy's gradient is final for this step: sends it to the other copy's rank. Does
  // nothing for a chunk without a copy, or when both copies are on this rank.
  void post(const Stage* chunk);
  // Ends the step's sum: both copies hold first + last (the same floats on both ranks). Posts
  // what post() was not called for.
  void finish();
  // Host memory of its exchange: two copies' gradients where this rank holds one or both.
  std::size_t host_bytes() const { return (mine_.size() + theirs_.size()) * sizeof(float); }

private:
  Comm& pp_;
  Stage* first_;
  Stage* last_;
  int tag_;
  Stage* own_ = nullptr;             // this rank's copy when the other is on another rank
  int peer_ = -1;                    // the other copy's pipeline stage (-1: both here)
  std::vector<float> mine_, theirs_; // [padded vocab slice x C] each (first, last when both here)
  Request send_, recv_;
  bool posted_ = false;
};

} // namespace gridlm::parallel
