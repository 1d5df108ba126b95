// `gridlm prepare-data`. Every rank finds the inputs and takes a byte-range share of them;
// rank 0 trains the tokenizer (or reads the one given) and broadcasts it; each rank tokenizes
// its share; all write one file collectively. Every step that can fail on bad input is agreed
// across ranks, so a bad input stops every rank with one message.
#include "app/cmd_prepare_data.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "app/cli_checks.hpp"
#include "app/progress.hpp"
#include "io/dataset_writer.hpp"
#include "io/parallel_h5.hpp"
#include "io/sample_order.hpp"
#include "io/synthetic_corpus.hpp"
#include "io/text_corpus.hpp"
#include "io/token_dataset.hpp"
#include "io/tokenizer.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/watchdog.hpp"

namespace gridlm::app {
namespace {

// The end of the tokenizer's next training text of `document` from `at`: whole lines up to about
// 4 kB, "\n" kept inside so that the model learns what follows a line break. SentencePiece skips
// a text longer than its max_sentence_length (16 kB), so a line that would take the text past
// 8 kB (a JSON document without line breaks, minified text) is cut at a space before 4 kB, or
// at a character's first byte where it has none.
std::string::size_type text_end(const std::string& document, std::string::size_type at) {
  constexpr std::string::size_type lines = 4096, longest = 8192;
  std::string::size_type end = at;
  while (end < document.size() && end - at < lines) {
    const auto nl = document.find('\n', end);
    end = nl == std::string::npos ? document.size() : nl + 1;
  }
  if (end - at <= longest) return end;
  const std::string::size_type space = document.rfind(' ', at + lines);
  if (space != std::string::npos && space > at) return space + 1;
  std::string::size_type cut = at + lines;
  while (cut > at + 1 && (static_cast<unsigned char>(document[cut]) & 0xC0) == 0x80)
    --cut; // not inside a UTF-8 character
  return cut;
}

struct PrepareDataCommand {
  std::vector<std::string> inputs;     // text files, .jsonl files or directories
  std::string output;                  // the dataset file to write
  int vocab_size = 0;                  // train a BPE tokenizer of this many pieces
  std::string tokenizer;               // or use this .model file, or this dataset's tokenizer
  std::string documents = "paragraph"; // how plain text is cut: paragraph, line or file
  double valid_fraction = 0.01;        // share of documents for the validation split
  long seed = 1;                       // seeds the validation split and tokenizer sampling
  bool synthetic = false;              // use the built-in synthetic corpus instead of inputs
  long synthetic_documents = 20000;    // its size
  double progress_every = 5.0;         // seconds between progress lines off a terminal
  double timeout_seconds = 600.0;      // a wait this long in one operation is a hang (0: off)
  std::string command_line;
};

// One share of the documents, whatever they come from.
class Documents {
public:
  virtual ~Documents() = default;
  virtual bool next(std::string& document) = 0;
  virtual double fraction() const = 0; // of the share read
  virtual std::uint64_t bytes() const = 0;
};

class CorpusDocuments final : public Documents {
public:
  CorpusDocuments(const io::Corpus& c, io::DocumentMode mode, int part, int parts)
      : reader_(c, mode, part, parts) {}
  bool next(std::string& d) override { return reader_.next(d); }
  double fraction() const override {
    return reader_.share_bytes() == 0
               ? 1.0
               : double(reader_.bytes_done()) / double(reader_.share_bytes());
  }
  std::uint64_t bytes() const override { return reader_.bytes_done(); }

private:
  io::DocumentReader reader_;
};

class SyntheticDocuments final : public Documents {
public:
  SyntheticDocuments(std::uint64_t seed, std::uint64_t n, int part, int parts)
      : corpus_(seed), begin_(io::part_begin(n, part, parts)),
        end_(io::part_begin(n, part + 1, parts)), next_(begin_) {}
  bool next(std::string& d) override {
    if (next_ == end_) return false;
    d = corpus_.document(next_++);
    bytes_ += d.size();
    return true;
  }
  double fraction() const override {
    return end_ == begin_ ? 1.0 : double(next_ - begin_) / double(end_ - begin_);
  }
  std::uint64_t bytes() const override { return bytes_; }

private:
  io::SyntheticCorpus corpus_;
  std::uint64_t begin_, end_, next_, bytes_ = 0;
};

std::unique_ptr<Documents> share(const PrepareDataCommand& cmd, const io::Corpus& corpus, int part,
                                 int parts) {
  if (cmd.synthetic) {
    return std::make_unique<SyntheticDocuments>(
        std::uint64_t(cmd.seed), std::uint64_t(cmd.synthetic_documents), part, parts);
  }
  return std::make_unique<CorpusDocuments>(corpus, io::parse_document_mode(cmd.documents), part,
                                           parts);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// Rank 0, before hours of tokenizing: the output's directory takes the .partial file.
void probe_output(const std::string& output) {
  if (const std::string why = cannot_create_partial(output); !why.empty()) {
    throw Error(fmt::format("cannot write '{}.partial': {}; give a path where a file can be "
                            "written (-o)",
                            output, why));
  }
}

void check_options(const PrepareDataCommand& cmd) {
  if (cmd.synthetic == !cmd.inputs.empty()) {
    throw Error(cmd.synthetic ? "give either input files or --synthetic, not both"
                              : "no input: give text files, .jsonl files or directories, or "
                                "--synthetic for the built-in corpus");
  }
  if ((cmd.vocab_size > 0) == !cmd.tokenizer.empty()) {
    throw Error("give --vocab-size N to train a tokenizer on the input, or --tokenizer FILE to "
                "use an existing one (a SentencePiece .model file or a gridlm dataset)");
  }
  if (!(cmd.valid_fraction >= 0.0 && cmd.valid_fraction < 1.0)) {
    throw Error(
        fmt::format("--valid-fraction {} must be at least 0 and below 1", cmd.valid_fraction));
  }
  if (cmd.synthetic_documents < 1) throw Error("--synthetic-documents must be positive");
  io::parse_document_mode(cmd.documents);
  // Writing over a file the run reads would destroy it before (or while) it is read.
  std::vector<std::string> read = cmd.inputs;
  if (!cmd.tokenizer.empty()) read.push_back(cmd.tokenizer);
  for (const std::string& in : read) {
    std::error_code ec;
    if (std::filesystem::equivalent(in, cmd.output, ec)) {
      throw Error(fmt::format("-o {} is also an input ('{}'): writing the dataset would destroy "
                              "what it is made from; give another output path",
                              cmd.output, in));
    }
  }
  const std::filesystem::path dir = std::filesystem::path(cmd.output).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir)) {
    throw Error(fmt::format("cannot write '{}': the directory '{}' does not exist", cmd.output,
                            dir.string()));
  }
}

// A file found in an input directory may be the output too: writing it would destroy it.
void check_output_not_in_corpus(const std::string& output, const io::Corpus& corpus) {
  for (const io::CorpusFile& file : corpus.files) {
    std::error_code ec;
    if (std::filesystem::equivalent(file.path, output, ec)) {
      throw Error(fmt::format("-o {} is also an input (found as '{}'): writing the dataset would "
                              "destroy what it is made from; give an output path outside the "
                              "input directories",
                              output, file.path));
    }
  }
}

// Collective: every rank cuts its share from the corpus it found itself, so all must have found
// the same files at the same sizes, or documents would be read twice or not at all.
void agree_on_corpus(const io::Corpus& corpus, MPI_Comm world) {
  std::uint64_t hash = 14695981039346656037ull; // FNV-1a over the paths and sizes
  auto mix = [&](const void* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      hash ^= static_cast<const unsigned char*>(data)[i];
      hash *= 1099511628211ull;
    }
  };
  for (const io::CorpusFile& file : corpus.files) {
    mix(file.path.c_str(), file.path.size() + 1);
    mix(&file.size, sizeof file.size);
  }
  // The largest hash and the largest complement: both are this rank's only if all agree.
  std::vector<std::uint64_t> largest{hash, ~hash};
  parallel::MpiComm(parallel::borrow_comm(world))
      .all_reduce(Span<std::uint64_t>(largest), parallel::ReduceOp::max);
  const bool same = largest[0] == hash && largest[1] == ~hash;
  parallel::run_agreed(world, [&] {
    if (!same && parallel::comm_rank(world) == 0) {
      throw Error(fmt::format(
          "the ranks found different files or sizes in the inputs ({} files, {} bytes on rank "
          "0): is a file being written, or does a network file system show the nodes different "
          "versions? Run again once the corpus no longer changes",
          corpus.files.size(), corpus.bytes));
    }
  });
}

