// Backend-independent parts of parallel::Comm: request lifetime and argument checks.
#include "parallel/comm.hpp"

#include <exception>

#include <atomic>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/flight_recorder.hpp"

namespace gridlm::parallel {

Request::Request(Request&& other) noexcept
    : impl_(std::move(other.impl_)), record_(std::exchange(other.record_, 0)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (impl_ || record_ != 0) {
      // Complete the transfer this request owned before taking another.
      Request finishing(std::move(*this));
    }
    impl_ = std::move(other.impl_);
    record_ = std::exchange(other.record_, 0);
  }
  return *this;
}

namespace {
std::atomic<std::size_t> abandoned{0};
} // namespace

std::size_t abandoned_transfers() { return abandoned.load(); }

Request::~Request() {
  if (impl_ && std::uncaught_exceptions() > unwinding_) {
    // The impl goes without waiting; what its backend could not withdraw stays in flight, and
    // the job ends (main) before MPI or NCCL are asked for progress again.
    impl_->abandon();
    impl_.reset();
    complete_record();
    ++abandoned;
    return;
  }
  try {
    wait();
  } catch (const std::exception& e) {
    // A destructor cannot throw; a transfer that failed here cannot be recovered either.
    abort_job(fmt::format("a communication request failed while being released: {}", e.what()));
  }
}

void Request::complete_record() {
  if (record_ != 0) flight::completed(std::exchange(record_, 0));
}

void Request::wait() {
  if (impl_) {
    if (record_ != 0) flight::wait_begins(record_);
    impl_->wait();
    impl_.reset();
  }
  complete_record();
}

bool Request::test() {
  if (impl_) {
    if (!impl_->test()) return false;
    impl_.reset();
  }
  complete_record();
  return true;
}

Group::Group(Comm& comm) : comm_(comm), unwinding_(std::uncaught_exceptions()) {
  comm_.begin_group();
}

Group::~Group() noexcept(false) {
  if (std::uncaught_exceptions() == unwinding_) {
    comm_.end_group();
    return;
  }
  try {
    comm_.end_group();
  } catch (...) {
    // The error unwinding this scope is the one to report.
  }
}

void Comm::check_sizes(const char* op, std::size_t big, std::size_t small, int factor) const {
  if (big != small * static_cast<std::size_t>(factor)) {
    throw Error(fmt::format("{}: buffer sizes do not match on {} ranks: {} elements against {} "
                            "(expected {} x {}); on {}",
                            op, size_, big, small, factor, small, where()));
  }
}

void Comm::set_identity(const char* axis, std::vector<int> world_ranks) {
  axis_ = axis;
  members_ = std::make_shared<const std::vector<int>>(std::move(world_ranks));
}

std::uint64_t Comm::record(const char* op, int peer, std::size_t bytes, int tag, Mode mode) const {
  flight::Record r;
  r.op = op;
  r.axis = axis_;
  r.members = members_;
  if (peer >= 0)
    r.peer = members_ && std::size_t(peer) < members_->size() ? (*members_)[peer] : peer;
  r.bytes = bytes;
  r.tag = tag;
  return flight::posted(std::move(r), mode == Mode::blocking);
}

bool Comm::skip_send_for_fault(int peer, std::size_t bytes, int tag) const {
  if (!fault::skip_this_send()) return false;
  flight::Record r;
  r.op = "send";
  r.axis = axis_;
  r.members = members_;
  r.peer = members_ && std::size_t(peer) < members_->size() ? (*members_)[peer] : peer;
  r.bytes = bytes;
  r.tag = tag;
  r.skipped = true;
  flight::posted(std::move(r), false);
  return true;
}

void Comm::check_peer(const char* what, int peer) const {
  if (peer < 0 || peer >= size_) {
    throw Error(fmt::format("{} {} is outside the communicator of {} ranks; on {}", what, peer,
                            size_, where()));
  }
}

} // namespace gridlm::parallel
