// Finding input files and reading their documents by share.
#include "io/text_corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <utility>

#include <sys/stat.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/parallel_h5.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::io {
namespace fs = std::filesystem;
namespace {

bool blank_char(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n';
}

bool is_blank(const std::string& s) { return std::all_of(s.begin(), s.end(), blank_char); }

bool looks_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4096];
  in.read(head, sizeof head);
  return std::find(head, head + in.gcount(), '\0') != head + in.gcount();
}

bool is_jsonl(const fs::path& path) {
  return path.extension() == ".jsonl" || path.extension() == ".ndjson";
}

bool hidden(const fs::path& relative) {
  for (const fs::path& part : relative) {
    const std::string name = part.string();
    if (name.size() > 1 && name[0] == '.' && name != "..") return true;
  }
  return false;
}

// Whether the line that ends just before file offset `pos` (at the "\n" at pos - 1) is blank,
// read backwards in blocks: a share that starts inside a paragraph must not begin a new one.
bool line_before_is_blank(std::ifstream& in, std::uint64_t pos) {
  char block[4096];
  std::int64_t i = std::int64_t(pos) - 2;
  while (i >= 0) {
    const std::int64_t start = std::max<std::int64_t>(0, i - std::int64_t(sizeof block) + 1);
    in.clear();
    in.seekg(start);
    in.read(block, i - start + 1);
    for (std::int64_t j = i; j >= start; --j) {
      const char c = block[j - start];
      if (c == '\n') return true;
      if (!blank_char(c)) return false;
    }
    i = start - 1;
  }
  return true;
}

} // namespace

DocumentMode parse_document_mode(const std::string& name) {
  if (name == "paragraph") return DocumentMode::paragraph;
  if (name == "line") return DocumentMode::line;
  if (name == "file") return DocumentMode::file;
  throw Error(fmt::format("unknown document mode '{}': the modes are paragraph (documents "
                          "separated by blank lines), line and file",
                          name));
}

const char* document_mode_name(DocumentMode mode) {
  switch (mode) {
  case DocumentMode::paragraph: return "paragraph";
  case DocumentMode::line: return "line";
  default: return "file";
  }
}

Corpus find_corpus(const std::vector<std::string>& inputs) {
  Corpus corpus;
  // Device and inode: a file reached twice (a repeated input, a link, a hard link) is read once.
  std::set<std::pair<dev_t, ino_t>> seen;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) {
      corpus.repeats.push_back(p.string());
      return;
    }
    const std::uint64_t size = fs::file_size(p, ec);
    if (ec) throw Error(fmt::format("cannot read input '{}': {}", p.string(), ec.message()));
    corpus.files.push_back({p.string(), size, is_jsonl(p)});
    corpus.bytes += size;
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status status = fs::status(input, ec);
    if (fs::is_regular_file(status)) {
      add(input);
    } else if (fs::is_directory(status)) {
      std::vector<fs::path> found;
      // error_code forms throughout: a std::filesystem exception is not a gridlm::Error, and
      // only those are agreed across ranks.
      for (auto it = fs::recursive_directory_iterator(input, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const fs::path relative = it->path().lexically_relative(input);
        std::error_code kind;
        if (hidden(relative)) {
          if (it->is_directory(kind)) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file(kind)) found.push_back(it->path());
      }
      if (ec) {
        throw Error(fmt::format("cannot list input directory '{}': {}", input, ec.message()));
      }
      std::sort(found.begin(), found.end());
      for (const fs::path& p : found) {
        if (looks_binary(p)) {
          corpus.skipped.push_back(p.string());
        } else {
          add(p);
        }
      }
    } else {
      throw Error(fmt::format(
          "input '{}' {}: give text files, JSON-lines files (.jsonl) or "
          "directories of them",
          input, fs::exists(status) ? "is neither a file nor a directory" : "does not exist"));
    }
  }
  return corpus;
}

DocumentReader::DocumentReader(const Corpus& corpus, DocumentMode mode, int part, int parts)
    : corpus_(corpus), mode_(mode) {
  begin_ = part_begin(corpus.bytes, part, parts);
  end_ = part_begin(corpus.bytes, part + 1, parts);
}

std::uint64_t DocumentReader::bytes_done() const {
  if (!open_) return done_before_;
  return done_before_ + std::min(pos_, owned_end_) - owned_begin_;
}

bool DocumentReader::open_next_file() {
  while (next_file_ < corpus_.files.size()) {
    file_ = next_file_++;
    const CorpusFile& f = corpus_.files[file_];
    file_begin_ = next_file_begin_;
    next_file_begin_ += f.size;
    const std::uint64_t file_end = file_begin_ + f.size;
    if (f.size == 0 || file_end <= begin_ || file_begin_ >= end_) continue;
    owned_begin_ = std::max(begin_, file_begin_) - file_begin_;
    owned_end_ = std::min(end_, file_end) - file_begin_;
    // A whole-file document belongs to the share holding the file's first byte.
    if (mode_ == DocumentMode::file && !f.jsonl && file_begin_ < begin_) {
      done_before_ += owned_end_ - owned_begin_;
      continue;
    }
    in_ = std::ifstream(f.path, std::ios::binary);
    if (!in_) throw Error(fmt::format("cannot open input '{}'", f.path));
    pos_ = owned_begin_;
    if (pos_ > 0) {
      // Skip the rest of the line in progress: it belongs to the share before.
      in_.seekg(pos_ - 1);
      std::string rest;
      std::getline(in_, rest);
      pos_ += rest.size();
      if (pos_ > f.size) pos_ = f.size;
    }
    previous_blank_ = pos_ == 0 || line_before_is_blank(in_, pos_);
    in_.clear();
    in_.seekg(pos_);
    in_paragraph_ = false;
    open_ = true;
    return true;
  }
  return false;
}