// Rank 0: the tokenizer the user gave, or one trained on the whole corpus.
io::Tokenizer make_tokenizer(const PrepareDataCommand& cmd, const io::Corpus& corpus,
                             std::string& description) {
  if (!cmd.tokenizer.empty()) {
    const bool dataset = io::is_hdf5_file(cmd.tokenizer);
    description = fmt::format("SentencePiece, from {} '{}'", dataset ? "the dataset" : "the model",
                              cmd.tokenizer);
    return dataset ? io::load_dataset_tokenizer(cmd.tokenizer)
                   : io::Tokenizer::from_file(cmd.tokenizer);
  }
  std::unique_ptr<Documents> all = share(cmd, corpus, 0, 1);
  const bool show = true; // rank 0 alone reads the corpus here, and says so
  Progress progress("tokenizer: reading the corpus", show, cmd.progress_every);
  std::uint64_t documents = 0;
  bool ended = false; // the corpus was read to its end
  std::string document;
  std::string::size_type at = 0;
  const auto next_text = [&](std::string& text) {
    while (at >= document.size()) {
      if (!all->next(document)) {
        ended = true;
        progress.finish();
        std::printf("tokenizer: learning %d BPE pieces from %s documents (%s)...\n", cmd.vocab_size,
                    short_count(double(documents)).c_str(),
                    decimal_bytes(double(all->bytes())).c_str());
        std::fflush(stdout);
        return false;
      }
      ++documents;
      at = 0;
      progress.update(all->fraction(), all->bytes(), documents, 0);
    }
    const std::string::size_type end = text_end(document, at);
    text = document.substr(at, end - at);
    at = end;
    return true;
  };
  io::BpeTrainingOptions o;
  o.vocab_size = cmd.vocab_size;
  o.seed = std::uint64_t(cmd.seed);
  o.byte_fallback = cmd.vocab_size >= 512; // 256 byte pieces need room beside the learned ones
  description = fmt::format("SentencePiece BPE, {} pieces, trained by gridlm prepare-data on "
                            "its input{}",
                            cmd.vocab_size, o.byte_fallback ? " (byte fallback)" : "");
  try {
    return io::train_bpe(o, next_text);
  } catch (const Error&) {
    if (documents == 0 && ended) {
      throw Error("the inputs hold no documents (only blank lines or empty texts): nothing to "
                  "train a tokenizer on");
    }
    throw;
  }
}

