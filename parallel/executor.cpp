// The pipeline executor.
#include "parallel/executor.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include <fmt/format.h>

#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/schedule_transfers.hpp"

namespace gridlm::parallel {
namespace {

// MPI_TAG_UB: at least 32767 by the standard; MPICH allows 2^28 - 1, others less.
int mpi_tag_upper_bound() {
  void* value = nullptr;
  int found = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found));
  return found != 0 ? *static_cast<int*>(value) : 32767;
}

TraceKind trace_kind(OpKind k) {
  return k == OpKind::F   ? TraceKind::forward
         : k == OpKind::B ? TraceKind::backward
                          : TraceKind::weight;
}

// The transfers of one run of an op list. Received inputs (or ones handed over in memory,
// between chunks on this stage) wait in an inbox by tag. Up front, every receive is posted
// before the first op and each send right after its op; grouped, an op's send is deferred to
// the group posted before the next op (with that op's receive).
class Mailbox {
public:
  Mailbox(Comm& pp, const Stage& memory, int stage, bool grouped)
      : pp_(pp), memory_(memory), stage_(stage), grouped_(grouped), n_(memory.boundary_size()) {}

  // Posts the receive of the input `t` names, when it comes from another stage.
  void receive(const OpTransfers& t) {
    if (t.recv_from < 0 || t.recv_from == stage_) return;
    inbox_[t.recv_tag] = memory_.boundary_buffer();
    pending_.emplace(t.recv_tag,
                     pp_.irecv(Span<float>(inbox_[t.recv_tag].get(), n_), t.recv_from, t.recv_tag));
  }
  // The op's input, waiting for its transfer (empty when the op takes none).
  Stage::Buffer input(const OpTransfers& t) {
    if (t.recv_from < 0) return {};
    if (t.recv_from != stage_) pending_.at(t.recv_tag).wait();
    return inbox_.at(t.recv_tag);
  }
  void done_with_input(const OpTransfers& t) { inbox_.erase(t.recv_tag); }
  // A copy of `output` for the peer `t` names: handed over in memory to a chunk on this stage,
  // deferred to the next group, or sent now.
  void send(const Stage& chunk, const float* output, const OpTransfers& t) {
    Outgoing o{memory_.boundary_buffer(), t.send_to, t.send_tag};
    chunk.copy_boundary(o.data.get(), output);
    if (t.send_to == stage_) {
      inbox_[t.send_tag] = o.data;
    } else if (grouped_) {
      deferred_.push_back(o);
    } else {
      post(o);
    }
  }
  // Inside a group: the sends deferred from the previous op.
  void post_deferred() {
    for (const Outgoing& o : deferred_)
      post(o);
    deferred_.clear();
  }
  // A buffer is released once its send is done, so a step holds only the outputs still
  // travelling, not one per op.
  void release_finished_sends() {
    while (!sends_.empty() && sends_.front().request.test())
      sends_.pop_front();
  }
  // The last op's deferred sends, then every send completed.
  void finish() {
    if (!deferred_.empty()) {
      Group group(pp_);
      post_deferred();
    }
    for (InFlight& send : sends_)
      send.request.wait();
  }

private:
  struct Outgoing {
    Stage::Buffer data;
    int to, tag;
  };
  // A send and the buffer it reads. The request is declared last so that it goes first: on an
  // unwind it is abandoned while its buffer is still held, not after the buffer went back to the
  // pool for another transfer to write.
  struct InFlight {
    Stage::Buffer data;
    Request request;
  };
  void post(const Outgoing& o) {
    sends_.push_back(InFlight{o.data, pp_.isend(Span<const float>(o.data.get(), n_), o.to, o.tag)});
  }

  Comm& pp_;
  const Stage& memory_;
  int stage_;
  bool grouped_;
  std::size_t n_; // floats of a boundary tensor
  std::map<int, Stage::Buffer> inbox_;
  std::map<int, Request> pending_;
  std::vector<Outgoing> deferred_; // grouped: for the next op's group
  std::deque<InFlight> sends_;     // in flight, oldest first
};