bool DocumentReader::json_text(const std::string& line, std::uint64_t at,
                               std::string& document) const {
  const std::string& path = corpus_.files[file_].path;
  const auto fail = [&](const std::string& problem) {
    return Error(fmt::format("{}: the JSON line at byte {} {}; each line of a JSON-lines file "
                             "must be an object with a string field \"text\"",
                             path, at, problem));
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw fail(fmt::format("is not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) throw fail("is not an object");
  const auto text = j.find("text");
  if (text == j.end()) throw fail("has no field \"text\"");
  if (!text->is_string()) throw fail("has a \"text\" that is not a string");
  document = text->get<std::string>();
  return !is_blank(document);
}

namespace {

// Text never holds a NUL byte; a file that does is binary (an archive, an executable, UTF-16),
// and SentencePiece would learn its bytes as pieces.
// The offset of the first byte of `text` that does not belong to well-formed UTF-8 (no overlong
// forms, surrogates or code points past U+10FFFF), or npos.
std::string::size_type first_non_utf8(const std::string& text) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const std::string::size_type n = text.size();
  for (std::string::size_type i = 0; i < n;) {
    const unsigned c = b[i];
    std::string::size_type len = 0;
    unsigned low = 0x80, high = 0xBF; // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) low = 0xA0;  // overlong
      if (c == 0xED) high = 0x9F; // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) low = 0x90;  // overlong
      if (c == 0xF4) high = 0x8F; // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || b[i + 1] < low || b[i + 1] > high) return i;
    for (std::string::size_type k = 2; k < len; ++k) {
      if (b[i + k] < 0x80 || b[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string::npos;
}

void check_text(const std::string& text, const std::string& path, std::uint64_t at) {
  const auto nul = text.find('\0');
  if (nul != std::string::npos) {
    throw Error(fmt::format("{}: byte {} is a NUL: this is a binary file, not text; give text "
                            "files (UTF-8), .jsonl files, or directories of them",
                            path, at + nul));
  }
  // The tokenizer would turn what is not UTF-8 into unknown pieces, and the text would not come
  // back as it was.
  const auto bad = first_non_utf8(text);
  if (bad != std::string::npos) {
    throw Error(fmt::format("{}: byte {} (0x{:02x}) is not UTF-8: the text is in another "
                            "encoding (Latin-1, say); convert it to UTF-8 (iconv -f latin1 -t "
                            "utf-8) and run again",
                            path, at + bad, static_cast<unsigned char>(text[bad])));
  }
}

} // namespace

bool DocumentReader::next_in_file(std::string& document) {
  const CorpusFile& f = corpus_.files[file_];
  if (mode_ == DocumentMode::file && !f.jsonl) {
    std::ostringstream all;
    all << in_.rdbuf();
    document = all.str();
    check_text(document, f.path, 0);
    pos_ = f.size;
    std::string::size_type w = 0;
    for (std::string::size_type r = 0; r < document.size(); ++r) {
      if (document[r] == '\r' && r + 1 < document.size() && document[r + 1] == '\n') continue;
      document[w++] = document[r];
    }
    document.resize(w);
    while (!document.empty() && blank_char(document.back()))
      document.pop_back();
    return !document.empty();
  }
  std::string line;
  while (pos_ < owned_end_ || in_paragraph_) {
    const std::uint64_t at = pos_;
    if (!std::getline(in_, line)) break;
    check_text(line, f.path, at);
    pos_ += line.size() + (in_.eof() ? 0 : 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool blank = is_blank(line);
    if (f.jsonl) {
      if (!blank && json_text(line, at, document)) return true;
    } else if (mode_ == DocumentMode::line) {
      if (!blank) {
        document = std::move(line);
        return true;
      }
    } else if (blank) {
      previous_blank_ = true;
      if (in_paragraph_) {
        in_paragraph_ = false;
        document = std::move(paragraph_);
        return true;
      }
    } else {
      if (in_paragraph_) {
        paragraph_ += '\n';
        paragraph_ += line;
      } else if (previous_blank_) {
        in_paragraph_ = true;
        paragraph_ = std::move(line);
      }
      previous_blank_ = false;
    }
  }
  if (in_paragraph_) {
    in_paragraph_ = false;
    document = std::move(paragraph_);
    return true;
  }
  return false;
}

bool DocumentReader::next(std::string& document) {
  for (;;) {
    if (!open_ && !open_next_file()) return false;
    if (next_in_file(document)) return true;
    done_before_ += owned_end_ - owned_begin_;
    open_ = false;
    in_.close();
  }
}

} // namespace gridlm::io