// Rank 0's first line: what is being prepared, on how many ranks.
void print_start(const PrepareDataCommand& cmd, const io::Corpus& corpus, int size) {
  if (cmd.synthetic) {
    std::printf("gridlm prepare-data: synthetic corpus of %ld documents (seed %ld) on %d "
                "rank%s\n",
                cmd.synthetic_documents, cmd.seed, size, size == 1 ? "" : "s");
  } else {
    std::string skipped;
    if (!corpus.skipped.empty()) {
      skipped += fmt::format(" ({} binary files skipped)", corpus.skipped.size());
    }
    if (!corpus.repeats.empty()) {
      skipped += fmt::format(" ({} paths to files already read skipped)", corpus.repeats.size());
    }
    std::printf("gridlm prepare-data: %zu files, %s, documents by %s, on %d rank%s%s\n",
                corpus.files.size(), decimal_bytes(double(corpus.bytes)).c_str(),
                cmd.documents.c_str(), size, size == 1 ? "" : "s", skipped.c_str());
  }
  std::fflush(stdout);
}

// This rank's share of the documents, tokenized into the training and validation splits (each
// document by a hash of its text, so the split is the same for any number of ranks); returns
// the bytes of text read.
std::uint64_t tokenize(const PrepareDataCommand& cmd, const io::Corpus& corpus,
                       const io::Tokenizer& tokenizer, int rank, int size, Progress& progress,
                       io::SplitPart& train, io::SplitPart& valid) {
  std::unique_ptr<Documents> mine = share(cmd, corpus, rank, size);
  std::string document;
  std::vector<int> ids;
  std::uint64_t documents = 0, tokens = 0;
  while (mine->next(document)) {
    ids.clear();
    tokenizer.encode(document, ids);
    if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
    // From the text alone: the same split for any number of ranks, duplicates together.
    const double u = double(io::mix64(std::uint64_t(cmd.seed) ^ fnv1a(document)) >> 11) * 0x1.0p-53;
    io::SplitPart& part = u < cmd.valid_fraction ? valid : train;
    part.tokens.append(ids);
    part.doc_tokens.push_back(ids.size());
    tokens += ids.size();
    progress.update(mine->fraction(), mine->bytes(), ++documents, tokens);
  }
  return mine->bytes();
}

