// The measurements behind a profile. Every rank times the same ops at the same moments (a barrier
// before each repetition), and the profile keeps, per op, the median over repetitions of the
// slowest rank: what a step waits for.
#include "engine/profiler.hpp"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <random>
#include <thread>

#include <Kokkos_Core.hpp>
#include <fmt/format.h>

#include "engine/comm_backend.hpp"
#include "engine/memory_budget.hpp"
#include "engine/pipeline_model.hpp"
#include "engine/statistics.hpp"
#include "gridlm/version.hpp"
#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "layers/kokkos_runtime.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/trace.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::engine {
namespace {

using layers::GPT;

double slowest(double seconds, MPI_Comm comm) {
  parallel::MpiComm(parallel::borrow_comm(comm), "profile")
      .all_reduce(Span<double>(&seconds, 1), parallel::ReduceOp::max);
  return seconds;
}

// The ranks that time an op together, and those of them on this host (their clocks agree).
struct Timers {
  MPI_Comm all;
  MPI_Comm host;
};

// Median seconds of `op` over `repeats` (after one untimed run), the slowest rank's. Each
// repetition starts when the host's last rank reached the barrier, not when this rank saw it
// complete: with more ranks than cores, a rank whose core-mate holds the core sees it only
// when the core comes back, maybe after the core-mate's op; timed from there, an op shorter
// than the scheduler's time slice ran at a whole core's speed in the profile (the head of tiny
// at 4 ranks on 2 cores: 2.5 ms, half of what it costs beside a computing core-mate), and
// pipelines ran 10-15% slower than planned.
double time_op(const Timers& ranks, int repeats, const std::function<void()>& before,
               const std::function<void()>& op) {
  parallel::MpiComm host(parallel::borrow_comm(ranks.host), "profile");
  std::vector<double> t;
  for (int r = 0; r <= repeats; ++r) {
    if (before) before();
    Kokkos::fence();
    double start = parallel::steady_seconds(); // this rank's arrival; the host's last below
    // Waited for as the job waits: a rank spinning in MPI_Barrier after the others left it
    // would take a core from the op being timed (at 4 ranks on 2 cores the all-reduce's fitted
    // latency was 837 us after MPI_Barrier, 35 us after this).
    MPI_Request barrier = MPI_REQUEST_NULL;
    GRIDLM_MPI_CHECK(MPI_Ibarrier(ranks.all, &barrier));
    parallel::complete(barrier, "MPI_Ibarrier (profile)");
    op();
    Kokkos::fence();
    const double end = parallel::steady_seconds();
    host.all_reduce(Span<double>(&start, 1), parallel::ReduceOp::max);
    if (r > 0) t.push_back(end - start);
  }
  return slowest(median(t), ranks.all);
}

void fill_random(Kokkos::View<float*> v, float scale, unsigned seed) {
  auto host = Kokkos::create_mirror_view(v);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (std::size_t i = 0; i < host.extent(0); ++i)
    host(i) = dist(gen);
  Kokkos::deep_copy(v, host);
}

// F, fused B, split B and W of one stage made of `spec`, with micro-batches of B sequences.
struct StageTimer {
  const layers::ModelConfig& model;
  int B, T, repeats;
  Timers ranks;
  parallel::Comm* tp;
  layers::Precision precision;

