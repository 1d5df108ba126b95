// MPI backend. Blocking forms call MPI's blocking operations (their algorithms are faster on
// small messages) unless ranks yield their cores while they wait (parallel/wait_policy).
#include "parallel/comm_mpi.hpp"

#include <algorithm>
#include <cstdint>

#include <climits>

#include <fmt/format.h>

#include "parallel/mpi_check.hpp"
#include "parallel/wait_policy.hpp"

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace gridlm::parallel {
namespace {

// What a request may do when abandoned: a receive not yet matched can be withdrawn, a send's
// handle freed; a collective's may not even be freed (MPI 4.0, 6.12).
enum class Posted { receive, send, collective };

class MpiRequest final : public Request::Impl {
public:
  MpiRequest(const char* what, WaitFor waits, Posted posted = Posted::collective)
      : what_(what), waits_(waits), posted_(posted) {}
  MPI_Request* handle() { return &request_; }
  void wait() override { complete(request_, what_, waits_); }
  // A receive not yet matched is withdrawn; a send cannot be (MPI 4 deprecates cancelling
  // sends), and freeing its handle only says no one will wait for it. A collective's handle is
  // left as it is (freeing it is erroneous), its buffers with it: the job ends without asking
  // MPI for progress again (main). No checks: an error is already on its way.
  void abandon() override {
    if (request_ == MPI_REQUEST_NULL || posted_ == Posted::collective) return;
    if (posted_ == Posted::receive) MPI_Cancel(&request_);
    MPI_Request_free(&request_);
  }
  bool test() override {
    int done = 0;
    GRIDLM_MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  const char* what_; // the MPI call that posted it, for errors
  WaitFor waits_;
  Posted posted_;
};

// MPICH 4.0 (Debian 12's) compares MPI_UINT64_T as signed in MPI_MAX and MPI_MIN, so values
// past 2^63 lose to small ones (a test shows it). Unsigned 64-bit max and min go through these
// user-defined operations instead.
template <bool max>
void u64_extreme(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint64_t*>(in);
  auto* b = static_cast<std::uint64_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = max ? std::max(a[i], b[i]) : std::min(a[i], b[i]);
}

MPI_Op mpi_op(ReduceOp op, DType type) {
  if (type == DType::u64 && op != ReduceOp::sum) {
    // Created once, on first use (MPI is initialised by then), and kept until MPI_Finalize.
    static MPI_Op u64_max = [] {
      MPI_Op o = MPI_OP_NULL;
      GRIDLM_MPI_CHECK(MPI_Op_create(&u64_extreme<true>, 1, &o));
      return o;
    }();
    static MPI_Op u64_min = [] {
      MPI_Op o = MPI_OP_NULL;
      GRIDLM_MPI_CHECK(MPI_Op_create(&u64_extreme<false>, 1, &o));
      return o;
    }();
    return op == ReduceOp::max ? u64_max : u64_min;
  }
  switch (op) {
  case ReduceOp::sum: return MPI_SUM;
  case ReduceOp::max: return MPI_MAX;
  case ReduceOp::min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// MPI-3 counts are int; larger buffers must be split by the caller (gradient buckets are).
int mpi_count(std::size_t count, const char* op) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(fmt::format("{}: {} elements exceed MPI's int count limit; split the buffer "
                            "into buckets; on {}",
                            op, count, where()));
  }
  return static_cast<int>(count);
}

// A blocking operation under the yield policy is posted non-blocking and completed here, so that
// the wait yields the core (MPI's blocking calls spin).
Request finish(std::unique_ptr<MpiRequest> req, bool blocking) {
  if (!blocking) return Request(std::move(req));
  req->wait();
  return Request();
}

} // namespace

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

void broadcast_text(MPI_Comm comm, std::string& text, int root) {
  std::uint64_t n = text.size();
  GRIDLM_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
  text.resize(n);
  GRIDLM_MPI_CHECK(MPI_Bcast(text.data(), int(n), MPI_CHAR, root, comm));
}

MpiCommHandle split_nodes(MPI_Comm world, int simulate_ranks_per_node) {
  const int rank = comm_rank(world);
  MPI_Comm node = MPI_COMM_NULL;
  if (simulate_ranks_per_node > 0) {
    GRIDLM_MPI_CHECK(MPI_Comm_split(world, rank / simulate_ranks_per_node, rank, &node));
  } else {
    GRIDLM_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  }
  return own_comm(node);
}

std::vector<int> world_ranks(MPI_Comm comm) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  GRIDLM_MPI_CHECK(MPI_Comm_group(comm, &group));
  GRIDLM_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  const int n = comm_size(comm);
  std::vector<int> local(std::size_t(n), 0), global(std::size_t(n), 0);
  for (int i = 0; i < n; ++i)
    local[std::size_t(i)] = i;
  GRIDLM_MPI_CHECK(MPI_Group_translate_ranks(group, n, local.data(), world, global.data()));
  GRIDLM_MPI_CHECK(MPI_Group_free(&group));
  GRIDLM_MPI_CHECK(MPI_Group_free(&world));
  return global;
}

MpiComm::MpiComm(MpiCommHandle comm, const char* axis, WaitFor waits)
    : Comm(comm_rank(*comm), comm_size(*comm)), comm_(std::move(comm)), waits_(waits) {
  set_identity(axis, world_ranks(*comm_));
}

Request MpiComm::start_all_reduce(const void* in, void* out, std::size_t count, DType type,
                                  ReduceOp op, Mode mode) {
  const void* send = in == out ? MPI_IN_PLACE : in;
  const int n = mpi_count(count, "all_reduce");
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Allreduce(send, out, n, mpi_datatype(type), mpi_op(op, type), *comm_));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Iallreduce", waits_);
  GRIDLM_MPI_CHECK(
      MPI_Iallreduce(send, out, n, mpi_datatype(type), mpi_op(op, type), *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

Request MpiComm::start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                      DType type, ReduceOp op, Mode mode) {
  const int n = mpi_count(count_per_rank, "reduce_scatter");
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(
        MPI_Reduce_scatter_block(in, out, n, mpi_datatype(type), mpi_op(op, type), *comm_));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Ireduce_scatter_block", waits_);
  GRIDLM_MPI_CHECK(MPI_Ireduce_scatter_block(in, out, n, mpi_datatype(type), mpi_op(op, type),
                                             *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

Request MpiComm::start_all_gather(const void* in, void* out, std::size_t count_per_rank, DType type,
                                  Mode mode) {
  const int n = mpi_count(count_per_rank, "all_gather");
  const MPI_Datatype t = mpi_datatype(type);
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Allgather(in, n, t, out, n, t, *comm_));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Iallgather", waits_);
  GRIDLM_MPI_CHECK(MPI_Iallgather(in, n, t, out, n, t, *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

Request MpiComm::start_broadcast(void* data, std::size_t count, DType type, int root, Mode mode) {
  const int n = mpi_count(count, "broadcast");
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Bcast(data, n, mpi_datatype(type), root, *comm_));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Ibcast", waits_);
  GRIDLM_MPI_CHECK(MPI_Ibcast(data, n, mpi_datatype(type), root, *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

Request MpiComm::start_send(const void* data, std::size_t count, DType type, int peer, int tag,
                            Mode mode) {
  const int n = mpi_count(count, "send");
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Send(data, n, mpi_datatype(type), peer, tag, *comm_));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Isend", waits_, Posted::send);
  GRIDLM_MPI_CHECK(MPI_Isend(data, n, mpi_datatype(type), peer, tag, *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

Request MpiComm::start_recv(void* data, std::size_t count, DType type, int peer, int tag,
                            Mode mode) {
  const int n = mpi_count(count, "recv");
  if (mode == Mode::blocking && wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Recv(data, n, mpi_datatype(type), peer, tag, *comm_, MPI_STATUS_IGNORE));
    return Request();
  }
  auto req = std::make_unique<MpiRequest>("MPI_Irecv", waits_, Posted::receive);
  GRIDLM_MPI_CHECK(MPI_Irecv(data, n, mpi_datatype(type), peer, tag, *comm_, req->handle()));
  return finish(std::move(req), mode == Mode::blocking);
}

bool mpi_reads_cuda_memory() {
#if defined(MPIX_GPU_SUPPORT_CUDA) && !defined(OPEN_MPI)
  int supported = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported != 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  // Open MPI's CUDA support covers point-to-point and blocking collectives but not non-blocking
  // collectives (its FAQ), which gridlm posts on the model's buffers (bucketed gradients, ZeRO-1,
  // every collective under parallel.wait = yield): they go through host buffers there.
  return false;
#else
  return false;
#endif
}

} // namespace gridlm::parallel
