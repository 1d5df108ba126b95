// The pipeline executor.
#include "app/pipeline.hpp"

#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::app {
namespace {

// Message tags: what (0 activation into F, 1 gradient into B), micro-batch, virtual stage.
int tag(int what, int micro, int q, int Q) { return (what * 4096 + micro) * Q + q; }

} // namespace

Pipeline::Pipeline(const layers::ModelConfig& model, int B, int T, const parallel::Grid& grid,
                   const parallel::Schedule& schedule, parallel::Comm* tp,
                   std::unique_ptr<parallel::Comm> pp)
    : grid_(grid), schedule_(schedule), stage_(grid.coords().pp), p_(grid.layout().pp),
      v_(schedule.chunks), Q_(p_ * v_), B_(B), T_(T), C_(model.d_model) {
  pp_ = pp ? std::move(pp) : grid.make_mpi_comm(parallel::Axis::pp);
  parallel::run_agreed(grid.comm(), [&] {
    if (schedule.stages != p_) {
      throw Error(
          fmt::format("the schedule has {} stages but parallel.pp = {}", schedule.stages, p_));
    }
    if (model.n_layer % Q_ != 0) {
      throw Error(fmt::format("model.n_layer = {} does not divide into parallel.pp x "
                              "parallel.chunks = {} x {} = {} equal stages; choose a pp and "
                              "chunks whose product divides {}",
                              model.n_layer, p_, v_, Q_, model.n_layer));
    }
    if (schedule.micro_batches > 4096) throw Error("at most 4096 micro-batches per step");
    const parallel::Timeline tl = parallel::simulate(schedule, {});
    const int slots = std::max(1, tl.peak_in_flight[stage_]);
    blocks_per_chunk_ = model.n_layer / Q_;
    for (int c = 0; c < v_; ++c) {
      const int q = c * p_ + stage_;
      const int per = blocks_per_chunk_;
      const layers::StageSpec spec{q * per, (q + 1) * per, q == 0, q == Q_ - 1};
      chunks_.push_back(std::make_unique<layers::GPT>(model, B, T, spec, tp, slots));
    }
  });
}

double Pipeline::step(const Samples& samples, float loss_weight, float* first_logits,
                      std::vector<double>* micro_losses) {
  const int m = schedule_.micro_batches;
  const long N = long(B_) * T_, NC = N * C_;
  // Post every receive of the step now, so transfers land whenever their senders are ready.
  std::map<int, std::vector<float>> inbox;
  std::map<int, parallel::Request> pending;
  for (const parallel::Op& op : schedule_.ops[stage_]) {
    const int q = op.chunk * p_ + stage_;
    int t = -1, from = -1;
    if (op.kind == parallel::OpKind::F && q > 0) {
      t = tag(0, op.micro, q, Q_);
      from = (q - 1) % p_;
    } else if (op.kind == parallel::OpKind::B && q < Q_ - 1) {
      t = tag(1, op.micro, q, Q_);
      from = (q + 1) % p_;
    }
    if (t < 0) continue;
    inbox[t].resize(std::size_t(NC));
    pending.emplace(t, pp_->irecv(Span<float>(inbox[t]), from, t));
  }
  auto receive = [&](int t) {
    const auto t0 = std::chrono::steady_clock::now();
    pending.at(t).wait();
    comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return inbox[t].data();
  };
  std::vector<std::vector<float>> outbox;
  std::vector<parallel::Request> sends;
  outbox.reserve(schedule_.ops[stage_].size());
  auto send = [&](const float* data, int to, int t) {
    outbox.emplace_back(data, data + NC);
    sends.push_back(pp_->isend(Span<const float>(outbox.back()), to, t));
  };

  std::vector<std::map<int, int>> slot_of(v_); // per chunk: micro-batch -> activation slot
  std::vector<std::vector<int>> free_slots(v_);
  for (int c = 0; c < v_; ++c) {
    for (int s = chunks_[c]->slots() - 1; s >= 0; --s)
      free_slots[c].push_back(s);
  }
  std::vector<std::int32_t> seq(std::size_t(B_) * (T_ + 1)), x(static_cast<std::size_t>(N)),
      y(static_cast<std::size_t>(N));
  double loss_sum = 0.0;
  for (const parallel::Op& op : schedule_.ops[stage_]) {
    const int q = op.chunk * p_ + stage_;
    layers::GPT& gpt = *chunks_[op.chunk];
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
      const float* input = q == 0 ? nullptr : receive(tag(0, op.micro, q, Q_));
      float* logits = Q_ == 1 && op.micro == 0 ? first_logits : nullptr;
      const double loss = gpt.forward_stage(x.data(), input, y.data(), B_, T_, logits, slot);
      if (q == Q_ - 1 && micro_losses != nullptr) micro_losses->push_back(loss);
      loss_sum += loss;
      if (q < Q_ - 1) send(gpt.output(slot), (q + 1) % p_, tag(0, op.micro, q + 1, Q_));
    } else if (op.kind == parallel::OpKind::B) {
      const int slot = slot_of[op.chunk].at(op.micro);
      const float* dout = q == Q_ - 1 ? nullptr : receive(tag(1, op.micro, q, Q_));
      gpt.backward(loss_weight, dout, slot);
      free_slots[op.chunk].push_back(slot);
      if (q > 0) send(gpt.input_grad(), (q - 1) % p_, tag(1, op.micro, q - 1, Q_));
    }
    // W: the backward above already computed the weight gradients (no split backward yet).
  }
  for (parallel::Request& r : sends)
    r.wait();

  // Tied embeddings: the first and the last virtual stage hold copies of wte; both end with the
  // sum of their gradients, so the two copies stay identical.
  const layers::ModelConfig& mc = chunks_[0]->config();
  if (mc.tied_embeddings && Q_ > 1) {
    layers::GPT* first = stage_ == 0 ? chunks_[0].get() : nullptr;
    layers::GPT* last = stage_ == p_ - 1 ? chunks_[v_ - 1].get() : nullptr;
    // Every stage joins the all-reduce (middle stages with zeros): one collective over pp.
    const std::size_t n = std::size_t(
        layers::padded_vocab_slice(mc.vocab_size, chunks_[0]->table().tp_size) * mc.d_model);
    std::vector<float> sum(n, 0.0f);
    for (layers::GPT* g : {first, last}) {
      if (g == nullptr) continue;
      const float* w = g->grad(g->table().wte);
      for (std::size_t i = 0; i < n; ++i)
        sum[i] += w[i];
    }
    pp_->all_reduce(Span<float>(sum));
    for (layers::GPT* g : {first, last}) {
      if (g == nullptr) continue;
      std::copy(sum.begin(), sum.end(), g->grad(g->table().wte));
    }
  }
  // The loss lives on the last stage: share it along the pipeline.
  std::vector<double> loss{stage_ == (Q_ - 1) % p_ ? loss_sum / m : 0.0};
  pp_->all_reduce(Span<double>(loss));
  return loss[0];
}

double Pipeline::grad_norm_squared(parallel::Comm* tp) const {
  std::vector<double> total{0.0};
  for (const auto& chunk : chunks_)
    total[0] += chunk->grad_sum_of_squares();
  pp_->all_reduce(Span<double>(total));
  if (tp != nullptr && tp->size() > 1) tp->all_reduce(Span<double>(total));
  return total[0];
}

int Pipeline::stage_of(const layers::ParamInfo& p) const {
  if (p.block >= 0) return (p.block / blocks_per_chunk_) % p_;
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
