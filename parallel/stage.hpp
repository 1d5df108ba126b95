// parallel::Stage: what the pipeline executor needs of one model chunk (a virtual stage) on this
// rank, so that parallel/ runs schedules without knowing the model. layers::GPT implements it.
//
// A chunk plans `slots()` sets of activations: a micro-batch lives in one slot from its forward
// (F) to its backward (B, or B then W for a split backward). Tensors crossing a stage boundary
// (an activation forward, its gradient backward) are [B, T, C] floats in the execution space's
// memory: boundary_size() of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "parallel/span.hpp"

namespace gridlm::parallel {

class Stage {
public:
  virtual ~Stage() = default;

  virtual int slots() const = 0;
  virtual int batch() const = 0;                 // B: sequences per micro-batch
  virtual int seq() const = 0;                   // T: tokens per sequence
  virtual std::size_t boundary_size() const = 0; // floats of one boundary tensor [B, T, C]
  virtual bool takes_tokens() const = 0;         // the first virtual stage: F reads token ids
  virtual bool takes_targets() const = 0;        // the last: F reads targets and gives the loss
  // Whether backward_input() and backward_weights() can run apart (zero-bubble schedules).
  virtual bool split_backward() const = 0;

  // F of one micro-batch into `slot`: tokens [B, T] on the first virtual stage, else `input`
  // [B, T, C]; targets [B, T] on the last. Returns the mean loss on the last, else 0.
  virtual double forward_micro(int slot, const std::int32_t* tokens, const float* input,
                               const std::int32_t* targets) = 0;
  // The output [B, T, C] of the slot's forward, for the next virtual stage.
  virtual const float* output(int slot) const = 0;
  // B, fused: accumulates (+=) loss_weight x the gradient of the slot's loss; `doutput`
  // [B, T, C] is the gradient of output() where the stage has no head. Frees the slot.
  virtual void backward(float loss_weight, const float* doutput, int slot) = 0;
  // B of a split backward (input gradients; the slot stays held) and W (weight gradients;
  // frees the slot). Together they give exactly what backward() gives.
  virtual void backward_input(float loss_weight, const float* doutput, int slot) = 0;
  virtual void backward_weights(int slot) = 0;
  // The gradient [B, T, C] of the input of the last backward, for the previous virtual stage.
  virtual const float* input_grad() const = 0;

  virtual void zero_grad() = 0;
  // Called back during a weight-gradient pass (the fused backward, or W of a split one) as it
  // goes from the last layers to the first: `from` is an offset into the flat gradient buffer
  // such that this pass will not touch [from, end) again. Never called for the embeddings'
  // range (a tied copy is summed over the pipeline after the last op). An empty hook: none.
  using GradsDone = std::function<void(std::size_t from)>;
  virtual void on_grads_done(GradsDone hook) = 0;
  // Called back during a forward before each part of the model (the embeddings, each block,
  // the head) reads its parameters: the forward reads none at or past flat offset `until` of
  // the parameter buffer before the next call. What lets parameters still arriving (ZeRO-1's
  // all-gather) be waited for only where they are used. An empty hook: none.
  using ParamsNeeded = std::function<void(std::size_t until)>;
  virtual void on_params_needed(ParamsNeeded hook) = 0;
  // This chunk's share of the squared global gradient norm (each tensor counted once over the
  // tensor group and the pipeline).
  virtual double grad_sum_of_squares() const = 0;
  // Tied embeddings: the first and the last virtual stage each hold a copy of the token
  // embedding, whose gradients must be summed. tied_embedding_size() is its element count on
  // this rank (the same on every chunk of the model; 0 when untied); tied_embedding_grad() this
  // chunk's copy's gradient (empty when it holds none).
  virtual std::size_t tied_embedding_size() const = 0;
  virtual Span<float> tied_embedding_grad() = 0;
  // The stage's memory space, for the executor: a new boundary buffer (boundary_size()
  // floats, kept alive by its handle, the transfers' buffers); a copy of a boundary tensor;
  // copies of n floats to and from host memory (for MPI-only exchanges such as the tied
  // embedding sum); and a wait for the stage's queued work, so that an op's time is its own.
  using Buffer = std::shared_ptr<float>;
  virtual Buffer boundary_buffer() const = 0;
  virtual void copy_boundary(float* to, const float* from) const = 0;
  virtual void copy_to_host(float* host, const float* stage_memory, std::size_t n) const = 0;
  virtual void copy_from_host(float* stage_memory, const float* host, std::size_t n) const = 0;
  virtual void fence() const = 0;

  // Seconds this chunk spent in its own (tensor-parallel) communication so far.
  virtual double comm_seconds() const = 0;
};

} // namespace gridlm::parallel
