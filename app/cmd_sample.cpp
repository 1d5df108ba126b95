// `gridlm sample`: loads output.weights (model.h5) on one rank and prints what the model
// generates after a prompt: text through the tokenizer the weights file carries (a model
// trained on a dataset), or token ids. Other ranks of an mpiexec launch wait and exit with it.
#include "app/cmd_sample.hpp"

#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "app/cli_checks.hpp"
#include "engine/checkpoint_tools.hpp"
#include "engine/sampler.hpp"
#include "engine/weights_file.hpp"
#include "io/token_dataset.hpp"
#include "io/tokenizer.hpp"
#include "layers/kokkos_runtime.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/int_list.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::app {
namespace {

struct SampleCommand {
  std::string weights = "gridlm-out/model.h5"; // weights file written by gridlm train
  std::string prompt;                          // text to continue (needs a tokenizer)
  std::string prompt_ids;                      // or comma-separated token ids
  std::string tokenizer; // a dataset or .model file, when the weights carry none
  bool past_eos = false; // go on after the end of a document (text mode stops there)
  engine::SampleOptions options;
};

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::string bad;
  const auto numbers = parse_int_list(text, &bad);
  std::vector<std::int32_t> ids;
  for (long v : numbers.value_or(std::vector<long>{})) {
    if (v < 0 || v > (1l << 30)) {
      bad = std::to_string(v);
      break;
    }
    ids.push_back(std::int32_t(v));
  }
  if (!numbers || !bad.empty()) {
    throw Error(fmt::format("--prompt-ids '{}': '{}' is not a token id; give ids such as "
                            "'3,17,5'",
                            text, bad));
  }
  if (ids.empty()) throw Error("--prompt-ids is empty; give at least one token id");
  return ids;
}

std::optional<io::Tokenizer> find_tokenizer(const SampleCommand& cmd, io::H5File& weights) {
  if (!cmd.tokenizer.empty()) {
    const bool model = cmd.tokenizer.size() > 6 &&
                       cmd.tokenizer.compare(cmd.tokenizer.size() - 6, 6, ".model") == 0;
    io::Tokenizer given =
        model ? io::Tokenizer::from_file(cmd.tokenizer) : io::load_dataset_tokenizer(cmd.tokenizer);
    // Said, not refused: decoding with another tokenizer can be what the user means to do.
    if (weights.has("tokenizer/model") &&
        weights.read_bytes("tokenizer/model") != given.model_bytes()) {
      std::printf("note: --tokenizer %s is not the tokenizer stored in '%s', which the model was "
                  "trained with; its ids are decoded with the one given\n",
                  cmd.tokenizer.c_str(), cmd.weights.c_str());
    }
    return given;
  }
  if (!weights.has("tokenizer/model")) return std::nullopt;
  return io::Tokenizer::from_bytes(weights.read_bytes("tokenizer/model"),
                                   fmt::format("the tokenizer stored in '{}'", cmd.weights));
}

