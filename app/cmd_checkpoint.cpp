// `gridlm checkpoint`: rank 0 reads the file on its own (other ranks of an mpiexec launch wait);
// a problem is one agreed error.
#include "app/cmd_checkpoint.hpp"

#include <mpi.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint_tools.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::app {
namespace {

struct CheckpointCommand {
  std::string file;   // the checkpoint or weights file
  std::string output; // export: the weights file to write
  bool json = false;  // inspect: as JSON
};

// Runs `body` on rank 0, the error agreed by all.
void on_rank0(const std::function<void()>& body) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (rank == 0) body();
  });
}

void print_text(const engine::FileSummary& s) {
  const engine::CheckpointMeta& m = s.meta;
  std::printf("%s: %s, %.1f MiB, written by gridlm %s\n", s.path.c_str(),
              m.optimizer ? "checkpoint (weights and AdamW moments)" : "weights",
              double(s.bytes) / (1 << 20), s.gridlm_version.c_str());
  const std::string updates =
      m.optimizer ? fmt::format(" ({} updates in the moments)", m.optimizer_updates) : "";
  std::printf("step %d%s, %llu samples, %llu tokens seen; layout %s\n", m.step, updates.c_str(),
              static_cast<unsigned long long>(m.samples_seen),
              static_cast<unsigned long long>(m.tokens_seen), m.layout.c_str());
  std::printf("model: %d layers, %d heads, width %d, vocabulary %d, context %d, %s embeddings\n",
              s.model.n_layer, s.model.n_head, s.model.d_model, s.model.vocab_size, s.model.seq_len,
              s.model.tied_embeddings ? "tied" : "untied");
  const std::string extent = m.data_tokens < 0 ? ""
                                               : fmt::format(", {} tokens in {} documents",
                                                             m.data_tokens, m.data_documents);
  std::printf("data: %s (seed %lld%s)\n", m.data_source.c_str(),
              static_cast<long long>(m.data_seed), extent.c_str());
  if (m.global_batch >= 0) {
    std::printf("batch: %lld sequences a step; learning rate decay ends at step %lld\n",
                static_cast<long long>(m.global_batch), static_cast<long long>(m.decay_steps));
  }
  for (const engine::TensorSummary& t : s.tensors) {
    std::printf("  %-34s [%s] norm %.6g%s\n", t.name.c_str(),
                fmt::format("{}", fmt::join(t.shape, ", ")).c_str(), t.norm,
                t.checksum == t.stored ? "" : "  CHECKSUM MISMATCH");
  }
  if (!m.config.empty()) std::printf("configuration:\n%s", m.config.c_str());
}

void print_json(const engine::FileSummary& s) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const engine::TensorSummary& t : s.tensors) {
    tensors.push_back({{"name", t.name},
                       {"shape", t.shape},
                       {"norm", t.norm},
                       {"checksum_ok", t.checksum == t.stored}});
  }
  const nlohmann::json j{{"path", s.path},
                         {"bytes", s.bytes},
                         {"gridlm_version", s.gridlm_version},
                         {"optimizer", s.meta.optimizer},
                         {"step", s.meta.step},
                         {"optimizer_updates", s.meta.optimizer_updates},
                         {"samples_seen", s.meta.samples_seen},
                         {"tokens_seen", s.meta.tokens_seen},
                         {"layout", s.meta.layout},
                         {"data_source", s.meta.data_source},
                         {"data_seed", s.meta.data_seed},
                         {"data_tokens", s.meta.data_tokens},
                         {"data_documents", s.meta.data_documents},
                         {"global_batch", s.meta.global_batch},
                         {"decay_steps", s.meta.decay_steps},
                         {"model",
                          {{"vocab_size", s.model.vocab_size},
                           {"seq_len", s.model.seq_len},
                           {"n_layer", s.model.n_layer},
                           {"n_head", s.model.n_head},
                           {"d_model", s.model.d_model},
                           {"tied_embeddings", s.model.tied_embeddings}}},
                         {"config", s.meta.config},
                         {"tensors", tensors}};
  // Attributes are whatever bytes a file holds: ones that are not UTF-8 are shown replaced.
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

void verify(const std::string& file) {
  const engine::FileSummary s = engine::verify_model_file(file);
  std::printf("%s: %zu tensors, every checksum matches\n", file.c_str(), s.tensors.size());
}

} // namespace

void add_checkpoint_command(CLI::App& app) {
  auto cmd = std::make_shared<CheckpointCommand>();
  CLI::App* sub = app.add_subcommand(
      "checkpoint", "Inspect, verify or export a checkpoint or weights file (docs/formats)");
  sub->require_subcommand(1);
  CLI::App* inspect = sub->add_subcommand(
      "inspect", "Step, data position, layout, configuration, every tensor's shape and norm");
  inspect->add_option("file", cmd->file, "Checkpoint or weights file")->required();
  inspect->add_flag("--json", cmd->json, "As JSON");
  inspect->callback([cmd] {
    on_rank0([&] {
      const engine::FileSummary s = engine::summarize_model_file(cmd->file);
      cmd->json ? print_json(s) : print_text(s);
    });
  });
  CLI::App* check = sub->add_subcommand("verify", "Recompute every tensor's checksum");
  check->add_option("file", cmd->file, "Checkpoint or weights file")->required();
  check->callback([cmd] { on_rank0([&] { verify(cmd->file); }); });
  CLI::App* out = sub->add_subcommand("export", "Write the weights alone (no optimizer state)");
  out->add_option("file", cmd->file, "Checkpoint or weights file")->required();
  out->add_option("-o,--output", cmd->output, "Weights file to write")->required();
  out->callback([cmd] {
    on_rank0([&] {
      engine::export_weights(cmd->file, cmd->output);
      std::printf("weights: %s\n", cmd->output.c_str());
    });
  });
}

} // namespace gridlm::app