// The hang watchdog (parallel/watchdog.hpp), as a training run has one: a rank held up (a
// stalled file system, a node that stopped) is named, in reports beside the output
// (DIR/hang/), and the job ends with status 76 instead of waiting for the batch system's limit.
parallel::Watchdog start_watchdog(const PrepareDataCommand& cmd, MPI_Comm world) {
  const int rank = parallel::comm_rank(world);
  std::string run_id = rank == 0 ? fmt::format("prepare-{}-{}-{:.6f}", host_name(), ::getpid(),
                                               parallel::flight::wall_seconds())
                                 : std::string();
  parallel::broadcast_text(world, run_id);
  std::filesystem::path dir = std::filesystem::absolute(cmd.output).parent_path();
  const char* status_file = std::getenv("GRIDLM_STATUS_FILE");
  return parallel::Watchdog(parallel::WatchdogOptions{
      cmd.timeout_seconds, dir.string(), rank, parallel::comm_size(world), host_name(), 0, 0, 0,
      run_id, status_file != nullptr ? status_file : "", "--timeout-seconds"});
}

void run(const PrepareDataCommand& cmd) {
  const MPI_Comm world = MPI_COMM_WORLD;
  const int rank = parallel::comm_rank(world), size = parallel::comm_size(world);
  const bool root = rank == 0;
  io::Corpus corpus;
  parallel::run_agreed(world, [&] {
    check_options(cmd);
    if (!cmd.synthetic) {
      corpus = io::find_corpus(cmd.inputs);
      if (corpus.bytes == 0) throw Error("the inputs hold no text (no bytes in any file)");
      check_output_not_in_corpus(cmd.output, corpus);
    }
  });
  parallel::fault::configure_from_environment();
  const parallel::Watchdog watchdog = start_watchdog(cmd, world);
  parallel::flight::set_phase("in gridlm prepare-data", -1, -1); // for a hang report
  if (!cmd.synthetic) agree_on_corpus(corpus, world);
  // After every rank has listed the inputs: the probe's file, made beside the output, would be
  // found as an input by a rank still listing a directory that holds it.
  parallel::run_agreed(world, [&] {
    if (root) probe_output(cmd.output);
  });
  if (root) print_start(cmd, corpus, size);

  std::string model, description;
  parallel::run_agreed(world, [&] {
    if (root) model = make_tokenizer(cmd, corpus, description).model_bytes();
  });
  parallel::broadcast_text(world, model);
  parallel::broadcast_text(world, description);
  const io::Tokenizer tokenizer = io::Tokenizer::from_bytes(model, "the tokenizer");
  if (root) {
    std::printf("tokenizer: %s; vocabulary %d, bos %d, eos %d, unk %d, pad %d\n",
                description.c_str(), tokenizer.vocab_size(), tokenizer.bos_id(), tokenizer.eos_id(),
                tokenizer.unk_id(), tokenizer.pad_id());
    std::fflush(stdout);
  }

  io::SplitPart train(tokenizer.vocab_size()), valid(tokenizer.vocab_size());
  Progress progress(size == 1 ? "tokenizing" : fmt::format("tokenizing (rank 0 of {})", size), root,
                    cmd.progress_every);
  std::uint64_t bytes = 0;
  parallel::run_agreed(
      world, [&] { bytes = tokenize(cmd, corpus, tokenizer, rank, size, progress, train, valid); });
  const double tokenize_seconds = progress.finish();

  io::DatasetHeader header = io::header_for_tokenizer(tokenizer);
  header.tokenizer = description;
  header.created_by = cmd.command_line;
  header.valid_fraction = cmd.valid_fraction;
  header.seed = std::uint64_t(cmd.seed);
  const io::DatasetTotals t = io::write_token_dataset(world, cmd.output, header, train, valid);
  std::uint64_t all_bytes = bytes;
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_bytes, 1, MPI_UINT64_T, MPI_SUM, world));
  if (root) {
    std::printf("wrote %s (%s): %llu training tokens in %llu documents, %llu validation tokens "
                "in %llu documents; vocabulary %d (%s); %s of text tokenized in %.1f s (%s/s "
                "per rank)\n",
                cmd.output.c_str(), decimal_bytes(double(t.file_bytes)).c_str(),
                static_cast<unsigned long long>(t.tokens),
                static_cast<unsigned long long>(t.documents),
                static_cast<unsigned long long>(t.valid_tokens),
                static_cast<unsigned long long>(t.valid_documents), tokenizer.vocab_size(),
                tokenizer.vocab_size() > io::narrow_vocab_limit ? "uint32" : "uint16",
                decimal_bytes(double(all_bytes)).c_str(), tokenize_seconds,
                decimal_bytes(double(bytes) / std::max(tokenize_seconds, 1e-9)).c_str());
    std::fflush(stdout);
  }
}

} // namespace

