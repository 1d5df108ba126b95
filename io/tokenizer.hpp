// io::Tokenizer: text <-> token ids through a SentencePiece model, loaded from the model's bytes
// (as a dataset stores them) or a .model file; and train_bpe, which learns a BPE model from text.
// SentencePiece stays behind this interface, so its headers reach only io/tokenizer.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
} // namespace sentencepiece

namespace gridlm::io {

class Tokenizer {
public:
  // `origin` names where the bytes came from, for error messages. Throws gridlm::Error when the
  // bytes are not a SentencePiece model.
  static Tokenizer from_bytes(std::string model, const std::string& origin);
  static Tokenizer from_file(const std::string& path);

  int vocab_size() const;
  // Special token ids as SentencePiece reports them; -1 when the model has none.
  int bos_id() const;
  int eos_id() const;
  int unk_id() const;
  int pad_id() const;

  // Appends the ids of `text` to `out`.
  void encode(std::string_view text, std::vector<int>& out) const;
  std::string decode(const std::vector<int>& ids) const;
  // The piece of one id, for display ("▁the").
  std::string piece(int id) const;
  // The serialized model, exactly what from_bytes() takes.
  const std::string& model_bytes() const { return bytes_; }

private:
  Tokenizer() = default;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_;
  std::string origin_;
};

struct BpeTrainingOptions {
  int vocab_size = 512;             // pieces in the model, special tokens included
  std::uint64_t seed = 1;           // seeds SentencePiece's sampling of input sentences
  long max_sentences = 1000000;     // SentencePiece keeps at most this many training texts
  bool byte_fallback = true;        // unknown characters become UTF-8 byte pieces, never <unk>
  int max_sentence_bytes = 1 << 14; // longer training texts are skipped by SentencePiece
};

// Trains a SentencePiece BPE model on the texts `next` yields (it returns false at the end).
// The model keeps text exactly: no normalisation, whitespace as written, and "\n" a piece of its
// own, so decode(encode(text)) == text. Throws gridlm::Error with SentencePiece's reason.
Tokenizer train_bpe(const BpeTrainingOptions& options,
                    const std::function<bool(std::string&)>& next);

} // namespace gridlm::io
