// The pipeline executor.
#include "app/pipeline.hpp"

#include <cmath>
#include <deque>
#include <map>

#include <fmt/format.h>

#include "app/stage_layout.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/schedule_transfers.hpp"

namespace gridlm::app {
namespace {

using Buffer = Kokkos::View<float*>;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

TraceKind trace_kind(parallel::OpKind k) {
  return k == parallel::OpKind::F   ? TraceKind::forward
         : k == parallel::OpKind::B ? TraceKind::backward
                                    : TraceKind::weight;
}

} // namespace

Pipeline::Pipeline(const layers::ModelConfig& model, int B, int T, const parallel::Grid& grid,
                   const parallel::Schedule& schedule, parallel::Comm* tp, PipelineOptions options,
                   std::unique_ptr<parallel::Comm> pp)
    : grid_(grid), schedule_(schedule), options_(std::move(options)), stage_(grid.coords().pp),
      p_(grid.layout().pp), v_(schedule.chunks), Q_(p_ * v_), B_(B), T_(T), C_(model.d_model) {
  pp_mpi_ = grid.make_mpi_comm(parallel::Axis::pp);
  pp_owned_ = std::move(pp);
  pp_ = pp_owned_ ? pp_owned_.get() : pp_mpi_.get();
  parallel::run_agreed(grid.comm(), [&] {
    if (schedule.stages != p_) {
      throw Error(
          fmt::format("the schedule has {} stages but parallel.pp = {}", schedule.stages, p_));
    }
    if (schedule.micro_batches > 4096) throw Error("at most 4096 micro-batches per step");
    // An explicit layout is checked as the user's would be: every block exactly once.
    blocks_ =
        plan_stage_blocks(model, Q_,
                          options_.stage_blocks.empty() ? std::string("uniform")
                                                        : stage_blocks_text(options_.stage_blocks));
    first_block_.assign(1, 0);
    for (int n : blocks_)
      first_block_.push_back(first_block_.back() + n);
    eval_schedule_ = parallel::make_schedule(parallel::ScheduleKind::forward_only, p_,
                                             std::max(1, options_.eval_micro_batches), v_);
    if (options_.grouped_transfers) {
      const std::string problem = parallel::check_grouped_transfers(schedule) +
                                  parallel::check_grouped_transfers(eval_schedule_);
      if (!problem.empty()) {
        throw Error(fmt::format("schedule {} cannot run its stage transfers in NCCL groups ({}); "
                                "use another schedule or MPI stage transfers",
                                parallel::schedule_name(schedule.kind), problem));
      }
    }
    const parallel::Timeline tl = parallel::simulate(schedule, {});
    const int slots = std::max(1, tl.peak_in_flight[stage_]);
    const bool split = schedule.kind == parallel::ScheduleKind::zb_h1;
    for (int c = 0; c < v_; ++c) {
      const int q = c * p_ + stage_;
      const layers::StageSpec spec{first_block_[q], first_block_[q + 1], q == 0, q == Q_ - 1};
      chunks_.push_back(std::make_unique<layers::GPT>(model, B, T, spec, tp, slots, split));
    }
  });
}

double Pipeline::step(const Samples& samples, float loss_weight, float* first_logits,
                      std::vector<double>* micro_losses) {
  const double step_start = steady_seconds();
  TraceRecorder* trace =
      options_.trace != nullptr && options_.trace->on() ? options_.trace : nullptr;
  const OpsResult r = run_ops(schedule_, samples, loss_weight, first_logits, micro_losses, trace);
  sum_tied_embedding_grads();
  return finish_step(r.last_end - step_start, r.busy, r.loss_sum, r.op_seconds, r.op_count) /
         schedule_.micro_batches;
}

double Pipeline::evaluate(const Samples& samples) {
  const OpsResult r = run_ops(eval_schedule_, samples, 0.0f, nullptr, nullptr, nullptr);
  std::vector<double> loss{r.loss_sum};
  pp_mpi_->all_reduce(Span<double>(loss));
  return loss[0] / eval_schedule_.micro_batches;
}

Pipeline::OpsResult Pipeline::run_ops(const parallel::Schedule& schedule, const Samples& samples,
                                      float loss_weight, float* first_logits,
                                      std::vector<double>* micro_losses, TraceRecorder* trace) {
  const std::vector<parallel::Op>& ops = schedule.ops[stage_];
  const long N = long(B_) * T_, NC = N * C_;
  auto buffer = [&] {
    return Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "app::Pipeline::transfer"),
                  std::size_t(NC));
  };
  // Received (or handed over in memory, between chunks on this stage) inputs, by tag.
  std::map<int, Buffer> inbox;
  std::map<int, parallel::Request> pending;
  auto post_receive = [&](int from, int tag) {
    inbox[tag] = buffer();
    pending.emplace(tag, pp_->irecv(Span<float>(inbox[tag].data(), std::size_t(NC)), from, tag));
  };
  if (!options_.grouped_transfers) {
    for (const parallel::Op& op : ops) {
      const parallel::OpTransfers t = parallel::op_transfers(schedule, stage_, op);
      if (t.recv_from >= 0 && t.recv_from != stage_) post_receive(t.recv_from, t.recv_tag);
    }
  }
  struct Outgoing {
    Buffer data;
    int to, tag;
  };
  std::vector<Outgoing> deferred; // grouped: sends that go out with the next op's group
  // Sends in flight with their buffers, oldest first; a buffer is released once its send is
  // done, so the step holds only the outputs still travelling, not one per op.
  std::deque<std::pair<parallel::Request, Buffer>> sends;
  auto post_send = [&](const Outgoing& o) {
    sends.emplace_back(pp_->isend(Span<const float>(o.data.data(), std::size_t(NC)), o.to, o.tag),
                       o.data);
  };

  std::vector<std::map<int, int>> slot_of(v_); // per chunk: micro-batch -> activation slot
  std::vector<std::vector<int>> free_slots(v_);
  for (int c = 0; c < v_; ++c) {
    for (int s = chunks_[c]->slots() - 1; s >= 0; --s)
      free_slots[c].push_back(s);
  }
  std::vector<std::int32_t> seq(std::size_t(B_) * (T_ + 1)), x(static_cast<std::size_t>(N)),
      y(static_cast<std::size_t>(N));
  OpsResult r;
  r.last_end = steady_seconds();
  r.op_seconds.assign(std::size_t(3 * v_), 0.0); // per chunk: F, B, W
  r.op_count.assign(std::size_t(3 * v_), 0);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const parallel::Op& op = ops[i];
    const parallel::OpTransfers t = parallel::op_transfers(schedule, stage_, op);
    const int q = op.chunk * p_ + stage_;
    layers::GPT& gpt = *chunks_[op.chunk];
    if (options_.grouped_transfers) {
      parallel::Group group(*pp_);
      for (const Outgoing& o : deferred)
        post_send(o);
      deferred.clear();
      if (t.recv_from >= 0 && t.recv_from != stage_) post_receive(t.recv_from, t.recv_tag);
    }
    const double wait_start = steady_seconds();
    Buffer input;
    if (t.recv_from >= 0) {
      if (t.recv_from != stage_) pending.at(t.recv_tag).wait();
      input = inbox.at(t.recv_tag);
    }
    const double op_start = steady_seconds();
    comm_seconds_ += op_start - wait_start;
    if (trace != nullptr && op_start - wait_start > 5e-6) {
      trace->add(TraceKind::wait, wait_start, op_start, op.micro, op.chunk);
    }
    const float* output = nullptr;
    if (op.kind == parallel::OpKind::F) {
      if (free_slots[op.chunk].empty()) throw Error("pipeline: no free activation slot");
      const int slot = free_slots[op.chunk].back();
      free_slots[op.chunk].pop_back();
      slot_of[op.chunk][op.micro] = slot;
      if (q == 0 || q == Q_ - 1) {
        samples(op.micro, seq);
        for (int b = 0; b < B_; ++b) {
          const std::int32_t* s = seq.data() + std::size_t(b) * (T_ + 1);
          std::copy(s, s + T_, x.data() + std::size_t(b) * T_);
          std::copy(s + 1, s + T_ + 1, y.data() + std::size_t(b) * T_);
        }
      }
      float* logits = Q_ == 1 && op.micro == 0 ? first_logits : nullptr;
      const double loss = gpt.forward_stage(x.data(), input.data(), y.data(), B_, T_, logits, slot);
      if (q == Q_ - 1 && micro_losses != nullptr) micro_losses->push_back(loss);
      r.loss_sum += loss;
      output = gpt.output(slot);
      if (schedule.kind == parallel::ScheduleKind::forward_only)
        free_slots[op.chunk].push_back(slot);
    } else if (op.kind == parallel::OpKind::B) {
      const int slot = slot_of[op.chunk].at(op.micro);
      if (gpt.split_backward()) {
        gpt.backward_input(loss_weight, input.data(), slot);
      } else {
        gpt.backward(loss_weight, input.data(), slot);
        free_slots[op.chunk].push_back(slot);
      }
      output = gpt.input_grad();
    } else {
      const int slot = slot_of[op.chunk].at(op.micro);
      gpt.backward_weights(slot);
      free_slots[op.chunk].push_back(slot);
    }
    inbox.erase(t.recv_tag); // the model copied what it needs
    if (t.send_to >= 0) {
      Outgoing o{buffer(), t.send_to, t.send_tag};
      Kokkos::deep_copy(o.data, Kokkos::View<const float*, Unmanaged>(output, std::size_t(NC)));
      if (t.send_to == stage_) {
        inbox[t.send_tag] = o.data;
      } else {
        if (options_.grouped_transfers) {
          deferred.push_back(o);
        } else {
          post_send(o);
        }
      }
    }
    while (!sends.empty() && sends.front().first.test())
      sends.pop_front();
    Kokkos::fence();
    r.last_end = steady_seconds();
    r.busy += r.last_end - op_start;
    const std::size_t k = std::size_t(3 * op.chunk + static_cast<int>(op.kind));
    r.op_seconds[k] += r.last_end - op_start;
    ++r.op_count[k];
    if (trace != nullptr) trace->add(trace_kind(op.kind), op_start, r.last_end, op.micro, op.chunk);
  }
  if (!deferred.empty()) {
    parallel::Group group(*pp_);
    for (const Outgoing& o : deferred)
      post_send(o);
  }
  for (auto& send : sends)
    send.first.wait();
  return r;
}