void add_prepare_data_command(CLI::App& app, const std::string& command_line) {
  auto cmd = std::make_shared<PrepareDataCommand>();
  cmd->command_line = command_line;
  CLI::App* sub = app.add_subcommand(
      "prepare-data", "Tokenize text into a dataset file for training (docs/formats/dataset.md)");
  sub->add_option("inputs", cmd->inputs,
                  "Text files, JSON-lines files (.jsonl: one {\"text\": ...} per line) or "
                  "directories of them (searched recursively)");
  sub->add_option("-o,--output", cmd->output, "The dataset file to write (HDF5)")->required();
  sub->add_option("--vocab-size", cmd->vocab_size,
                  "Train a SentencePiece BPE tokenizer of this many pieces on the input")
      ->check(positive_number());
  sub->add_option("--tokenizer", cmd->tokenizer,
                  "Use this tokenizer instead: a SentencePiece .model file, or a gridlm dataset "
                  "whose tokenizer to reuse");
  sub->add_option("--documents", cmd->documents,
                  "How plain text files are cut into documents: paragraph (at blank lines), "
                  "line or file")
      ->capture_default_str();
  sub->add_option("--valid-fraction", cmd->valid_fraction,
                  "Fraction of documents for the validation split (whole documents)")
      ->capture_default_str();
  sub->add_option("--seed", cmd->seed,
                  "Seed of the validation split, the tokenizer's sampling and --synthetic")
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_flag("--synthetic", cmd->synthetic,
                "Use the built-in synthetic English-like corpus instead of input files");
  sub->add_option("--synthetic-documents", cmd->synthetic_documents,
                  "Documents in the synthetic corpus")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--timeout-seconds", cmd->timeout_seconds,
                  "A wait this long in one collective or file operation is a hang: every rank "
                  "reports what it waits for (beside the output, in hang/), and the job ends "
                  "with status 76 (0: no watchdog)")
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_option("--progress-every", cmd->progress_every,
                  "Seconds between progress lines when the output is not a terminal")
      ->capture_default_str()
      ->check(positive_number());
  sub->footer("Examples:\n"
              "  gridlm prepare-data --synthetic --vocab-size 512 -o data/synthetic.h5\n"
              "  mpiexec -n 4 gridlm prepare-data corpus/ --vocab-size 8000 -o data/corpus.h5\n"
              "  gridlm prepare-data more.jsonl --tokenizer data/corpus.h5 -o data/more.h5");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