// Which activation slot of its chunk each micro-batch holds from F to its last backward op.
class SlotTable {
public:
  explicit SlotTable(const std::vector<Stage*>& chunks) : of_(chunks.size()), free_(chunks.size()) {
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      for (int s = chunks[c]->slots() - 1; s >= 0; --s)
        free_[c].push_back(s);
    }
  }
  int take(const Op& op) {
    std::vector<int>& free = free_[std::size_t(op.chunk)];
    if (free.empty()) throw Error("pipeline: no free activation slot");
    const int slot = free.back();
    free.pop_back();
    of_[std::size_t(op.chunk)][op.micro] = slot;
    return slot;
  }
  int of(const Op& op) const { return of_[std::size_t(op.chunk)].at(op.micro); }
  void release(const Op& op, int slot) { free_[std::size_t(op.chunk)].push_back(slot); }

private:
  std::vector<std::map<int, int>> of_; // per chunk: micro-batch -> slot
  std::vector<std::vector<int>> free_; // per chunk
};

// A micro-batch's tokens as the samples give them, and as inputs and targets.
struct MicroBatch {
  MicroBatch(int B_, int T_)
      : B(B_), T(T_), seq(std::size_t(B) * std::size_t(T + 1)), x(std::size_t(B) * std::size_t(T)),
        y(x.size()) {}
  void fill(const Executor::Samples& samples, int micro) {
    samples(micro, seq);
    for (int b = 0; b < B; ++b) {
      const std::int32_t* s = seq.data() + std::size_t(b) * std::size_t(T + 1);
      std::copy(s, s + T, x.data() + std::size_t(b) * std::size_t(T));
      std::copy(s + 1, s + T + 1, y.data() + std::size_t(b) * std::size_t(T));
    }
  }
  int B, T;
  std::vector<std::int32_t> seq; // [B, T+1]
  std::vector<std::int32_t> x;   // [B, T] inputs
  std::vector<std::int32_t> y;   // [B, T] targets
};

// One op's computation; returns what it sends on (its output, or its input gradient; null for
// W) and adds a forward's loss to loss_sum.
const float* run_op(const Op& op, Stage& chunk, const float* input, SlotTable& slots,
                    MicroBatch& tokens, const Executor::Samples& samples, float loss_weight,
                    bool forward_only, double& loss_sum) {
  if (op.kind == OpKind::F) {
    const int slot = slots.take(op);
    if (chunk.takes_tokens() || chunk.takes_targets()) tokens.fill(samples, op.micro);
    loss_sum += chunk.forward_micro(slot, tokens.x.data(), input, tokens.y.data());
    if (forward_only) slots.release(op, slot);
    return chunk.output(slot);
  }
  const int slot = slots.of(op);
  if (op.kind == OpKind::W) {
    chunk.backward_weights(slot);
    slots.release(op, slot);
    return nullptr;
  }
  if (chunk.split_backward()) {
    chunk.backward_input(loss_weight, input, slot);
  } else {
    chunk.backward(loss_weight, input, slot);
    slots.release(op, slot);
  }
  return chunk.input_grad();
}

// Per chunk, the index in `ops` of its last op that computes weight gradients (B of a fused
// backward, W of a split one), or -1: after it the chunk's gradients are final for the step.
std::vector<int> last_weight_ops(const std::vector<Op>& ops, const std::vector<Stage*>& chunks) {
  std::vector<int> last(chunks.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const bool split = chunks[std::size_t(op.chunk)]->split_backward();
    if (op.kind == (split ? OpKind::W : OpKind::B)) last[std::size_t(op.chunk)] = int(i);
  }
  return last;
}

} // namespace

