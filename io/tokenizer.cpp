// SentencePiece behind io::Tokenizer: loading, encoding, decoding and BPE training.
#include "io/tokenizer.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::io {
namespace {

// Pulls training texts from a callback: SentencePiece asks for them one at a time, so a corpus
// larger than memory streams through while SentencePiece keeps its own sample.
class CallbackSentences final : public sentencepiece::SentenceIterator {
public:
  explicit CallbackSentences(const std::function<bool(std::string&)>& next) : next_(next) {
    Next();
  }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(value_); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

private:
  const std::function<bool(std::string&)>& next_;
  std::string value_;
  bool done_ = false;
};

} // namespace

Tokenizer Tokenizer::from_bytes(std::string model, const std::string& origin) {
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(model);
  if (!status.ok() || sp->GetPieceSize() <= 0) {
    throw Error(fmt::format("{} is not a SentencePiece model ({}); give a .model file that "
                            "SentencePiece wrote, or prepare the dataset again",
                            origin, status.ok() ? "it has no pieces" : status.ToString()));
  }
  Tokenizer t;
  t.sp_ = std::move(sp);
  t.bytes_ = std::move(model);
  t.origin_ = origin;
  return t;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  const char* why = !std::filesystem::exists(status)            ? "no such file"
                    : std::filesystem::is_directory(status)     ? "it is a directory"
                    : !std::filesystem::is_regular_file(status) ? "it is not a regular file"
                                                                : nullptr;
  std::ifstream in(path, std::ios::binary);
  if (why == nullptr && !in) why = "it cannot be opened";
  if (why != nullptr) {
    throw Error(fmt::format("cannot read tokenizer model '{}': {}; give a SentencePiece .model "
                            "file or a gridlm dataset",
                            path, why));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return from_bytes(bytes.str(), fmt::format("'{}'", path));
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
int Tokenizer::unk_id() const { return sp_->unk_id(); }
int Tokenizer::pad_id() const { return sp_->pad_id(); }

void Tokenizer::encode(std::string_view text, std::vector<int>& out) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) {
    throw Error(fmt::format("tokenizer from {} cannot encode a text of {} bytes: {}", origin_,
                            text.size(), status.ToString()));
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  if (!status.ok()) {
    throw Error(fmt::format("tokenizer from {} cannot decode {} ids: {}", origin_, ids.size(),
                            status.ToString()));
  }
  return text;
}

std::string Tokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error(fmt::format("token id {} is outside the vocabulary of {} (tokenizer from {})", id,
                            vocab_size(), origin_));
  }
  return sp_->IdToPiece(id);
}

namespace {

// SentencePiece's refusals in the user's terms, with the number to give; others as they are.
Error training_error(int vocab_size, bool byte_fallback, const std::string& reason) {
  int need = 0, have = 0;
  const auto small = reason.find("Vocabulary size is smaller than required_chars.");
  if (small != std::string::npos &&
      std::sscanf(reason.c_str() + small + 48, " %d vs %d", &have, &need) == 2) {
    return Error(fmt::format("--vocab-size {} is too small for this corpus: its distinct "
                             "characters and special pieces alone are {}; give --vocab-size of "
                             "at least {} (a few times more leaves room for merges)",
                             vocab_size, need, need));
  }
  const auto high = reason.find("Vocabulary size too high");
  if (high != std::string::npos) {
    const auto at = reason.find("<=", high);
    if (at != std::string::npos && std::sscanf(reason.c_str() + at + 2, " %d", &need) == 1) {
      // The most counts the 256 byte pieces, which a vocabulary under 512 goes without
      // (prepare-data): advising such a size, the room they took is not there to give.
      const int give = byte_fallback && need < 512 ? need - 256 : need;
      return Error(fmt::format("--vocab-size {} is more than this corpus can fill: it yields at "
                               "most {} pieces; give --vocab-size {} or less, or more text",
                               vocab_size, need, give));
    }
  }
  return Error(fmt::format("training the tokenizer (SentencePiece BPE, vocabulary {}) failed: {}",
                           vocab_size, reason));
}

} // namespace

Tokenizer train_bpe(const BpeTrainingOptions& o, const std::function<bool(std::string&)>& next) {
  // unk, bos, eos and the line break are pieces of every vocabulary; byte fallback adds 256.
  const int minimum = 4 + (o.byte_fallback ? 256 : 0);
  if (o.vocab_size < minimum) {
    throw Error(fmt::format("--vocab-size {} is too small: a vocabulary holds at least {} pieces "
                            "(unk, bos, eos, the line break{}) and the corpus's characters",
                            o.vocab_size, minimum, o.byte_fallback ? ", 256 byte pieces" : ""));
  }
  // SentencePiece's defaults normalise text (NFKC, collapsed spaces) and drop line breaks; a
  // language model's text should come back exactly as it went in.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"user_defined_symbols", "\n"},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", std::to_string(o.max_sentence_bytes)},
      {"num_threads", "1"}, // deterministic, and the cores belong to the other ranks
      {"minloglevel", "2"}, // gridlm reports progress itself
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed));
  CallbackSentences sentences(next);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &model);
  if (!status.ok()) throw training_error(o.vocab_size, o.byte_fallback, status.ToString());
  return Tokenizer::from_bytes(std::move(model), "the tokenizer just trained");
}

} // namespace gridlm::io