void Pipeline::sum_tied_embedding_grads() {
  // Tied embeddings: the first and the last virtual stage hold copies of wte; both end with the
  // sum of their gradients, so the two copies stay identical.
  const layers::ModelConfig& mc = chunks_[0]->config();
  if (!mc.tied_embeddings || Q_ == 1) return;
  layers::GPT* first = stage_ == 0 ? chunks_[0].get() : nullptr;
  layers::GPT* last = stage_ == p_ - 1 ? chunks_[v_ - 1].get() : nullptr;
  // Every stage joins the all-reduce (middle stages with zeros): one collective over pp.
  const std::size_t n = std::size_t(
      layers::padded_vocab_slice(mc.vocab_size, chunks_[0]->table().tp_size) * mc.d_model);
  using Host = Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>;
  std::vector<float> sum(n, 0.0f), copy(n);
  for (layers::GPT* g : {first, last}) {
    if (g == nullptr) continue;
    Kokkos::deep_copy(Host(copy.data(), n),
                      Kokkos::View<const float*, Unmanaged>(g->grad(g->table().wte), n));
    for (std::size_t i = 0; i < n; ++i)
      sum[i] += copy[i];
  }
  pp_mpi_->all_reduce(Span<float>(sum));
  for (layers::GPT* g : {first, last}) {
    if (g == nullptr) continue;
    Kokkos::deep_copy(Kokkos::View<float*, Unmanaged>(g->grad(g->table().wte), n),
                      Host(sum.data(), n));
  }
}

