// The tokenizer keeps text exactly (decode(encode(x)) == x, line breaks and spaces included),
// trains deterministically, reports SentencePiece's special ids and refuses what is not a
// model. The synthetic corpus is deterministic, English-like and agrees with itself.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "io/synthetic_corpus.hpp"
#include "io/tokenizer.hpp"
#include "parallel/diagnostics.hpp"

using namespace gridlm::io;

namespace {
Tokenizer train_on_synthetic(int vocab, int docs) {
  const SyntheticCorpus corpus(3);
  int i = 0;
  BpeTrainingOptions o;
  o.vocab_size = vocab;
  o.byte_fallback = vocab >= 512;
  return train_bpe(o, [&](std::string& text) {
    if (i == docs) return false;
    text = corpus.document(std::uint64_t(i++));
    return true;
  });
}
} // namespace

TEST(SyntheticCorpus, DeterministicAndEnglishLike) {
  const SyntheticCorpus a(1), b(1), c(2);
  EXPECT_EQ(a.document(5), b.document(5));
  EXPECT_NE(a.document(5), a.document(6));
  EXPECT_NE(a.document(5), c.document(5));
  const std::regex sentence("[A-Z][a-z]*( [a-z]+)*(\\.|\\? (Yes|No), (it|they)( do| does)( not)?"
                            "\\.)");
  for (std::uint64_t d = 0; d < 200; ++d) {
    const std::string text = a.document(d);
    const auto nl = text.find('\n');
    ASSERT_NE(nl, std::string::npos) << text;
    EXPECT_TRUE(std::regex_match(text.substr(0, nl), std::regex("[A-Z][a-z]+ at the [a-z]+\\.")))
        << text;
    // Agreement: never "one dogs", "two dog.", "a owl", "it do", "they does".
    for (const char* wrong : {" one [a-z]+s\\.", " (two|three|four|five) [a-z]*[^s]\\.",
                              " a [aeiou]", "it do[ .]", "they does"}) {
      EXPECT_FALSE(std::regex_search(text, std::regex(wrong))) << wrong << " in " << text;
    }
    std::string body = text.substr(nl + 1);
    std::smatch m;
    while (std::regex_search(body, m,
                             std::regex("^" + std::string("[^.?]*[.?]( (Yes|No)[^.]*\\.)?")))) {
      const std::string s = m.str(0);
      EXPECT_TRUE(std::regex_match(s, sentence)) << "'" << s << "' in " << text;
      body = m.suffix().str();
      if (!body.empty() && body[0] == ' ') body.erase(0, 1);
    }
    EXPECT_TRUE(body.empty()) << body;
  }
}

TEST(Tokenizer, KeepsTextExactly) {
  const Tokenizer t = train_on_synthetic(512, 2000);
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.unk_id(), 0);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.pad_id(), -1);
  for (const std::string& text :
       {std::string("Tom at the farm.\nThe cow sees the hay."), std::string("  two  spaces\n\n"),
        std::string("unseen: Zürich 42 {x} \t tab"), std::string("")}) {
    std::vector<int> ids;
    t.encode(text, ids);
    for (int id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, t.vocab_size());
      EXPECT_NE(id, t.unk_id()) << "byte fallback leaves no unknown pieces";
    }
    EXPECT_EQ(t.decode(ids), text);
  }
  // Learned merges: a frequent word is one piece.
  std::vector<int> ids;
  t.encode("the", ids);
  EXPECT_EQ(ids.size(), 1u) << t.piece(ids[0]);
}

TEST(Tokenizer, TrainingIsDeterministicAndModelBytesRoundTrip) {
  const Tokenizer a = train_on_synthetic(300, 500), b = train_on_synthetic(300, 500);
  EXPECT_EQ(a.model_bytes(), b.model_bytes());
  const Tokenizer c = Tokenizer::from_bytes(a.model_bytes(), "a copy");
  std::vector<int> x, y;
  a.encode("The hens sleep near the barn.", x);
  c.encode("The hens sleep near the barn.", y);
  EXPECT_EQ(x, y);
}

TEST(Tokenizer, RefusesWhatIsNotAModel) {
  try {
    Tokenizer::from_bytes("certainly not a protobuf", "'junk.model'");
    FAIL() << "no error";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'junk.model' is not a SentencePiece model"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tokenizer::from_file("/no/such.model"), gridlm::Error);
  // A vocabulary the text cannot fill: SentencePiece's refusal, in the user's terms.
  try {
    train_on_synthetic(100000, 20);
    FAIL() << "no error";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is more than this corpus can fill"), std::string::npos);
  }
}
