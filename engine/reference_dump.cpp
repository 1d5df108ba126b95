// Recording and writing the reference dump.
#include "engine/reference_dump.hpp"

#include <utility>

#include "engine/weights_file.hpp"
#include "io/h5_file.hpp"

namespace gridlm::engine {
namespace {

std::vector<float> host_copy(Kokkos::View<float*> v) {
  auto host = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(host, v);
  return std::vector<float>(host.data(), host.data() + host.size());
}

} // namespace

ReferenceDump::ReferenceDump(const RunConfig& config, const layers::OptimizerConfig& optim,
                             layers::GPT& whole)
    : config_(config), optim_(optim), gpt_(whole), initial_params_(host_copy(whole.params())) {
  const auto& t = config.train;
  const int T = config.model.seq_len;
  batches_.reserve(std::size_t(t.steps) * std::size_t(t.grad_accum) * std::size_t(t.micro_batch) *
                   std::size_t(T + 1));
  logits_.resize(std::size_t(t.micro_batch) * std::size_t(T) *
                 std::size_t(config.model.vocab_size));
}

void ReferenceDump::first_forward(const std::vector<std::int32_t>& seq) {
  const int B = gpt_.batch(), T = gpt_.seq();
  std::vector<std::int32_t> x(std::size_t(B) * std::size_t(T)), y(x.size());
  for (int b = 0; b < B; ++b) {
    const std::int32_t* s = seq.data() + std::size_t(b) * std::size_t(T + 1);
    std::copy(s, s + T, x.data() + std::size_t(b) * std::size_t(T));
    std::copy(s + 1, s + T + 1, y.data() + std::size_t(b) * std::size_t(T));
  }
  first_loss_ = float(gpt_.forward(x.data(), y.data(), B, T, logits_.data()));
}

void ReferenceDump::batch(const std::vector<std::int32_t>& seq) {
  batches_.insert(batches_.end(), seq.begin(), seq.end());
}

void ReferenceDump::step(int step, double loss) {
  if (step == 0) step0_grads_ = host_copy(gpt_.grads());
  losses_.push_back(float(loss));
}

void ReferenceDump::write(const std::string& path) const {
  io::H5File f = io::H5File::create(path);
  const auto& m = config_.model;
  const auto& t = config_.train;
  const auto& o = optim_;
  write_model_attributes(f, m);
  const std::pair<const char*, double> attrs[] = {
      {"micro_batch", t.micro_batch},
      {"accum", t.grad_accum},
      {"steps", t.steps},
      {"lr", o.lr},
      {"min_lr", o.min_lr},
      {"warmup_steps", o.warmup_steps},
      {"decay_steps", o.decay_steps},
      {"beta1", o.beta1},
      {"beta2", o.beta2},
      {"eps", o.eps},
      {"weight_decay", o.weight_decay},
      {"decay_embeddings", o.decay_embeddings},
      {"decay_norms_and_biases", o.decay_norms_and_biases},
      {"grad_clip", o.grad_clip}};
  for (const auto& [name, value] : attrs)
    f.attribute(name, value);
  for (const layers::ParamInfo& p : gpt_.table().params) {
    // Global shape, padding rows dropped (one rank: no group to gather from).
    f.write("params/" + p.name, p.shape,
            layers::gather_parameter(p, initial_params_.data() + p.offset, nullptr).data());
    f.write("step0/grads/" + p.name, p.shape,
            layers::gather_parameter(p, step0_grads_.data() + p.offset, nullptr).data());
  }
  f.write("batches", {t.steps, t.grad_accum, t.micro_batch, m.seq_len + 1}, batches_.data());
  f.write("step0/logits", {t.micro_batch, m.seq_len, m.vocab_size}, logits_.data());
  f.write("step0/loss", {}, &first_loss_);
  f.write("losses", {t.steps}, losses_.data());
  f.commit();
}

} // namespace gridlm::engine