void run(const SampleCommand& cmd) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Rank 0 samples, with its Kokkos and BLAS threads, while the others wait for it in the error
  // agreement: when those threads and the waiting ranks outnumber a node's cores, the waiting
  // ranks yield the cores rather than spin on them.
  parallel::set_job_wait_policy("auto", MPI_COMM_WORLD,
                                rank == 0 ? layers::compute_threads_per_rank() : 1);
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (rank != 0) return;
    if (!cmd.prompt.empty() && !cmd.prompt_ids.empty()) {
      throw Error("give --prompt TEXT or --prompt-ids IDS, not both");
    }
    std::vector<std::int32_t> prompt;
    if (!cmd.prompt_ids.empty()) prompt = parse_ids(cmd.prompt_ids);
    // What training would refuse (a gradients or damaged file, a checksum table cut short) is
    // refused here too, rather than sampled from; the weights are read once, checked and loaded
    // (a checkpoint's moments are not read).
    engine::Generator gpt(cmd.weights);
    io::H5File file = io::H5File::open_read(cmd.weights);
    const layers::ModelConfig m = engine::read_model_attributes(file);
    const std::optional<io::Tokenizer> tok = find_tokenizer(cmd, file);
    if (tok && tok->vocab_size() > m.vocab_size) {
      throw Error(fmt::format("the tokenizer ({}) has {} pieces, more than the vocabulary of {} "
                              "that the model in '{}' was trained with: it is not that model's "
                              "tokenizer; give --tokenizer the dataset the model was trained on",
                              cmd.tokenizer.empty() ? "stored in the weights file" : cmd.tokenizer,
                              tok->vocab_size(), m.vocab_size, cmd.weights));
    }
    for (std::int32_t id : prompt) {
      if (id >= m.vocab_size) {
        throw Error(fmt::format("--prompt-ids: token id {} is outside the vocabulary of the model "
                                "in '{}' (ids 0 to {})",
                                id, cmd.weights, m.vocab_size - 1));
      }
      // Checked before sampling, which the decoding of the prompt would otherwise end after.
      if (tok && id >= tok->vocab_size()) {
        throw Error(fmt::format("--prompt-ids: token id {} is past the {} pieces of the "
                                "tokenizer, which cannot decode it; give ids below {}",
                                id, tok->vocab_size(), tok->vocab_size()));
      }
    }
    if (!cmd.prompt.empty()) {
      if (!tok) {
        throw Error(fmt::format("--prompt needs a tokenizer, and '{}' carries none (the model "
                                "was not trained on a dataset); give --prompt-ids, or "
                                "--tokenizer with the dataset or .model file",
                                cmd.weights));
      }
      std::vector<int> ids;
      tok->encode(cmd.prompt, ids);
      prompt.assign(ids.begin(), ids.end());
    }
    if (prompt.empty()) {
      // A fresh document: datasets end every document with eos, so eos is what precedes one.
      prompt.push_back(tok && tok->eos_id() >= 0 ? tok->eos_id() : 0);
    }
    engine::SampleOptions options = cmd.options;
    if (tok) {
      // A vocabulary padded past the tokenizer's pieces has rows no data trained, which it
      // could not decode.
      options.drawable = tok->vocab_size();
      if (!cmd.past_eos) options.stop_id = tok->eos_id();
    }
    std::printf("model: %s (%d layers, width %d, vocabulary %d, context %d%s)\n",
                cmd.weights.c_str(), m.n_layer, m.d_model, m.vocab_size, m.seq_len,
                tok ? ", with its tokenizer" : "");
    if (tok) {
      const std::vector<std::int32_t> out = gpt.generate(prompt, options);
      std::vector<int> ids(prompt.begin(), prompt.end());
      ids.insert(ids.end(), out.begin(), out.end());
      // Written whole: a byte piece can decode to a NUL, which %s would stop at.
      const std::string text = tok->decode(ids);
      std::printf("---\n");
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n---\n");
      if (!out.empty() && out.back() == options.stop_id && options.stop_id >= 0) {
        std::printf("the document ended after %zu of %d tokens (--past-eos goes on)\n", out.size(),
                    options.tokens);
      } else {
        std::printf("%zu new tokens\n", out.size());
      }
      return;
    }
    std::printf("prompt:");
    for (std::int32_t id : prompt)
      std::printf(" %d", id);
    std::printf("\nsample:");
    std::fflush(stdout);
    const std::vector<std::int32_t> out = gpt.generate(prompt, options, [](std::int32_t id) {
      std::printf(" %d", id);
      std::fflush(stdout);
    });
    std::printf("\n%zu new tokens\n", out.size());
  });
}

} // namespace

void add_sample_command(CLI::App& app) {
  auto cmd = std::make_shared<SampleCommand>();
  CLI::App* sub = app.add_subcommand("sample", "Generate tokens from a trained model's weights");
  sub->add_option("-w,--weights", cmd->weights, "Weights file written by gridlm train")
      ->capture_default_str();
  sub->add_option("-p,--prompt", cmd->prompt,
                  "Text to continue (default: the start of a new document)");
  sub->add_option("--prompt-ids", cmd->prompt_ids, "Comma-separated token ids to continue");
  sub->add_option("--tokenizer", cmd->tokenizer,
                  "Dataset or SentencePiece .model file to encode and decode with, when the "
                  "weights file carries no tokenizer");
  sub->add_option("-n,--tokens", cmd->options.tokens, "New tokens to generate")
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_option("-t,--temperature", cmd->options.temperature,
                  "Softmax temperature (0: always the most likely token)")
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_option("-k,--top-k", cmd->options.top_k, "Draw among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_option("--seed", cmd->options.seed, "Seed of the draws")
      ->capture_default_str()
      ->check(unsigned_64());
  sub->add_flag("--past-eos", cmd->past_eos,
                "Go on past the end of a document (text from a tokenizer stops there)");
  sub->footer("Example: gridlm sample --weights gridlm-out/model.h5 --prompt \"The cat\" -n 50");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
