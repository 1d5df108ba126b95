// Backend-independent parts of parallel::Comm: request lifetime and argument checks.
#include "parallel/comm.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::parallel {

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (impl_) {
      // Complete the transfer this request owned before taking another.
      Request finishing(std::move(impl_));
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Request::~Request() {
  if (!impl_) return;
  try {
    impl_->wait();
  } catch (const std::exception& e) {
    // A destructor cannot throw; a transfer that failed here cannot be recovered either.
    abort_job(fmt::format("a communication request failed while being released: {}", e.what()));
  }
}

void Request::wait() {
  if (!impl_) return;
  impl_->wait();
  impl_.reset();
}

bool Request::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

Group::Group(Comm& comm) : comm_(comm) { comm_.begin_group(); }
Group::~Group() noexcept(false) { comm_.end_group(); }

void Comm::check_sizes(const char* op, std::size_t big, std::size_t small, int factor) const {
  if (big != small * static_cast<std::size_t>(factor)) {
    throw Error(fmt::format("{}: buffer sizes do not match on {} ranks: {} elements against {} "
                            "(expected {} x {}); on {}",
                            op, size_, big, small, factor, small, where()));
  }
}

void Comm::check_peer(const char* what, int peer) const {
  if (peer < 0 || peer >= size_) {
    throw Error(fmt::format("{} {} is outside the communicator of {} ranks; on {}", what, peer,
                            size_, where()));
  }
}

} // namespace gridlm::parallel
