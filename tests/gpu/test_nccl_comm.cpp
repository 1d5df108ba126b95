// parallel::Comm's NCCL backend on device buffers, with the same exactly predictable inputs as
// the MPI backend's tests, and the MPI backend's results as the reference.
#include <gtest/gtest.h>

#include <mpi.h>

#include <vector>

#include "parallel/comm_mpi.hpp"
#include "parallel/comm_nccl.hpp"
#include "parallel/cuda_check.hpp"
#include "parallel/grid.hpp"
#include "tests/gpu/device_fill.hpp"

using namespace gridlm;
using namespace gridlm::parallel;
using gridlm::test::device_fill_affine;
using gridlm::test::device_fill_affine_late;

namespace {

// A device buffer of floats, freed on scope exit.
class DeviceFloats {
public:
  explicit DeviceFloats(std::size_t n) : n_(n) {
    GRIDLM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(float)));
  }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  Span<float> span() { return Span<float>(p_, n_); }
  std::vector<float> to_host() const {
    std::vector<float> h(n_);
    GRIDLM_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }

private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

struct Fixture : testing::Test {
  void SetUp() override {
    GridOptions o;
    grid = std::make_unique<Grid>(Grid::create(MPI_COMM_WORLD, o));
    select_local_device(grid->node_comm());
    comm = std::make_unique<NcclComm>(grid->axis_handle(Axis::dp));
  }
  std::unique_ptr<Grid> grid;
  std::unique_ptr<NcclComm> comm;
};

} // namespace

TEST_F(Fixture, AllReduceSum) {
  const int n = comm->size(), r = comm->rank();
  const std::size_t len = 1000;
  DeviceFloats d(len);
  device_fill_affine(d.span().data(), len, float(r), 1.0f, comm->stream());
  comm->all_reduce(d.span());
  const std::vector<float> h = d.to_host();
  for (std::size_t i = 0; i < len; ++i) {
    ASSERT_EQ(h[i], float(n * (n - 1) / 2) + float(n) * float(i)) << i;
  }
}

// An operation reads what a kernel on the producer stream (Kokkos', in gridlm) queued before
// it wrote, with no host wait between: the kernel still runs for 200 ms when the all-reduce is
// posted, and a stream that did not wait for it would sum the zeros it replaces.
TEST_F(Fixture, OperationsWaitForTheProducerStream) {
  cudaStream_t producer = nullptr;
  GRIDLM_CUDA_CHECK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  {
    NcclComm ordered(grid->axis_handle(Axis::dp), nullptr, producer);
    const int n = ordered.size(), r = ordered.rank();
    const std::size_t len = 1000;
    DeviceFloats d(len);
    GRIDLM_CUDA_CHECK(cudaMemsetAsync(d.span().data(), 0, len * sizeof(float), producer));
    device_fill_affine_late(d.span().data(), len, float(r), 1.0f, producer, 200);
    ordered.all_reduce(d.span());
    const std::vector<float> h = d.to_host();
    for (std::size_t i = 0; i < len; ++i)
      ASSERT_EQ(h[i], float(n * (n - 1) / 2) + float(n) * float(i)) << i;
    // The same inside a group, whose operations start at its end.
    GRIDLM_CUDA_CHECK(cudaMemsetAsync(d.span().data(), 0, len * sizeof(float), producer));
    Request sum;
    {
      Group group(ordered);
      device_fill_affine_late(d.span().data(), len, float(r), 1.0f, producer, 200);
      sum = ordered.iall_reduce(d.span());
    }
    sum.wait();
    const std::vector<float> g = d.to_host();
    for (std::size_t i = 0; i < len; ++i)
      ASSERT_EQ(g[i], float(n * (n - 1) / 2) + float(n) * float(i)) << "grouped, " << i;
  }
  GRIDLM_CUDA_CHECK(cudaStreamDestroy(producer));
}

TEST_F(Fixture, ReduceScatterAndAllGatherRoundTrip) {
  const int n = comm->size(), r = comm->rank();
  const std::size_t per = 256;
  DeviceFloats full(per * n), part(per), back(per * n);
  device_fill_affine(full.span().data(), per * n, 0.0f, 1.0f, comm->stream());
  comm->reduce_scatter(Span<const float>(full.span()), part.span());
  comm->all_gather(Span<const float>(part.span()), back.span());
  const std::vector<float> h = back.to_host();
  for (std::size_t i = 0; i < per * n; ++i)
    ASSERT_EQ(h[i], float(n) * float(i)) << i;
  (void)r;
}

TEST_F(Fixture, BroadcastAndRingSendRecv) {
  const int n = comm->size(), r = comm->rank();
  DeviceFloats b(64), in(64), out(64);
  device_fill_affine(b.span().data(), 64, float(r), 0.0f, comm->stream());
  comm->broadcast(b.span(), n - 1);
  for (float v : b.to_host())
    ASSERT_EQ(v, float(n - 1));
  device_fill_affine(out.span().data(), 64, float(r), 0.0f, comm->stream());
  Request sent, received;
  {
    Group group(*comm);
    sent = comm->isend(Span<const float>(out.span()), (r + 1) % n);
    received = comm->irecv(in.span(), (r + n - 1) % n);
  }
  sent.wait();
  received.wait();
  for (float v : in.to_host())
    ASSERT_EQ(v, float((r + n - 1) % n));
}