Executor::Executor(const Grid& grid, const PipelinePlan& plan, std::vector<Stage*> chunks,
                   TraceRecorder* trace, std::unique_ptr<Comm> transfers)
    : plan_(plan), stage_(grid.coords().pp), stages_(grid.layout().pp),
      chunks_per_stage_(plan.train.chunks), virtual_stages_(stages_ * chunks_per_stage_),
      chunks_(std::move(chunks)), trace_(trace) {
  pp_mpi_ = grid.make_mpi_comm(Axis::pp);
  pp_owned_ = std::move(transfers);
  pp_ = pp_owned_ ? pp_owned_.get() : pp_mpi_.get();
  run_agreed(grid.comm(), [&] {
    if (plan.train.stages != stages_) {
      throw Error(fmt::format("the schedule has {} stages but parallel.pp = {}", plan.train.stages,
                              stages_));
    }
    if (int(chunks_.size()) != chunks_per_stage_) {
      throw Error(fmt::format("the schedule runs {} chunks per stage but this rank holds {}",
                              chunks_per_stage_, chunks_.size()));
    }
    // A schedule that is incomplete or could deadlock would hang the job: refused before it
    // runs (every kind's schedules pass; this guards what the unit tests did not enumerate).
    for (const Schedule* s : {&plan.train, &plan.eval}) {
      std::string problem = check_schedule(*s);
      // Tags go to MPI only between stages (chunks of one stage hand over in memory).
      if (problem.empty() && stages_ > 1) problem = tag_problem(*s, mpi_tag_upper_bound());
      if (!problem.empty()) {
        throw Error(fmt::format("the {} schedule ({} stages, {} micro-batches, {} chunks) cannot "
                                "run: {}",
                                schedule_name(s->kind), s->stages, s->micro_batches, s->chunks,
                                problem));
      }
    }
    for (const Stage* c : chunks_) {
      if (c->slots() < plan.slots[std::size_t(stage_)]) {
        throw Error(fmt::format("a chunk planned with {} activation slots, where the schedule "
                                "keeps {} micro-batches in flight on stage {}",
                                c->slots(), plan.slots[std::size_t(stage_)], stage_));
      }
    }
  });
  if (virtual_stages_ > 1 && chunks_.front()->tied_embedding_size() > 0) {
    Stage* first = stage_ == 0 ? chunks_.front() : nullptr;
    Stage* last = stage_ == stages_ - 1 ? chunks_.back() : nullptr;
    tied_ =
        std::make_unique<TiedEmbeddingSum>(*pp_mpi_, first, last, tied_embedding_tag(plan.train));
  }
}

void Executor::zero_grad() {
  for (Stage* c : chunks_)
    c->zero_grad();
}

double Executor::step(const Samples& samples, float loss_weight, GradReduction* dp) {
  const double step_start = steady_seconds();
  TraceRecorder* trace = trace_ != nullptr && trace_->on() ? trace_ : nullptr;
  const OpsResult r = run_ops(plan_.train, samples, loss_weight, trace, dp, tied_.get());
  // What follows (the tied copies' sum, the step's timing, the caller's gradient reduction and
  // update) is no op's: a hang report there must not name the last op.
  flight::set_phase("after its ops", -1, -1);
  if (tied_) tied_->finish();
  return finish_step(r.last_end - step_start, r) / plan_.train.micro_batches;
}

double Executor::evaluate(const Samples& samples) {
  const OpsResult r = run_ops(plan_.eval, samples, 0.0f, nullptr, nullptr, nullptr);
  flight::set_phase("validation", -1, -1);
  std::vector<double> loss{r.loss_sum};
  pp_mpi_->all_reduce(Span<double>(loss));
  return loss[0] / plan_.eval.micro_batches;
}