double Pipeline::finish_step(double span, double busy, double loss_sum,
                             const std::vector<double>& op_seconds,
                             const std::vector<int>& op_count) {
  // Per stage: span, busy, loss, then the mean F, B, W seconds of each chunk.
  const std::size_t per = 3 + op_seconds.size();
  std::vector<double> mine{span, busy, loss_sum};
  for (std::size_t k = 0; k < op_seconds.size(); ++k)
    mine.push_back(op_count[k] > 0 ? op_seconds[k] / op_count[k] : 0.0);
  std::vector<double> all(per * std::size_t(p_));
  pp_mpi_->all_gather(Span<const double>(mine), Span<double>(all));
  double slowest = 0.0, busy_total = 0.0, loss = 0.0;
  for (int s = 0; s < p_; ++s) {
    slowest = std::max(slowest, all[per * s]);
    busy_total += all[per * s + 1];
    loss += all[per * s + 2];
  }
  timing_.seconds = slowest;
  timing_.bubble = slowest > 0.0 ? 1.0 - busy_total / (p_ * slowest) : 0.0;
  auto cost = [&](int s, const parallel::Op& op) {
    return all[per * s + 3 + std::size_t(3 * op.chunk + static_cast<int>(op.kind))];
  };
  timing_.predicted_bubble = parallel::simulate(schedule_, cost, 0.0).bubble;
  return loss;
}

double Pipeline::grad_norm_squared(parallel::Comm* tp) const {
  std::vector<double> total{0.0};
  for (const auto& chunk : chunks_)
    total[0] += chunk->grad_sum_of_squares();
  pp_mpi_->all_reduce(Span<double>(total));
  if (tp != nullptr && tp->size() > 1) tp->all_reduce(Span<double>(total));
  return total[0];
}

int Pipeline::stage_of(const layers::ParamInfo& p) const {
  if (p.block >= 0) {
    for (int q = 0; q < Q_; ++q) {
      if (p.block < first_block_[q + 1]) return q % p_;
    }
  }
  if (p.name == "wte.weight" || p.name == "wpe.weight") return 0;
  return (Q_ - 1) % p_; // final norm and LM head: the last virtual stage
}

double Pipeline::comm_seconds() const {
  double s = comm_seconds_;
  for (const auto& chunk : chunks_)
    s += chunk->comm_seconds();
  return s;
}

} // namespace gridlm::app