  OpTimes time(const layers::StageSpec& spec) const {
    GPT fused(model, B, T, spec, tp, 1, layers::Backward::fused, precision);
    GPT split(model, B, T, spec, tp, 1, layers::Backward::split, precision);
    fill_random(fused.params(), 0.02f, 1);
    fill_random(split.params(), 0.02f, 1);
    const std::size_t n = std::size_t(B) * T;
    std::vector<std::int32_t> tokens(n), targets(n);
    std::mt19937 gen(2);
    for (std::size_t i = 0; i < n; ++i)
      tokens[i] = int(gen() % model.vocab_size), targets[i] = int(gen() % model.vocab_size);
    Kokkos::View<float*> input("engine::profile::input", n * model.d_model);
    Kokkos::View<float*> dout("engine::profile::doutput", n * model.d_model);
    fill_random(input, 1.0f, 3);
    fill_random(dout, 1e-3f, 4);
    const std::int32_t* tok = spec.embedding ? tokens.data() : nullptr;
    const float* in = spec.embedding ? nullptr : input.data();
    const std::int32_t* tgt = spec.head ? targets.data() : nullptr;
    const float* d = spec.head ? nullptr : dout.data();
    OpTimes t;
    t.forward = time_op(ranks, repeats, nullptr, [&] { fused.forward_micro(0, tok, in, tgt); });
    t.backward = time_op(
        ranks, repeats, [&] { fused.forward_micro(0, tok, in, tgt); },
        [&] { fused.backward(1.0f, d, 0); });
    // A split B leaves its slot waiting for W: each repetition's set-up runs the pending W.
    bool pending = false;
    t.backward_input = time_op(
        ranks, repeats,
        [&] {
          if (pending) split.backward_weights(0);
          split.forward_micro(0, tok, in, tgt);
          pending = true;
        },
        [&] { split.backward_input(1.0f, d, 0); });
    split.backward_weights(0);
    t.backward_weight = time_op(
        ranks, repeats,
        [&] {
          split.forward_micro(0, tok, in, tgt);
          split.backward_input(1.0f, d, 0);
        },
        [&] { split.backward_weights(0); });
    return t;
  }
};

OpEntry time_entry(const layers::ModelConfig& model, layers::Precision precision, int tp_size,
                   int B, int repeats, const Timers& ranks) {
  const MPI_Comm world = ranks.all;
  const int rank = parallel::comm_rank(world);
  MPI_Comm tp_raw = MPI_COMM_NULL;
  GRIDLM_MPI_CHECK(MPI_Comm_split(world, rank / tp_size, rank, &tp_raw));
  const parallel::MpiCommHandle tp_handle = parallel::own_comm(tp_raw);
  // The backend a run would choose (NCCL on a GPU build): the model's buffers are device memory.
  const std::unique_ptr<parallel::Comm> tp =
      tp_size > 1 ? make_comm(tp_handle, "tp", resolve_backend("auto")) : nullptr;
  const StageTimer timer{model, B, model.seq_len, repeats, ranks, tp.get(), precision};
  OpEntry e;
  e.tp = tp_size;
  e.micro_batch = B;
  e.block = timer.time(layers::StageSpec{0, 1, false, false});
  e.embedding = timer.time(layers::StageSpec{0, 0, true, false});
  e.head = timer.time(layers::StageSpec{model.n_layer, model.n_layer, false, true});
  return e;
}

double time_optimizer(const layers::ModelConfig& model, int repeats, const Timers& ranks) {
  // One block's parameters: the cost is per parameter, and a whole model may not fit one rank.
  const layers::ParamTable table =
      layers::make_param_table(model, layers::StageSpec{0, 1, false, false}, 0, 1);
  Kokkos::View<float*> params("engine::profile::params", table.total);
  Kokkos::View<float*> grads("engine::profile::grads", table.total);
  fill_random(params, 0.02f, 5);
  fill_random(grads, 1e-3f, 6);
  layers::AdamW adamw(layers::OptimizerConfig{}, table);
  int step = 0;
  const double s =
      time_op(ranks, repeats, nullptr, [&] { adamw.update(params, grads, step++, 1e-4, 1.0); });
  return s / double(table.total);
}

// One collective's samples over `c` (every rank of ranks.all at once), on buffers in the memory
// the model's collectives use (the GPU's under NCCL).
std::vector<CommSample> time_collective(const Timers& ranks, parallel::Comm& c,
                                        const std::vector<double>& sizes, int repeats,
                                        const std::string& kind) {
  const int g = c.size();
  std::vector<CommSample> out;
  for (const double bytes : sizes) {
    const std::size_t n = std::max<std::size_t>(g, std::size_t(bytes / 4) / g * g);
    Kokkos::View<float*> send("engine::profile::send", n), receive("engine::profile::receive", n);
    Kokkos::deep_copy(send, 1.0f);
    float* const a = send.data();
    float* const b = receive.data();
    std::function<void()> op;
    if (kind == "all_reduce") {
      op = [&] { c.all_reduce(Span<float>(a, n)); };
    } else if (kind == "reduce_scatter") {
      op = [&] { c.reduce_scatter(Span<const float>(a, n), Span<float>(b, n / g)); };
    } else if (kind == "all_gather") {
      op = [&] { c.all_gather(Span<const float>(a, n / g), Span<float>(b, n)); };
    } else {
      // Pairs (0, 1), (2, 3), ...: each sends to its partner and receives from it.
      const int peer = c.rank() ^ 1;
      op = [&] {
        if (peer >= g) return;
        if (c.rank() % 2 == 0) {
          c.send(Span<const float>(a, n), peer);
          c.recv(Span<float>(b, n), peer);
        } else {
          c.recv(Span<float>(b, n), peer);
          c.send(Span<const float>(a, n), peer);
        }
      };
    }
    // The send/receive above is a round trip: half of it is one transfer.
    const double s = time_op(ranks, repeats, nullptr, op) / (kind == "send_recv" ? 2.0 : 1.0);
    out.push_back(CommSample{kind == "send_recv" ? 2 : g, double(n) * 4, s});
  }
  return out;
}

// How late a message reaches a rank of `node` that has waited longer than the yield window of a
// wait for a neighbour's op (a pipeline stage waiting for its input): under parallel.wait =
// yield it sleeps between polls. Rank 0 sends its clock to every other rank at phases spread
// over a nap; each keeps the median delay and the node the mean of those.
double time_wake(MPI_Comm node) {
  parallel::MpiComm c(parallel::borrow_comm(node), "profile", parallel::WaitFor::neighbour_op);
  if (c.size() < 2) return 0;
  constexpr int samples = 16;
  std::vector<double> delays;
  for (int i = 0; i < samples; ++i) {
    std::vector<double> sync{0.0};
    c.all_reduce(Span<double>(sync));
    std::vector<double> sent{0.0};
    if (c.rank() == 0) {
      const double pause =
          2 * parallel::neighbour_yield_seconds + parallel::neighbour_nap_seconds * i / samples;
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
      sent[0] = parallel::steady_seconds();
      for (int r = 1; r < c.size(); ++r)
        c.send(Span<const double>(sent), r);
    } else {
      c.recv(Span<double>(sent), 0);
      delays.push_back(parallel::steady_seconds() - sent[0]);
    }
  }
  std::vector<double> mean{c.rank() == 0 ? 0.0 : median(delays) / (c.size() - 1)};
  c.all_reduce(Span<double>(mean));
  return mean[0];
}

// The four link fits over ranks.all, timed on `backend` (the one a run's collectives use).
CommCosts measure_comm(const Timers& ranks, const std::string& backend,
                       const std::vector<double>& sizes, int repeats) {
  const std::unique_ptr<parallel::Comm> c =
      make_comm(parallel::borrow_comm(ranks.all), "profile", backend);
  CommCosts costs;
  costs.all_reduce = fit_link(time_collective(ranks, *c, sizes, repeats, "all_reduce"),
                              all_reduce_latency_steps, all_reduce_bandwidth_share);
  costs.reduce_scatter = fit_link(time_collective(ranks, *c, sizes, repeats, "reduce_scatter"),
                                  half_latency_steps, half_bandwidth_share);
  costs.all_gather = fit_link(time_collective(ranks, *c, sizes, repeats, "all_gather"),
                              half_latency_steps, half_bandwidth_share);
  costs.send_recv =
      fit_link(time_collective(ranks, *c, sizes, repeats, "send_recv"), one_step, one_step);
  return costs;
}

// Throws the Error that names a request measure_profile cannot carry out on `ranks` ranks.
void check_request(const ProfileRequest& req, int ranks, int node_size) {
  if (req.repeats < 1) throw Error("--repeats must be at least 1");
  if (req.passes < 1) throw Error("--passes must be at least 1");
  auto once = [](const std::vector<int>& v, const char* option) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::find(v.begin(), v.begin() + long(i), v[i]) != v.begin() + long(i)) {
        throw Error(fmt::format("{}: {} twice", option, v[i]));
      }
    }
  };
  once(req.micro_batches, "--micro-batches");
  once(req.tp, "--tp");
  for (const int b : req.micro_batches) {
    if (b < 1) throw Error(fmt::format("--micro-batches: {} is not a positive size", b));
  }
  for (const int t : req.tp) {
    if (t < 1 || ranks % t != 0 || req.model.n_head % t != 0) {
      throw Error(fmt::format("--tp {}: a tensor-parallel degree must divide the ranks ({}) "
                              "and model.n_head ({}); give degrees that divide both",
                              t, ranks, req.model.n_head));
    }
    if (t > node_size) {
      throw Error(fmt::format("--tp {}: a tensor group must fit on one node ({} ranks here)", t,
                              node_size));
    }
  }
}

} // namespace

