// Corpus reading: documents are cut as documented (paragraphs, lines, files, JSON lines), and
// the shares of any number of parts, taken in order, are exactly the documents of one reader,
// however the byte boundaries fall (inside lines, inside runs of blank lines, inside files).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/text_corpus.hpp"
#include "parallel/diagnostics.hpp"

using namespace gridlm::io;
namespace fs = std::filesystem;

namespace {

class CorpusDir {
public:
  CorpusDir() : root_(fs::temp_directory_path() / ("gridlm_corpus_" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~CorpusDir() { fs::remove_all(root_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = root_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string path() const { return root_.string(); }

private:
  fs::path root_;
};

std::vector<std::string> read_all(const Corpus& c, DocumentMode mode, int part, int parts) {
  DocumentReader reader(c, mode, part, parts);
  std::vector<std::string> docs;
  std::string d;
  while (reader.next(d))
    docs.push_back(d);
  EXPECT_EQ(reader.bytes_done(), reader.share_bytes());
  return docs;
}

std::vector<std::string> read_parts(const Corpus& c, DocumentMode mode, int parts) {
  std::vector<std::string> docs;
  for (int p = 0; p < parts; ++p) {
    auto mine = read_all(c, mode, p, parts);
    docs.insert(docs.end(), mine.begin(), mine.end());
  }
  return docs;
}

const char* tricky = "\n\nfirst para line one\nline two\r\n\n  \n\t\nsecond\n\n\n\nthird a\n"
                     "third b\nthird c\n \nlast without newline";

} // namespace

TEST(TextCorpus, ParagraphsLinesAndFiles) {
  CorpusDir dir;
  const std::string f = dir.write("a.txt", tricky);
  const Corpus c = find_corpus({f});
  EXPECT_EQ(read_all(c, DocumentMode::paragraph, 0, 1),
            (std::vector<std::string>{"first para line one\nline two", "second",
                                      "third a\nthird b\nthird c", "last without newline"}));
  EXPECT_EQ(read_all(c, DocumentMode::line, 0, 1),
            (std::vector<std::string>{"first para line one", "line two", "second", "third a",
                                      "third b", "third c", "last without newline"}));
  const auto whole = read_all(c, DocumentMode::file, 0, 1);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].substr(0, 25), "\n\nfirst para line one\nlin");
  EXPECT_EQ(whole[0].find('\r'), std::string::npos);
}

TEST(TextCorpus, AnyNumberOfPartsGivesTheSameDocuments) {
  CorpusDir dir;
  dir.write("d/1.txt", tricky);
  dir.write("d/2.txt", "");
  dir.write("d/3.txt", "x\n\ny\n");
  dir.write("d/sub/4.txt", std::string(300, 'w') + "\n\n" + tricky + "\n\n" + tricky);
  dir.write("d/5.jsonl", "{\"text\": \"json one\"}\n\n{\"text\": \"json\\n\\ntwo\", \"id\": 2}\n"
                         "{\"text\": \"  \"}\n{\"text\": \"json three\"}");
  const Corpus c = find_corpus({dir.path() + "/d"});
  ASSERT_EQ(c.files.size(), 5u);
  for (DocumentMode mode : {DocumentMode::paragraph, DocumentMode::line, DocumentMode::file}) {
    const auto one = read_all(c, mode, 0, 1);
    ASSERT_FALSE(one.empty());
    for (int parts = 2; parts <= 40; ++parts)
      ASSERT_EQ(read_parts(c, mode, parts), one) << document_mode_name(mode) << " " << parts;
  }
  // Name order: 1.txt 2.txt 3.txt 5.jsonl sub/4.txt.
  const auto docs = read_all(c, DocumentMode::paragraph, 0, 1);
  const auto json = std::find(docs.begin(), docs.end(), "json one");
  ASSERT_NE(json, docs.end());
  EXPECT_EQ(
      std::vector<std::string>(json, json + 4),
      (std::vector<std::string>{"json one", "json\n\ntwo", "json three", std::string(300, 'w')}));
}

TEST(TextCorpus, DirectoriesSkipHiddenAndBinaryFiles) {
  CorpusDir dir;
  dir.write("b/z.txt", "z");
  dir.write("b/a.txt", "a");
  dir.write("b/.hidden.txt", "h");
  dir.write("b/.git/config", "g");
  dir.write("b/bin.dat", std::string("ab\0cd", 5));
  const Corpus c = find_corpus({dir.path() + "/b"});
  ASSERT_EQ(c.files.size(), 2u);
  EXPECT_EQ(fs::path(c.files[0].path).filename(), "a.txt");
  EXPECT_EQ(fs::path(c.files[1].path).filename(), "z.txt");
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_EQ(c.bytes, 2u);
}

// A file reached twice is read once: named twice, through a symbolic link, or a hard link.
TEST(TextCorpus, AFileReachedTwiceIsReadOnce) {
  CorpusDir dir;
  dir.write("c/a.txt", "a");
  fs::create_hard_link(dir.path() + "/c/a.txt", dir.path() + "/c/b.txt");
  fs::create_symlink("a.txt", dir.path() + "/c/s.txt");
  const Corpus c = find_corpus({dir.path() + "/c", dir.path() + "/c/a.txt"});
  ASSERT_EQ(c.files.size(), 1u);
  EXPECT_EQ(fs::path(c.files[0].path).filename(), "a.txt");
  EXPECT_EQ(c.repeats.size(), 3u);
  EXPECT_EQ(c.bytes, 1u);
}

TEST(TextCorpus, BadInputsAreNamed) {
  CorpusDir dir;
  try {
    find_corpus({dir.path() + "/missing.txt"});
    FAIL() << "no error";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt' does not exist"), std::string::npos);
  }
  const std::string bad = dir.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n");
  const Corpus c = find_corpus({bad});
  DocumentReader reader(c, DocumentMode::paragraph, 0, 1);
  std::string d;
  EXPECT_TRUE(reader.next(d));
  try {
    reader.next(d);
    FAIL() << "no error";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl: the JSON line at byte 15 has no field"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_document_mode("sentence"), gridlm::Error);
}

// Text that is not UTF-8 (Latin-1's "café", a lone continuation byte, an overlong form, a
// surrogate, a sequence cut short) is refused with its file and byte; UTF-8 of every length
// passes, whatever the document mode.
TEST(TextCorpus, TextThatIsNotUtf8IsRefused) {
  CorpusDir dir;
  const std::string good = dir.write("good.txt", "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\n");
  for (const DocumentMode mode : {DocumentMode::paragraph, DocumentMode::line, DocumentMode::file})
    EXPECT_EQ(read_all(find_corpus({good}), mode, 0, 1).size(), 1u);
  const std::pair<const char*, std::string> bad[] = {
      {"latin1.txt", "ok\ncaf\xe9\n"},      {"lone.txt", "ok\nab\x80\n"},
      {"overlong.txt", "ok\nab\xc0\xaf\n"}, {"surrogate.txt", "ok\nab\xed\xa0\x80\n"},
      {"cut.txt", "ok\nab\xe4\xb8"},        {"past.txt", "ok\nab\xf4\x90\x80\x80\n"}};
  for (const auto& [name, text] : bad) {
    const Corpus c = find_corpus({dir.write(name, text)});
    for (const DocumentMode mode : {DocumentMode::line, DocumentMode::file}) {
      try {
        read_all(c, mode, 0, 1);
        ADD_FAILURE() << name << ": no error";
      } catch (const gridlm::Error& e) {
        const std::string byte = std::string(name) == "latin1.txt" ? "byte 6 (0xe9)" : "byte 5";
        EXPECT_NE(std::string(e.what()).find(std::string(name) + ": " + byte), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("is not UTF-8"), std::string::npos) << e.what();
      }
    }
  }
}
