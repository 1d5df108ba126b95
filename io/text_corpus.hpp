// Text corpora for `gridlm prepare-data`: the input files (given, or found in directories) and
// the documents in them, read by share so that ranks split the work. Shares are byte ranges of
// the corpus (the files back to back, in order); a document belongs to the share holding its
// first byte, so the shares of any number of ranks, taken in rank order, are exactly the
// documents of one reader, in the same order.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gridlm::io {

// How a plain text file is cut into documents. JSON-lines files always hold one document per
// line, the string field "text" of the object on it.
enum class DocumentMode {
  paragraph, // runs of non-blank lines, separated by blank lines
  line,      // each non-blank line
  file,      // the whole file
};
DocumentMode parse_document_mode(const std::string& name);
const char* document_mode_name(DocumentMode mode);

struct CorpusFile {
  std::string path;
  std::uint64_t size = 0;
  bool jsonl = false; // .jsonl or .ndjson
};

struct Corpus {
  std::vector<CorpusFile> files;
  std::uint64_t bytes = 0;
  std::vector<std::string> skipped; // files found in directories that look binary
  std::vector<std::string> repeats; // paths naming a file already read (links, repeated input)
};

// Each input is a file, or a directory searched recursively in name order, where hidden
// entries and files with a NUL byte in their first 4 KiB are skipped. Throws gridlm::Error
// naming an input that does not exist.
Corpus find_corpus(const std::vector<std::string>& inputs);

// Streams the documents of share `part` (0-based) of `parts`. Text lines lose a trailing "\r";
// a document that is only whitespace is skipped.
class DocumentReader {
public:
  DocumentReader(const Corpus& corpus, DocumentMode mode, int part, int parts);
  // The next document; false at the end of the share. Throws gridlm::Error naming the file and
  // byte offset of a malformed JSON line.
  bool next(std::string& document);
  std::uint64_t share_bytes() const { return end_ - begin_; }
  // Bytes of the share read so far.
  std::uint64_t bytes_done() const;

private:
  bool open_next_file();
  bool next_in_file(std::string& document);
  bool json_text(const std::string& line, std::uint64_t at, std::string& document) const;

  const Corpus& corpus_;
  DocumentMode mode_;
  std::uint64_t begin_, end_; // the share, in corpus bytes
  std::size_t next_file_ = 0;
  std::size_t file_ = 0;
  std::ifstream in_;
  bool open_ = false;
  std::uint64_t file_begin_ = 0;      // corpus offset of the open file
  std::uint64_t next_file_begin_ = 0; // corpus offset of files_[next_file_]
  std::uint64_t owned_begin_ = 0;     // the share within the open file, file bytes
  std::uint64_t owned_end_ = 0;       //
  std::uint64_t pos_ = 0;             // file offset of the next line
  std::uint64_t done_before_ = 0;     // share bytes of the files already closed
  bool previous_blank_ = true;        // paragraph mode: the last line read was blank
  std::string paragraph_;             // paragraph mode: the one being collected
  bool in_paragraph_ = false;         //
};

} // namespace gridlm::io
