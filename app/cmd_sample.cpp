// `gridlm sample`: loads output.weights (model.h5) on one rank and prints what the model
// generates after a prompt. Other ranks of an mpiexec launch wait and exit with it.
#include "app/cmd_sample.hpp"

#include <cstdio>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "app/sampler.hpp"
#include "app/weights_file.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::app {
namespace {

struct SampleCommand {
  std::string weights = "gridlm-out/model.h5"; // weights file written by gridlm train
  std::string prompt_ids = "0";                // comma-separated token ids to start from
  SampleOptions options;
};

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long v = -1;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > (1l << 30)) {
      throw Error(fmt::format("--prompt-ids '{}': '{}' is not a token id; give ids such as "
                              "'3,17,5'",
                              text, item));
    }
    ids.push_back(std::int32_t(v));
  }
  if (ids.empty()) throw Error("--prompt-ids is empty; give at least one token id");
  return ids;
}

void run(const SampleCommand& cmd) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (rank != 0) return;
    const std::vector<std::int32_t> prompt = parse_ids(cmd.prompt_ids);
    io::H5File file = io::H5File::open_read(cmd.weights);
    const layers::ModelConfig m = read_model_attributes(file);
    layers::GPT gpt(m, 1, m.seq_len);
    load_weights(gpt, file);
    std::printf("model: %s (%d layers, width %d, vocabulary %d, context %d)\n", cmd.weights.c_str(),
                m.n_layer, m.d_model, m.vocab_size, m.seq_len);
    std::printf("prompt:");
    for (std::int32_t id : prompt)
      std::printf(" %d", id);
    std::printf("\nsample:");
    std::fflush(stdout);
    generate(gpt, prompt, cmd.options, [](std::int32_t id) {
      std::printf(" %d", id);
      std::fflush(stdout);
    });
    std::printf("\n");
  });
}

} // namespace

void add_sample_command(CLI::App& app) {
  auto cmd = std::make_shared<SampleCommand>();
  CLI::App* sub = app.add_subcommand("sample", "Generate tokens from a trained model's weights");
  sub->add_option("-w,--weights", cmd->weights, "Weights file written by gridlm train")
      ->capture_default_str();
  sub->add_option("--prompt-ids", cmd->prompt_ids, "Comma-separated token ids to continue")
      ->capture_default_str();
  sub->add_option("-n,--tokens", cmd->options.tokens, "New tokens to generate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-t,--temperature", cmd->options.temperature,
                  "Softmax temperature (0: always the most likely token)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-k,--top-k", cmd->options.top_k, "Draw among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", cmd->options.seed, "Seed of the draws")->capture_default_str();
  sub->footer("Example: gridlm sample --weights gridlm-out/model.h5 --prompt-ids 3,17 -n 50");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
