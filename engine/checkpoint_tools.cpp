// One-process reading and copying of model files.
#include "engine/checkpoint_tools.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "io/h5_file.hpp"
#include "io/parallel_h5.hpp"
#include "layers/parameters.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

io::TensorShard whole(const std::vector<std::uint64_t>& shape) {
  io::TensorShard s;
  s.global_shape = s.local_shape = shape;
  s.file.push_back({std::vector<std::uint64_t>(shape.size(), 0), shape});
  s.memory = s.file;
  return s;
}

// The root attributes every gridlm model file has.
void read_root(const io::ParallelFile& f, FileSummary& s) {
  s.meta = read_root_attributes(f, s.path, s.model);
  s.gridlm_version = s.meta.gridlm_version;
}

// Every dataset the model's shape calls for (every parameter, and a checkpoint's moments) has
// a line in the checksum table, as read_model_file demands.
void check_table_complete(const FileSummary& s, const ChecksumTable& table) {
  std::set<std::string> listed;
  for (const auto& entry : table)
    listed.insert(entry.first);
  for (const layers::ParamInfo& p : layers::make_param_table(s.model).params) {
    std::vector<std::string> names{p.name};
    if (s.meta.optimizer) {
      for (const char* prefix : moment_prefixes)
        names.push_back(prefix + p.name);
    }
    for (const std::string& name : names) {
      if (listed.count(name) == 0) {
        throw Error(fmt::format("'{}' has no checksum for dataset '{}': the file is damaged or "
                                "was not written by gridlm",
                                s.path, name));
      }
    }
  }
}

bool is_moment(const std::string& name) { return name.rfind("optimizer/", 0) == 0; }

// Tensor dataset `name` read whole into `data`; returns its checksum.
std::uint64_t read_whole(const io::ParallelFile& f, const std::string& name,
                         std::vector<std::uint64_t>& shape, std::vector<float>& data) {
  shape = f.shape(name);
  data.assign(io::elements(shape), 0.0f);
  const io::TensorShard shard = whole(shape);
  f.read_shard(name, shard, Span<float>(data), io::Transfer::independent);
  return io::shard_checksum(shard, Span<const float>(data));
}

// export_weights' writing of `partial`: the weights of `in`, whose checksum table is `listed`.
void write_exported(const io::ParallelFile& in, const FileSummary& s, const ChecksumTable& listed,
                    const std::string& partial) {
  io::ParallelFile o = io::ParallelFile::create(MPI_COMM_SELF, partial);
  ChecksumTable table;
  std::vector<std::uint64_t> shape;
  std::vector<float> data;
  for (const auto& [name, stored] : listed) {
    if (is_moment(name)) continue;
    if (read_whole(in, name, shape, data) != stored) {
      throw Error(fmt::format("'{}': dataset '{}' does not match its checksum: the file is "
                              "damaged; export an earlier checkpoint",
                              s.path, name));
    }
    o.write_shard(name, whole(shape), Span<const float>(data));
    table.emplace_back(name, stored);
  }
  CheckpointMeta meta = s.meta;
  meta.optimizer = false;
  write_root_attributes(o, meta, s.model);
  o.write_attribute("/", "checksums", checksum_text(table));
  if (in.has_object("tokenizer/model")) {
    std::vector<std::uint8_t> bytes(in.dataset_size("tokenizer/model"));
    in.read("tokenizer/model", 0, Span<std::uint8_t>(bytes), io::Transfer::independent);
    o.write<std::uint8_t>("tokenizer/model", bytes.size(), 0, Span<const std::uint8_t>(bytes));
  }
  o.flush();
}

} // namespace

FileSummary summarize_model_file(const std::string& path, Tensors which,
                                 const TensorVisitor& visit) {
  FileSummary s;
  s.path = path;
  io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_SELF, path);
  read_root(f, s);
  std::error_code ec;
  s.bytes = std::filesystem::file_size(path, ec);
  std::vector<float> data;
  ChecksumTable table = read_checksums(f);
  check_table_complete(s, table);
  if (which == Tensors::weights) {
    table.erase(std::remove_if(table.begin(), table.end(),
                               [](const auto& entry) { return is_moment(entry.first); }),
                table.end());
  }
  std::vector<std::pair<std::string, io::TensorShard>> reads;
  for (const auto& entry : table)
    reads.emplace_back(entry.first, whole(f.shape(entry.first)));
  f.prefetch(reads);
  for (const auto& [name, stored] : table) {
    TensorSummary t;
    t.name = name;
    t.stored = stored;
    t.checksum = read_whole(f, name, t.shape, data);
    double sum = 0.0;
    for (float x : data)
      sum += double(x) * double(x);
    t.norm = std::sqrt(sum);
    if (visit) visit(s, t, data);
    s.tensors.push_back(std::move(t));
  }
  return s;
}

FileSummary verify_model_file(const std::string& path, Tensors which, const TensorVisitor& visit) {
  FileSummary s = summarize_model_file(path, which, visit);
  std::string bad;
  for (const TensorSummary& t : s.tensors) {
    if (t.checksum != t.stored) bad += (bad.empty() ? "" : ", ") + t.name;
  }
  if (!bad.empty()) {
    throw Error(fmt::format("'{}' is damaged: these tensors do not match their checksums: {}; "
                            "use an earlier checkpoint",
                            path, bad));
  }
  return s;
}

std::string stored_tokenizer(const std::string& path) {
  io::H5File in = io::H5File::open_read(path);
  return in.has("tokenizer/model") ? in.read_bytes("tokenizer/model") : std::string();
}

void check_same_tokenizer(const std::string& path, const std::string& tokenizer) {
  if (tokenizer.empty()) return;
  const std::string stored = stored_tokenizer(path);
  if (!stored.empty() && stored != tokenizer) {
    throw Error(fmt::format("'{}' was trained with another tokenizer than this run's dataset "
                            "has: its token ids stand for other pieces; point data.source at "
                            "the dataset it was trained on, or start a new run",
                            path));
  }
}

void export_weights(const std::string& path, const std::string& out) {
  std::error_code ec;
  if (out.empty() || std::filesystem::is_directory(out, ec)) {
    throw Error(fmt::format("--output '{}' is {}: give the path of the weights file to write", out,
                            out.empty() ? "empty" : "a directory"));
  }
  // The rename below would put the weights in place of the checkpoint they came from.
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(path, out, ec)) {
    throw Error(fmt::format("--output '{}' is the file being exported: give another path (the "
                            "checkpoint would be replaced by its weights alone)",
                            out));
  }
  FileSummary s;
  s.path = path;
  io::ParallelFile in = io::ParallelFile::open_read(MPI_COMM_SELF, path);
  read_root(in, s);
  const ChecksumTable table = read_checksums(in);
  check_table_complete(s, table);
  const std::string partial = out + ".partial";
  try {
    write_exported(in, s, table, partial);
    std::filesystem::rename(partial, out, ec);
    if (ec) throw Error(fmt::format("cannot rename '{}' to '{}': {}", partial, out, ec.message()));
  } catch (...) {
    std::filesystem::remove(partial, ec); // never left beside (or in place of) a good file
    throw;
  }
}

} // namespace gridlm::engine
