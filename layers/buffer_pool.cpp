// The boundary-buffer pool (buffer_pool.hpp).
#include "layers/buffer_pool.hpp"

namespace gridlm::layers {

std::shared_ptr<BufferPool> BufferPool::create(std::string label, std::size_t floats) {
  return std::shared_ptr<BufferPool>(new BufferPool(std::move(label), floats));
}

std::shared_ptr<float> BufferPool::take() {
  Kokkos::View<float*> view;
  bool reused = false;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++taken_;
    if (!free_.empty()) {
      view = std::move(free_.back());
      free_.pop_back();
      reused = true;
    } else {
      ++made_;
      // Room for every buffer made to come back: the deleter must not allocate (a bad_alloc
      // thrown from a shared_ptr's deleter would terminate the job).
      free_.reserve(made_);
    }
  }
  if (!reused) {
    view = Kokkos::View<float*>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label_), floats_);
  }
  float* data = view.data();
  return std::shared_ptr<float>(data, [pool = shared_from_this(), view](float*) {
    const std::lock_guard<std::mutex> lock(pool->mutex_);
    pool->free_.push_back(view);
  });
}

std::size_t BufferPool::made() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return made_;
}

std::size_t BufferPool::taken() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return taken_;
}

} // namespace gridlm::layers
