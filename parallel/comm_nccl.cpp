// NCCL backend of parallel::Comm.
#include "parallel/comm_nccl.hpp"

#include <thread>
#include <utility>

#include <fmt/format.h>

#include "parallel/comm_mpi.hpp"
#include "parallel/cuda_check.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/nccl_check.hpp"

namespace gridlm::detail {

void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line) {
  throw Error(fmt::format("NCCL call {} failed: {} ({}:{}; {})", call, ncclGetErrorString(code),
                          file, line, where()));
}

} // namespace gridlm::detail

namespace gridlm::parallel {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
  case DType::f32: return ncclFloat32;
  case DType::f64: return ncclFloat64;
  case DType::i32: return ncclInt32;
  case DType::u32: return ncclUint32;
  case DType::i64: return ncclInt64;
  case DType::u64: return ncclUint64;
  case DType::u8: return ncclUint8;
  }
  throw Error(fmt::format("NCCL has no type for {}", dtype_name(t)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
  case ReduceOp::sum: return ncclSum;
  case ReduceOp::max: return ncclMax;
  case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

// The communicator a request waits on, and whether it was aborted. A peer that died or a link
// that failed leaves NCCL's kernels spinning: a plain wait on the stream would last until the
// watchdog named a hang, never naming NCCL. So waits poll NCCL's asynchronous error, and on one
// abort the communicator (its kernels then end) and report it.
struct NcclLink {
  ncclComm_t comm = nullptr;
  std::shared_ptr<bool> aborted;

  void check() const {
    // An aborted communicator is freed: nothing may be asked of it again.
    if (*aborted) throw Error(fmt::format("an NCCL communicator was aborted; on {}", where()));
    ncclResult_t state = ncclSuccess;
    GRIDLM_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    if (state == ncclInProgress) return;
#endif
    if (state == ncclSuccess) return;
    ncclCommAbort(comm);
    *aborted = true;
    throw Error(fmt::format("NCCL reports a failed communication: {} (a peer that ended or a "
                            "network error); its communicator is aborted; on {}",
                            ncclGetErrorString(state), where()));
  }
  // Until `query` (cudaEventQuery or cudaStreamQuery of what is waited for) says done.
  template <class Query>
  void wait(Query query) const {
    for (;;) {
      const cudaError_t rc = query();
      if (rc != cudaErrorNotReady) {
        GRIDLM_CUDA_CHECK(rc);
        return;
      }
      check();
      std::this_thread::yield();
    }
  }
  template <class Query>
  bool test(Query query) const {
    const cudaError_t rc = query();
    if (rc == cudaErrorNotReady) {
      check();
      return false;
    }
    GRIDLM_CUDA_CHECK(rc);
    return true;
  }
};

class CudaEventRequest final : public Request::Impl {
public:
  CudaEventRequest(cudaStream_t stream, NcclLink link) : link_(std::move(link)) {
    GRIDLM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    GRIDLM_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEventRequest() override { cudaEventDestroy(event_); }
  CudaEventRequest(const CudaEventRequest&) = delete;
  CudaEventRequest& operator=(const CudaEventRequest&) = delete;
  void wait() override {
    link_.wait([&] { return cudaEventQuery(event_); });
  }
  bool test() override {
    return link_.test([&] { return cudaEventQuery(event_); });
  }

private:
  cudaEvent_t event_ = nullptr;
  NcclLink link_;
};

// A request posted inside a group: NCCL launches the work only at ncclGroupEnd, so there is no
// stream point to record yet. Waiting (after the group) waits for everything on the stream.
class GroupedRequest final : public Request::Impl {
public:
  GroupedRequest(cudaStream_t stream, std::shared_ptr<const int> depth, NcclLink link)
      : stream_(stream), depth_(std::move(depth)), link_(std::move(link)) {}
  void wait() override {
    refuse_inside_group();
    link_.wait([&] { return cudaStreamQuery(stream_); });
  }
  bool test() override {
    refuse_inside_group();
    return link_.test([&] { return cudaStreamQuery(stream_); });
  }

private:
  void refuse_inside_group() const {
    if (*depth_ > 0) {
      throw Error(fmt::format("a transfer posted inside a communication group was waited on "
                              "before the group ended; keep its Request until after; on {}",
                              where()));
    }
  }
  cudaStream_t stream_;
  std::shared_ptr<const int> depth_;
  NcclLink link_;
};

} // namespace

int select_local_device(MPI_Comm node_comm) {
  int count = 0;
  GRIDLM_CUDA_CHECK(cudaGetDeviceCount(&count));
  const int local = comm_rank(node_comm);
  const int device = local % count;
  GRIDLM_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

NcclComm::NcclComm(MpiCommHandle comm, cudaStream_t stream, std::optional<cudaStream_t> after)
    : Comm(comm_rank(*comm), comm_size(*comm)), mpi_(std::move(comm)), stream_(stream),
      follow_(after.has_value()), after_(after.value_or(nullptr)) {
  if (stream_ == nullptr) {
    GRIDLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    owns_stream_ = true;
  }
  if (follow_) GRIDLM_CUDA_CHECK(cudaEventCreateWithFlags(&after_done_, cudaEventDisableTiming));
  ncclUniqueId id{};
  if (rank() == 0) GRIDLM_NCCL_CHECK(ncclGetUniqueId(&id));
  GRIDLM_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, *mpi_));
  GRIDLM_NCCL_CHECK(ncclCommInitRank(&nccl_, size(), id, rank()));
}

NcclComm::~NcclComm() {
  if (nccl_ != nullptr && !*aborted_) ncclCommDestroy(nccl_);
  if (after_done_ != nullptr) cudaEventDestroy(after_done_);
  if (owns_stream_) cudaStreamDestroy(stream_);
}

void NcclComm::follow_after() {
  refuse_if_aborted();
  if (!follow_ || *group_depth_ > 0) return;
  GRIDLM_CUDA_CHECK(cudaEventRecord(after_done_, after_));
  GRIDLM_CUDA_CHECK(cudaStreamWaitEvent(stream_, after_done_, 0));
}

void NcclComm::begin_group() {
  GRIDLM_NCCL_CHECK(ncclGroupStart());
  ++*group_depth_;
}

void NcclComm::end_group() {
  --*group_depth_;
  // The group's operations start at its end: they wait for what came before. The group is
  // closed even if that wait cannot be set up.
  try {
    follow_after();
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  GRIDLM_NCCL_CHECK(ncclGroupEnd());
}

void NcclComm::refuse_if_aborted() const {
  if (*aborted_) {
    throw Error(fmt::format("an operation on an NCCL communicator that an earlier error aborted; "
                            "on {}",
                            where()));
  }
}

Request NcclComm::record() {
  const NcclLink link{nccl_, aborted_};
  if (*group_depth_ > 0) {
    return Request(std::make_unique<GroupedRequest>(stream_, group_depth_, link));
  }
  return Request(std::make_unique<CudaEventRequest>(stream_, link));
}

Request NcclComm::start_all_reduce(const void* in, void* out, std::size_t count, DType type,
                                   ReduceOp op, Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(ncclAllReduce(in, out, count, nccl_type(type), nccl_op(op), nccl_, stream_));
  return record();
}

Request NcclComm::start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                       DType type, ReduceOp op, Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(
      ncclReduceScatter(in, out, count_per_rank, nccl_type(type), nccl_op(op), nccl_, stream_));
  return record();
}

Request NcclComm::start_all_gather(const void* in, void* out, std::size_t count_per_rank,
                                   DType type, Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(ncclAllGather(in, out, count_per_rank, nccl_type(type), nccl_, stream_));
  return record();
}

Request NcclComm::start_broadcast(void* data, std::size_t count, DType type, int root,
                                  Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(ncclBroadcast(data, data, count, nccl_type(type), root, nccl_, stream_));
  return record();
}

Request NcclComm::start_send(const void* data, std::size_t count, DType type, int peer, int /*tag*/,
                             Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(ncclSend(data, count, nccl_type(type), peer, nccl_, stream_));
  return record();
}

Request NcclComm::start_recv(void* data, std::size_t count, DType type, int peer, int /*tag*/,
                             Mode /*always asynchronous*/) {
  follow_after();
  GRIDLM_NCCL_CHECK(ncclRecv(data, count, nccl_type(type), peer, nccl_, stream_));
  return record();
}

} // namespace gridlm::parallel
