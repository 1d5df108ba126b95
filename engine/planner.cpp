// The planner's cost model and search.
#include "engine/planner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "engine/memory_budget.hpp"
#include "engine/op_costs.hpp"
#include "layers/model_config.hpp"
#include "layers/parameters.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/schedule.hpp"
#include "parallel/stage_layout.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::engine {
namespace {

// Floats of parameters a rank of stage st (of P, each of `chunks` virtual stages q = ch P + st)
// holds, from the model's own table: all of them, and the embeddings' (at the flat buffer's
// start, so their gradients are reduced last).
struct StageParams {
  double all = 0, embeddings = 0;
};
StageParams stage_params(const layers::ModelConfig& m, const std::vector<int>& blocks, int st,
                         int P, int chunks, int tp) {
  StageParams out;
  for (int q = st; q < P * chunks; q += P) {
    int first = 0;
    for (int i = 0; i < q; ++i)
      first += blocks[i];
    const layers::StageSpec spec{first, first + blocks[q], q == 0, q == int(blocks.size()) - 1};
    const layers::ParamTable t = layers::make_param_table(m, spec, 0, tp);
    out.all += double(t.total);
    for (const layers::ParamInfo& p : t.params)
      if (p.kind == layers::ParamKind::embedding) out.embeddings += double(p.size);
  }
  return out;
}

// Whether every replica's pipeline (ranks d tp P ... (d + 1) tp P - 1) lies inside one node.
bool pipelines_inside_nodes(const parallel::Layout& l, int ranks_per_node) {
  const int span = l.tp * l.pp;
  for (int d = 0; d < l.dp; ++d) {
    if ((d * span) / ranks_per_node != (d * span + span - 1) / ranks_per_node) return false;
  }
  return true;
}

// In increasing order; pairs up to sqrt(n), not a pass over all of n (a global batch of 2e9).
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int i = 1; i <= n / i; ++i) {
    if (n % i != 0) continue;
    low.push_back(i);
    if (i != n / i) high.push_back(n / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

void check_profiled_model(const Profile& machine, const layers::ModelConfig& m,
                          const std::string& precision) {
  if (machine.source == "machine") return;
  if (machine.precision != precision) {
    throw Error(fmt::format("the profile timed {} products; this configuration's "
                            "train.precision is {}: measure a profile with train.precision = "
                            "{} (gridlm profile --config ... --set train.precision={})",
                            machine.precision, precision, precision, precision));
  }
  const layers::ModelConfig& pm = machine.model;
  if (pm.vocab_size != m.vocab_size || pm.seq_len != m.seq_len || pm.n_head != m.n_head ||
      pm.d_model != m.d_model || pm.tied_embeddings != m.tied_embeddings) {
    throw Error(fmt::format("the profile measured a model of vocabulary {}, context {}, {} heads, "
                            "width {}, tied embeddings {}; this configuration's is {}, {}, {}, "
                            "{}, {}: measure a profile of this model (gridlm profile --config ...)",
                            pm.vocab_size, pm.seq_len, pm.n_head, pm.d_model, pm.tied_embeddings,
                            m.vocab_size, m.seq_len, m.n_head, m.d_model, m.tied_embeddings));
  }
}

// A stage's data-parallel gradient reduction: what of it the step waits for, and ZeRO-1's
// parameter all-gather that the next forward waits for.
struct DpCost {
  double exposed = 0, gather = 0;
};
// `late_bytes`: the embeddings' gradients at the buffer's start, which the engine reduces only
// once the step's ops are done (engine/grad_sync.hpp).
DpCost dp_cost(double bytes, double late_bytes, double bucket_bytes, int dp, int zero,
               const CommCosts& link, double window, double first_forward) {
  DpCost d;
  if (dp <= 1) return d;
  const int buckets = bucket_bytes > 0 ? int(std::ceil(bytes / bucket_bytes)) : 1;
  const double one = std::min(bytes, bucket_bytes > 0 ? bucket_bytes : bytes);
  auto time = [&](double n) {
    return zero ? reduce_scatter_seconds(link.reduce_scatter, n, dp)
                : all_reduce_seconds(link.all_reduce, n, dp);
  };
  auto in_buckets = [&](double n) { // n bytes as buckets of `one` and a last, smaller one
    const double whole = std::floor(n / one), rest = n - whole * one;
    return whole * time(one) + (rest > 0 ? time(rest) : 0.0);
  };
  // Buckets (counted from the buffer's end) wholly past the embeddings start while the stage's
  // last weight-gradient op runs (`window`); the others, after the ops. The last bucket cannot
  // hide.
  const double early = bucket_bytes > 0 ? std::floor((bytes - late_bytes) / one) * one : 0.0;
  const double hidden = std::max(0.0, in_buckets(early) - window);
  d.exposed = early < bytes ? hidden + in_buckets(bytes - early) : std::max(time(one), hidden);
  if (zero) {
    const double ag = buckets * all_gather_seconds(link.all_gather, one, dp);
    // The next forward waits for each bucket where it first reads it.
    d.gather = std::max(all_gather_seconds(link.all_gather, one, dp), ag - first_forward);
  }
  return d;
}

// The share of a core each compute thread gets when every rank computes (the optimizer).
double all_busy_share(const parallel::CoreSharing& sh) {
  double most = 0;
  for (std::size_t n = 0; n < sh.ranks.front().size(); ++n) {
    double threads = 0;
    for (const auto& stage : sh.ranks)
      threads += stage[n] * sh.threads_per_rank;
    most = std::max(most, threads);
  }
  return std::min(1.0, sh.cores / most);
}

// How a layout's ranks share their nodes' cores, from a measured profile; none where every
// thread has a core even with all computing (the plain simulation then gives the same) or from
// a machine file (one device per rank). Rank d tp P + s tp + t (replica d, stage s, tensor rank
// t) lies on node rank / K.
std::optional<parallel::CoreSharing> core_sharing(const Profile& p, const parallel::Layout& l) {
  if (p.source != "profile" || p.cores_per_node <= 0) return std::nullopt;
  const int K = p.ranks_per_node, nodes = (l.size() + K - 1) / K;
  // Oversubscribed nodes wait under parallel.wait = yield: a long wait sleeps between polls.
  parallel::CoreSharing sh{p.cores_per_node,
                           double(p.threads_per_rank),
                           {},
                           parallel::neighbour_yield_seconds,
                           std::max(0.0, p.wake - send_recv_seconds(p.intra.send_recv, 8))};
  sh.ranks.assign(l.pp, std::vector<int>(nodes, 0));
  for (int d = 0; d < l.dp; ++d) {
    for (int st = 0; st < l.pp; ++st) {
      for (int t = 0; t < l.tp; ++t)
        ++sh.ranks[st][(d * l.pp * l.tp + st * l.tp + t) / K];
    }
  }
  if (all_busy_share(sh) >= 1) return std::nullopt;
  return sh;
}

// Seconds of an op of a pipeline stage: its virtual stage's blocks, plus the embedding on the
// first and the head on the last, times `alone` (the share of the timed op it takes alone).
struct StageOpCost {
  OpTimes block, embedding, head;
  const Candidate& c;
  bool split;     // zb-h1: B is the input half, W the weight half
  bool recompute; // B runs the blocks' forward again first
  double alone;
  double operator()(int stage, const parallel::Op& op) const {
    const int P = c.layout.pp, q = op.chunk * P + stage;
    const double n = c.stage_blocks[q];
    const bool first = q == 0, last = q == P * c.chunks - 1;
    auto sum = [&](double OpTimes::*f) {
      return n * block.*f + (first ? embedding.*f : 0.0) + (last ? head.*f : 0.0);
    };
    switch (op.kind) {
    case parallel::OpKind::F: return alone * sum(&OpTimes::forward);
    case parallel::OpKind::B:
      return alone * ((recompute ? n * block.forward : 0.0) +
                      sum(split ? &OpTimes::backward_input : &OpTimes::backward));
    case parallel::OpKind::W: return alone * sum(&OpTimes::backward_weight);
    }
    return 0.0;
  }
};

// Whether NCCL would carry a run's stage transfers on the machine the profile describes: a
// machine file's devices, or a profile timed on NCCL, unless the run asks for MPI.
bool nccl_transfers(const RunConfig& r, const Profile& machine) {
  const std::string& backend = r.parallel.backend;
  return (machine.source == "machine" || machine.comm_backend == "nccl") &&
         (backend == "auto" || backend == "nccl");
}

// map[key], made by make() the first time: what throws is not kept, so a refusal is raised again.
template <class Map, class Make>
const typename Map::mapped_type& find_or_make(Map& map, const typename Map::key_type& key,
                                              const Make& make) {
  const auto found = map.find(key);
  if (found != map.end()) return found->second;
  return map.emplace(key, make()).first->second;
}

// What a search's candidates share, each made once: a pipeline plan (the schedule, how its
// transfers are posted and the proof, the buffers a stage holds) depends on the schedule, pp,
// micro-batches and chunks only, and the balanced stage layout on the virtual stage count only;
// thousands of candidates of a cluster-sized search share a few hundred of them.
class SearchCache {
public:
  // The plan the engine would make for the candidate on this machine; throws its refusal.
  const parallel::PipelinePlan& plan(const RunConfig& config, const Candidate& c,
                                     const Profile& machine) {
    return find_or_make(plans_, {c.schedule, c.layout.pp, c.micro_batches, c.chunks}, [&] {
      const parallel::Schedule s = parallel::make_schedule(parallel::parse_schedule(c.schedule),
                                                           c.layout.pp, c.micro_batches, c.chunks);
      return parallel::plan_pipeline(s, parallel::validation_micro_batches(s),
                                     nccl_transfers(config, machine)
                                         ? parallel::Transfers::grouped_if_proven
                                         : parallel::Transfers::up_front);
    });
  }
  // parallel.stage_layout = "balanced" over `stages` virtual stages; throws its refusal.
  const std::vector<int>& balanced_blocks(const RunConfig& config, int stages) {
    return find_or_make(blocks_, stages, [&] {
      return parallel::plan_stage_blocks(layers::stage_cost_model(config.model), stages,
                                         "balanced");
    });
  }

private:
  std::map<std::tuple<std::string, int, int, int>, parallel::PipelinePlan> plans_;
  std::map<int, std::vector<int>> blocks_;
};

// The engine's estimate, or with recomputation: each block keeps only its input per
// micro-batch in flight, and one block at a time holds its whole activations.
MemoryEstimate planned_memory(const RunConfig& r, const parallel::Layout& l,
                              const parallel::PipelinePlan& plan, const Profile& machine,
                              const PricingOptions& pricing) {
  MemoryEstimate e = estimate_memory(r, l, plan);
  if (!pricing.recompute) return e;
  const layers::ModelConfig& m = r.model;
  const double B = r.train.micro_batch, T = m.seq_len, C = m.d_model, H = m.n_head;
  const double blocks = std::ceil(double(m.n_layer) / l.pp);
  // The schedule's own peak of (micro-batch, chunk) pairs a stage holds, in whole stages: gpipe
  // holds every micro-batch, 1f1b pp of them, interleaved about pp + (pp - 1) / v.
  int held = 0;
  for (int h : plan.uniform.peak_in_flight)
    held = std::max(held, h);
  const double in_flight = double(held) / std::max(1, r.parallel.chunks);
  const double scale = machine.activation_bytes / 4.0;
  const double one_block = 4 * B * T * (20 * C / l.tp + 2 * H / l.tp * T) * scale;
  const double head = 4 * 2 * B * T * m.vocab_size / l.tp * scale;
  e.activations = in_flight * blocks * B * T * C * machine.activation_bytes + one_block + head;
  return e;
}

// The memory each rank of the candidate needs, as the engine would run it.
MemoryEstimate candidate_memory(const RunConfig& config, const Candidate& c,
                                const parallel::PipelinePlan& plan, const Profile& machine,
                                const PricingOptions& pricing) {
  return planned_memory(with_candidate(config, c), c.layout, plan, machine, pricing);
}

// Stages asleep at the pipeline's end (they finished more than the yield window before it):
// the tied copies' exchange and the first collective over the pipeline (log2 pp rounds) each
// wait for one to wake.
double wake_after_pipeline(const parallel::Timeline& tl,
                           const std::optional<parallel::CoreSharing>& sharing, bool tied) {
  const int P = int(tl.stages.size());
  if (!sharing || P < 2) return 0;
  bool slept = false;
  for (const auto& stage : tl.stages)
    slept = slept || stage.back().end < tl.makespan - sharing->yield_for;
  return slept ? sharing->wake * (std::ceil(std::log2(double(P))) + (tied ? 1.0 : 0.0)) : 0;
}

std::string problem_of(const RunConfig& config, const Candidate& c, const Profile& machine,
                       const PricingOptions& pricing, SearchCache& cache) {
  const int K = machine.ranks_per_node;
  const parallel::Layout& l = c.layout;
  if (l.tp > K || (l.size() > K && K % l.tp != 0)) {
    return fmt::format("a tensor group of {} would span nodes of {} ranks", l.tp, K);
  }
  const RunConfig r = with_candidate(config, c);
  try {
    // The checks plan_run and the model make, in the same functions.
    cache.plan(config, c, machine);
    parallel::plan_stage_blocks(layers::stage_cost_model(r.model), l.pp * c.chunks,
                                r.parallel.stage_layout);
    layers::make_param_table(r.model, layers::StageSpec{}, 0, l.tp);
    if (c.micro_batch < 1) return "a micro-batch of no sequences";
    if (std::string v = validation_memory_problem(r.train, r.model.seq_len); !v.empty()) return v;
  } catch (const Error& e) {
    return e.what();
  }
  const MemoryEstimate e =
      candidate_memory(config, c, cache.plan(config, c, machine), machine, pricing);
  if (machine.memory_per_rank > 0 && e.total() > machine.memory_per_rank) {
    return fmt::format("does not fit in memory ({:.2f} GiB per rank of {:.2f} GiB): {}",
                       e.total() / double(1ull << 30), machine.memory_per_rank / double(1ull << 30),
                       e.largest);
  }
  return "";
}

Prediction predict_with(const RunConfig& config, const Candidate& c, const Profile& machine,
                        const PricingOptions& pricing, SearchCache& cache) {
  const layers::ModelConfig& m = config.model;
  check_profiled_model(machine, m, config.train.precision);
  const parallel::Layout& l = c.layout;
  const int K = machine.ranks_per_node, P = l.pp, b = c.micro_batch;
  const parallel::ScheduleKind kind = parallel::parse_schedule(c.schedule);
  const bool split = kind == parallel::ScheduleKind::zb_h1;
  const OpTimes blk = op_cost(machine, config, Piece::block, l.tp, b);
  const OpTimes emb = op_cost(machine, config, Piece::embedding, l.tp, b);
  const OpTimes head = op_cost(machine, config, Piece::head, l.tp, b);
  auto link = [&](bool inside) -> const CommCosts& {
    if (inside || !machine.inter) return machine.intra;
    return *machine.inter;
  };
  // Consecutive stages are tp ranks apart; a dp group spans all ranks (dp is the slowest axis).
  const CommCosts& pp_link = link(pipelines_inside_nodes(l, K));
  const CommCosts& dp_link = link(l.size() <= K);
  const double boundary_bytes = machine.activation_bytes * b * m.seq_len * m.d_model;

  const parallel::Schedule& s = cache.plan(config, c, machine).train;
  // A profile timed its ops with every rank of a node computing: on a node with fewer cores than
  // compute threads, an op alone on its cores takes core_share of that, and the simulation
  // shares the cores out again among the stages computing at each moment.
  const std::optional<parallel::CoreSharing> sharing = core_sharing(machine, l);
  const double alone = machine.source == "profile" ? machine.core_share : 1.0;
  const StageOpCost cost{blk, emb, head, c, split, pricing.recompute, alone};
  const double transfer = P > 1 ? send_recv_seconds(pp_link.send_recv, boundary_bytes) : 0;
  const parallel::Timeline tl = sharing ? parallel::simulate(s, cost, transfer, *sharing)
                                        : parallel::simulate(s, cost, transfer);
  // Every rank runs the optimizer at once.
  const double optimizer_share = sharing ? all_busy_share(*sharing) : 1.0;

  Prediction pr;
  pr.pipeline_seconds = tl.makespan;
  pr.bubble = tl.bubble;
  const double bucket_bytes = config.parallel.grad_bucket_mb * double(1 << 20);
  double after_pipeline = 0, optimizer = 0;
  for (int st = 0; st < P; ++st) {
    const StageParams sp = stage_params(m, c.stage_blocks, st, P, c.chunks, l.tp);
    const auto& last = tl.stages[st].back();
    const DpCost dp = dp_cost(4 * sp.all, 4 * sp.embeddings, bucket_bytes, l.dp, c.zero, dp_link,
                              bucket_bytes > 0 ? last.end - last.start : 0,
                              cost(st, parallel::Op{parallel::OpKind::F, 0, 0}));
    double tied = 0;
    if (P > 1 && m.tied_embeddings && (st == 0 || st == P - 1)) {
      // The two copies' gradients cross once each way, both ways at once (TiedEmbeddingSum).
      const double wte = 4.0 * layers::padded_vocab_slice(m.vocab_size, l.tp) * m.d_model;
      tied = send_recv_seconds(pp_link.send_recv, wte);
    }
    after_pipeline = std::max(after_pipeline, last.end - tl.makespan + dp.exposed + tied);
    pr.dp_exposed_seconds = std::max(pr.dp_exposed_seconds, dp.exposed);
    const double owned = sp.all / (c.zero ? l.dp : 1);
    const double adamw = machine.source == "machine"
                             ? 28.0 * owned / machine.memory_bandwidth
                             : machine.optimizer_per_param * owned * alone / optimizer_share;
    optimizer = std::max(optimizer, adamw + dp.gather);
  }
  after_pipeline += wake_after_pipeline(tl, sharing, m.tied_embeddings);
  // The loss, the gradient norm and the step guard: three scalar all-reduces over the grid.
  const double scalars = 3 * all_reduce_seconds(link(l.size() <= K).all_reduce, 64, l.size());
  pr.optimizer_seconds = optimizer;
  pr.step_seconds = tl.makespan + after_pipeline + scalars + optimizer;
  pr.tokens_per_second =
      double(l.dp) * c.micro_batches * b * m.seq_len / std::max(pr.step_seconds, 1e-12);
  pr.memory_per_rank =
      candidate_memory(config, c, cache.plan(config, c, machine), machine, pricing).total();
  return pr;
}

} // namespace

std::string candidate_problem(const RunConfig& config, const Candidate& c, const Profile& machine,
                              const PricingOptions& pricing) {
  SearchCache cache;
  return problem_of(config, c, machine, pricing, cache);
}

Prediction predict(const RunConfig& config, const Candidate& c, const Profile& machine,
                   const PricingOptions& pricing) {
  SearchCache cache;
  return predict_with(config, c, machine, pricing, cache);
}

int configured_global_batch(const RunConfig& config, int ranks, int ranks_per_node) {
  parallel::LayoutRequest req;
  req.dp = parallel::parse_axis("parallel.dp", config.parallel.dp);
  req.pp = parallel::parse_axis("parallel.pp", config.parallel.pp);
  req.tp = parallel::parse_axis("parallel.tp", config.parallel.tp);
  req.heads = config.model.n_head;
  const parallel::Layout l = parallel::resolve_layout(ranks, req, ranks_per_node);
  return config.train.micro_batch * config.train.grad_accum * l.dp;
}

namespace {

// (schedule, chunks) worth pricing for pp stages of an n_layer-block model: one stage runs
// every schedule alike; interleaving at every chunk count the blocks allow.
std::vector<std::pair<std::string, int>> schedule_choices(int pp, int n_layer) {
  if (pp == 1) return {{"1f1b", 1}};
  std::vector<std::pair<std::string, int>> out{{"gpipe", 1}, {"1f1b", 1}, {"zb-h1", 1}};
  for (int v = 2; v <= n_layer / pp; ++v)
    out.emplace_back("interleaved-1f1b", v);
  return out;
}

// The candidate's balanced stage layout and prediction; throws the reason it cannot run.
Prediction price(const RunConfig& config, Candidate& c, const Profile& machine,
                 const PricingOptions& pricing, SearchCache& cache) {
  c.stage_blocks = cache.balanced_blocks(config, c.layout.pp * c.chunks);
  const std::string problem = problem_of(config, c, machine, pricing, cache);
  if (!problem.empty()) throw Error(problem);
  return predict_with(config, c, machine, pricing, cache);
}

// The profile as the request's nodes see it (their size, their cores), checked against the
// configuration; `caveat` says what it cannot price.
Profile machine_for(const RunConfig& config, const PlanRequest& request, const Profile& machine,
                    std::string& caveat) {
  Profile prof = machine;
  if (request.ranks_per_node > 0 && request.ranks_per_node != prof.ranks_per_node) {
    // Nodes of another size than the profile's: their cores are not known, a core per thread
    // is assumed (what a cluster's nodes give their ranks).
    prof.ranks_per_node = request.ranks_per_node;
    prof.cores_per_node = 0;
    // A measured profile's memory is the node's, shared by its ranks: by more of them, less
    // each (a machine file's is a device's own). Only ever down: a profile of uneven nodes holds
    // its largest node's size and the least memory a rank had, which nodes of fewer ranks must
    // not be promised more of.
    if (prof.source == "profile" && request.ranks_per_node > machine.ranks_per_node) {
      prof.memory_per_rank *= double(machine.ranks_per_node) / request.ranks_per_node;
    }
  }
  if (request.ranks > prof.ranks_per_node && !prof.inter) {
    throw Error(fmt::format("{} ranks of {} per node span nodes, but the profile has no costs "
                            "across nodes (it was measured on one node): profile on two nodes or "
                            "more, or give a machine file with inter_node",
                            request.ranks, prof.ranks_per_node));
  }
  check_profiled_model(prof, config.model, config.train.precision);
  // A machine file without a GEMM rate for this precision is the file's fault, not any layout's:
  // said once, before the search.
  if (prof.source == "machine") matmul_seconds(prof, config.train.precision, 1.0);
  if (prof.source == "profile" && machine.ranks_per_node == 1 && prof.ranks_per_node > 1) {
    caveat = fmt::format(
        "the profile was measured with one rank per node, so the links inside a node that {} "
        "ranks per node use are not measured and are priced as free; profile with {} ranks on "
        "one node (mpiexec -n {} gridlm profile ...) to price them",
        prof.ranks_per_node, prof.ranks_per_node, prof.ranks_per_node);
  }
  return prof;
}

} // namespace

PlanResult plan_layouts(const RunConfig& config, const PlanRequest& request,
                        const Profile& machine) {
  if (request.ranks < 1) throw Error("--ranks must be at least 1");
  PlanResult out;
  const Profile prof = machine_for(config, request, machine, out.caveat);
  out.ranks_per_node = prof.ranks_per_node;
  out.global_batch = request.global_batch > 0
                         ? request.global_batch
                         : configured_global_batch(config, request.ranks, prof.ranks_per_node);
  // Reasons that differ only in their numbers are one reason.
  std::map<std::string, Refusal> refused;
  auto refuse = [&](const Candidate& c, const std::string& why) {
    std::string key;
    for (const char ch : why) {
      const bool digit = ch >= '0' && ch <= '9';
      if (!digit || key.empty() || key.back() != '#') key += digit ? '#' : ch;
    }
    Refusal& r = refused[key];
    if (r.count++ == 0) r.reason = why, r.example = c;
  };
  SearchCache cache;
  for (const parallel::Layout& l : parallel::all_layouts(request.ranks)) {
    if (request.layout && !(*request.layout == l)) continue;
    Candidate c;
    c.layout = l;
    if (out.global_batch % l.dp != 0) {
      ++out.considered;
      refuse(c, fmt::format("the global batch of {} sequences does not divide over dp {}",
                            out.global_batch, l.dp));
      continue;
    }
    for (const int b : divisors(out.global_batch / l.dp)) {
      if (request.max_micro_batch > 0 && b > request.max_micro_batch) continue;
      c.micro_batch = b;
      c.micro_batches = out.global_batch / l.dp / b;
      if (c.micro_batches > parallel::max_micro_batches) {
        // Refused before any schedule is laid out: one of millions of micro-batches takes
        // gigabytes to make.
        ++out.considered;
        refuse(c, fmt::format("{} micro-batches of {} per replica, more than the {} a step can "
                              "take: a larger micro-batch",
                              c.micro_batches, b, parallel::max_micro_batches));
        continue;
      }
      for (const auto& [schedule, chunks] : schedule_choices(l.pp, config.model.n_layer)) {
        c.schedule = schedule, c.chunks = chunks;
        for (c.zero = 0; c.zero <= (l.dp > 1 ? 1 : 0); ++c.zero) {
          ++out.considered;
          try {
            const Prediction p = price(config, c, prof, request.pricing, cache); // sets c's stages
            out.ranked.push_back(Ranked{c, p});
          } catch (const Error& e) {
            refuse(c, e.what());
          }
        }
      }
    }
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.prediction.tokens_per_second > b.prediction.tokens_per_second;
  });
  for (auto& [why, r] : refused)
    out.refused.push_back(r);
  std::stable_sort(out.refused.begin(), out.refused.end(),
                   [](const Refusal& a, const Refusal& b) { return a.count > b.count; });
  return out;
}

} // namespace gridlm::engine