Executor::OpsResult Executor::run_ops(const Schedule& schedule, const Samples& samples,
                                      float loss_weight, TraceRecorder* trace, GradReduction* dp,
                                      TiedEmbeddingSum* tied) {
  const std::vector<Op>& ops = schedule.ops[std::size_t(stage_)];
  const std::vector<int> last_weights = last_weight_ops(ops, chunks_);
  Mailbox mail(*pp_, *chunks_.front(), stage_, plan_.grouped);
  if (!plan_.grouped) {
    for (const Op& op : ops)
      mail.receive(op_transfers(schedule, stage_, op));
  }
  SlotTable slots(chunks_);
  MicroBatch tokens(chunks_.front()->batch(), chunks_.front()->seq());
  const bool forward_only = schedule.kind == ScheduleKind::forward_only;
  OpsResult r;
  r.last_end = steady_seconds();
  r.op_seconds.assign(std::size_t(3 * chunks_per_stage_), 0.0); // per chunk: F, B, W
  r.op_count.assign(std::size_t(3 * chunks_per_stage_), 0);
  if (dp != nullptr) {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      chunks_[c]->on_params_needed(
          [dp, c = int(c)](std::size_t until) { dp->params_needed(c, until); });
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    flight::set_phase(forward_only           ? "validation F"
                      : op.kind == OpKind::F ? "F"
                      : op.kind == OpKind::B ? "B"
                                             : "W",
                      op.micro, op.chunk);
    const OpTransfers t = op_transfers(schedule, stage_, op);
    Stage& chunk = *chunks_[std::size_t(op.chunk)];
    const bool finishes_grads = dp != nullptr && last_weights[std::size_t(op.chunk)] == int(i);
    if (finishes_grads) {
      chunk.on_grads_done([dp, c = op.chunk](std::size_t from) { dp->ready(c, from); });
    }
    if (plan_.grouped) {
      Group group(*pp_);
      mail.post_deferred();
      mail.receive(t);
    }
    const double wait_start = steady_seconds();
    const Stage::Buffer input = mail.input(t);
    const double op_start = steady_seconds();
    comm_seconds_ += op_start - wait_start;
    if (trace != nullptr && op_start - wait_start > 5e-6) {
      trace->add(TraceKind::wait, wait_start, op_start, op.micro, op.chunk);
    }
    const float* output = run_op(op, chunk, input.get(), slots, tokens, samples, loss_weight,
                                 forward_only, r.loss_sum);
    if (finishes_grads) chunk.on_grads_done(nullptr);
    if (dp != nullptr) dp->progress();
    mail.done_with_input(t); // the chunk copied what it needs
    if (t.send_to >= 0) mail.send(chunk, output, t);
    mail.release_finished_sends();
    if (op.kind == OpKind::B) fault::error_if_asked();
    chunk.fence();
    if (tied != nullptr && last_weights[std::size_t(op.chunk)] == int(i)) tied->post(&chunk);
    r.last_end = steady_seconds();
    r.busy += r.last_end - op_start;
    const std::size_t k = std::size_t(3 * op.chunk + static_cast<int>(op.kind));
    r.op_seconds[k] += r.last_end - op_start;
    ++r.op_count[k];
    if (trace != nullptr) trace->add(trace_kind(op.kind), op_start, r.last_end, op.micro, op.chunk);
  }
  mail.finish();
  if (dp != nullptr) {
    for (Stage* c : chunks_)
      c->on_params_needed(nullptr);
  }
  return r;
}

double Executor::finish_step(double span, const OpsResult& r) {
  // Per stage: span, busy, loss, then the mean F, B, W seconds of each chunk.
  const std::size_t per = 3 + r.op_seconds.size();
  std::vector<double> mine{span, r.busy, r.loss_sum};
  for (std::size_t k = 0; k < r.op_seconds.size(); ++k)
    mine.push_back(r.op_count[k] > 0 ? r.op_seconds[k] / r.op_count[k] : 0.0);
  std::vector<double> all(per * std::size_t(stages_));
  pp_mpi_->all_gather(Span<const double>(mine), Span<double>(all));
  double slowest = 0.0, busy_total = 0.0, loss = 0.0;
  for (int s = 0; s < stages_; ++s) {
    slowest = std::max(slowest, all[per * std::size_t(s)]);
    busy_total += all[per * std::size_t(s) + 1];
    loss += all[per * std::size_t(s) + 2];
  }
  timing_.seconds = slowest;
  timing_.bubble = slowest > 0.0 ? 1.0 - busy_total / (stages_ * slowest) : 0.0;
  auto cost = [&](int s, const Op& op) {
    return all[per * std::size_t(s) + 3 + std::size_t(3 * op.chunk + static_cast<int>(op.kind))];
  };
  timing_.predicted_bubble = simulate(plan_.train, cost, 0.0).bubble;
  return loss;
}

double Executor::grad_norm_squared(Comm* tp) const {
  std::vector<double> total{0.0};
  for (const Stage* c : chunks_)
    total[0] += c->grad_sum_of_squares();
  pp_mpi_->all_reduce(Span<double>(total));
  if (tp != nullptr && tp->size() > 1) tp->all_reduce(Span<double>(total));
  return total[0];
}

double Executor::comm_seconds() const {
  double s = comm_seconds_;
  for (const Stage* c : chunks_)
    s += c->comm_seconds();
  return s;
}

} // namespace gridlm::parallel
