// Equal-sized float buffers in the execution space's memory, reused. A pipeline stage takes one
// for every boundary tensor it sends or receives and drops it when the transfer is done; on a
// GPU a fresh allocation each time would be a cudaMalloc, and its release a cudaFree, which
// waits for the whole device (the NCCL streams reducing gradients behind the backward too).
// A pool grows to the most buffers held at once and keeps them until it goes.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gridlm::layers {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
public:
  // A pool of buffers of `floats` floats, labelled `label` (what profilers and Kokkos' memory
  // tools name them).
  static std::shared_ptr<BufferPool> create(std::string label, std::size_t floats);

  // A buffer (contents undefined) that goes back to the pool when its last handle is dropped.
  // A handle keeps the pool alive, so it may outlive whoever made the pool.
  std::shared_ptr<float> take();

  std::size_t floats() const { return floats_; }
  std::size_t made() const;  // buffers allocated so far: the most held at once
  std::size_t taken() const; // buffers handed out so far

private:
  BufferPool(std::string label, std::size_t floats) : label_(std::move(label)), floats_(floats) {}

  std::string label_;
  std::size_t floats_;
  mutable std::mutex mutex_; // a handle may be dropped on another thread than take()'s
  std::vector<Kokkos::View<float*>> free_;
  std::size_t made_ = 0, taken_ = 0;
};

} // namespace gridlm::layers