Profile measure_profile(const ProfileRequest& req, MPI_Comm world) {
  const int rank = parallel::comm_rank(world), size = parallel::comm_size(world);
  const parallel::MpiCommHandle node = parallel::split_nodes(world);
  const int node_rank = parallel::comm_rank(*node), node_size = parallel::comm_size(*node);
  parallel::run_agreed(world, [&] { check_request(req, size, node_size); });
  Profile p;
  p.source = "profile";
  p.name = host_name();
  p.gridlm_version = build::version;
  p.ranks = size;
  p.ranks_per_node = slowest(node_size, world);
  p.model = req.model;
  p.precision = req.precision;
  p.comm_backend = resolve_backend("auto");
  const layers::Precision precision = parse_precision(req.precision);
  const double available = node_available_bytes();
  // GPU builds hold the model in device memory, which the engine's estimate does not check.
  // Every rank takes part in the minimum (a node that cannot read MemAvailable offers none).
  constexpr double unknown = 1e300;
  const double smallest = -slowest(-(available > 0 ? available / node_size : unknown), world);
  p.memory_per_rank = build::cuda || smallest >= unknown ? 0 : smallest;
  // The ops below are timed with every rank computing: on a node with more compute threads than
  // cores each gets its share, which the planner takes out again for layouts whose stages wait.
  // The three from the most crowded node, so that they agree with ranks_per_node (the most
  // ranks of any node). Device builds compute on GPUs: their CPU cores are not shared out.
  const parallel::NodeCores cores = parallel::node_cores(world, layers::compute_threads_per_rank());
  p.threads_per_rank = std::max(1, cores.threads / cores.ranks);
  p.core_share = -slowest(-std::min(1.0, double(cores.cores) / cores.threads), world);
  p.cores_per_node = p.core_share * p.ranks_per_node * p.threads_per_rank;
  if (build::cuda) p.core_share = 1, p.cores_per_node = 0;
  // Each pass times every op: a burst of the host's noise (a profile of the tiny model lasts
  // about a second; its block forward came out 6.3-8.0 ms in four profiles in a row) lands in
  // one pass and the median over passes drops it.
  std::vector<std::vector<OpEntry>> passes(std::size_t(req.passes));
  std::vector<double> optimizer;
  for (auto& pass : passes) {
    for (const int t : req.tp) {
      for (const int b : req.micro_batches)
        pass.push_back(time_entry(req.model, precision, t, b, req.repeats, {world, *node}));
    }
    optimizer.push_back(time_optimizer(req.model, req.repeats, {world, *node}));
  }
  p.ops = median_over_passes(passes);
  p.optimizer_per_param = median(optimizer);
  if (node_size > 1) {
    p.intra = measure_comm({*node, *node}, p.comm_backend, req.message_bytes, req.repeats);
    p.wake = time_wake(*node);
  }
  int nodes = node_rank == 0 ? 1 : 0;
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_SUM, world));
  if (nodes > 1) {
    // One rank per node in each communicator, all of them measuring at once.
    MPI_Comm across = MPI_COMM_NULL;
    GRIDLM_MPI_CHECK(MPI_Comm_split(world, node_rank, rank, &across));
    const parallel::MpiCommHandle owned = parallel::own_comm(across);
    p.inter = measure_comm({across, *node}, p.comm_backend, req.message_bytes, req.repeats);
  }
  // Inside a node with one rank there is nothing to measure: the link is never used.
  if (node_size == 1) p.intra = CommCosts{{0, 1e12}, {0, 1e12}, {0, 1e12}, {0, 1e12}};
  // Link fits differ from node to node: rank 0's profile is everyone's, so that every rank
  // plans the same layout.
  std::string text = profile_to_json(p);
  parallel::broadcast_text(world, text);
  return profile_from_json(text, "the measured profile");
}

} // namespace gridlm::engine
