// Writing and reading checkpoint and weights files by shards.
#include "engine/checkpoint.hpp"

#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "engine/param_shard.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/fault_injection.hpp"

namespace gridlm::engine {
namespace {

// A parameter as one of this rank's chunks holds it.
struct Holding {
  std::size_t chunk = 0;
  int index = 0;       // in the chunk's table
  bool writes = false; // the one copy of the elements that this rank writes
};

// Where this rank holds parameter `name` (a tied wte twice: the embedding's copy and the head's).
// A data-parallel replica other than the first, a tensor rank other than the first of a
// replicated tensor and the head's copy of a tied wte hold what another writes.
std::vector<Holding> holdings(const PipelineModel& model, const std::string& name,
                              const parallel::Grid& grid) {
  std::vector<Holding> out;
  for (std::size_t c = 0; c < model.chunks().size(); ++c) {
    const layers::GPT& chunk = *model.chunks()[c];
    const int i = chunk.table().find(name);
    if (i < 0) continue;
    const layers::ParamInfo& p = chunk.table().params[std::size_t(i)];
    const bool tied_copy = i == chunk.table().wte && !chunk.stage().embedding;
    const bool replica =
        grid.coords().dp != 0 || (p.split == layers::TpSplit::replicated && grid.coords().tp != 0);
    out.push_back({c, i, !tied_copy && !replica});
  }
  return out;
}

// What one dataset of the file holds, per chunk: parameters, one of the moments or gradients.
enum class Part { params, m, v, grads };
const char* prefix(Part part) {
  return part == Part::m ? moment_prefixes[0] : part == Part::v ? moment_prefixes[1] : "";
}

// Where the parts come from: the model, and the optimizer (moments) or GradSync (gradients).
struct Sources {
  const PipelineModel& model;
  const OptimizerStep* opt = nullptr;
  GradSync* sync = nullptr;
};

// This rank's parameters or moments in host memory, one view per chunk: the buffers themselves
// when the model computes on the host (no copy), else mirrors filled from the device.
using HostView = Kokkos::View<float*>::HostMirror;
// Under ZeRO-1 a moment or the reduced gradients are a copy, gathered over dp for writing
// (collective over dp: every rank calls this for the same parts in the same order); a moment is
// left as it is for reading into.
enum class Use { write, read };
Kokkos::View<float*> buffer(const Sources& from, Part part, std::size_t c, Use use) {
  if (part == Part::params) return from.model.chunks()[c]->params();
  if (part != Part::grads) return from.opt->moment(c, part == Part::m ? 1 : 2, use == Use::write);
  const Kokkos::View<float*> grads = from.model.chunks()[c]->grads();
  if (!from.sync->zero()) return grads;
  Kokkos::View<float*> table("engine::checkpoint::gathered_grads", grads.size());
  from.sync->gather(c, from.sync->shard_grads(c).data(), table.data());
  return table;
}

// `staging` adds the bytes of the host views that are copies, not the buffers themselves.
std::vector<HostView> to_host(const Sources& from, Part part, Use use,
                              std::uint64_t* staging = nullptr) {
  std::vector<HostView> out;
  const bool sharded = part == Part::grads    ? from.sync->zero()
                       : part != Part::params ? from.opt->sharded()
                                              : false;
  for (std::size_t c = 0; c < from.model.chunks().size(); ++c) {
    const Kokkos::View<float*> v = buffer(from, part, c, use);
    out.push_back(Kokkos::create_mirror_view(v));
    Kokkos::deep_copy(out.back(), v); // reading: padding rows keep what the buffer holds
    const bool copy = out.back().data() != v.data() || sharded;
    if (staging != nullptr && copy) *staging += v.size() * sizeof(float);
  }
  return out;
}

void from_host(const std::vector<HostView>& host, PipelineModel& model, OptimizerStep* opt,
               Part part) {
  for (std::size_t c = 0; c < model.chunks().size(); ++c) {
    if (part == Part::params) {
      Kokkos::deep_copy(model.chunks()[c]->params(), host[c]);
    } else {
      opt->load_moment(c, part == Part::m ? 1 : 2, host[c]);
    }
  }
}

// Fault injection for tests: GRIDLM_FAULT_KILL_DURING_SAVE=STEP makes the last rank kill
// itself (SIGKILL) half way through writing the file of step STEP, as a node lost mid-save;
// GRIDLM_FAULT_SAVE_ATTRIBUTES=STEP makes its writing of that file's attributes fail.
class FaultSwitch {
public:
  FaultSwitch(int step, const parallel::Grid& grid) {
    const bool last = grid.rank() == grid.size() - 1;
    const char* kill = std::getenv("GRIDLM_FAULT_KILL_DURING_SAVE");
    kill_ = kill != nullptr && std::atoi(kill) == step && last;
    const char* attributes = std::getenv("GRIDLM_FAULT_SAVE_ATTRIBUTES");
    attributes_ = attributes != nullptr && std::atoi(attributes) == step && last;
  }
  void at(std::size_t written, std::size_t total) const {
    if (kill_ && written == total / 2) std::raise(SIGKILL);
  }
  void attributes() const {
    if (attributes_) throw Error("an error injected by GRIDLM_FAULT_SAVE_ATTRIBUTES");
  }

private:
  bool kill_ = false, attributes_ = false;
};

// Collective: whether a rank's write has failed so far. The steps after it that are collective
// are then skipped by every rank, not by the failed ones alone (which would leave the others
// waiting in them).
bool failed_anywhere(const std::string& failure, const parallel::Grid& grid);

// Rank 0, before anything is written: the file fits on its file system. A disk that fills during
// the write fails inside MPI-IO, where HDF5's collective flush cannot be trusted to return on
// every rank; found here, the save is refused cleanly and the previous checkpoint stays.
void check_space(const std::string& partial, const layers::ParamTable& whole, std::size_t parts,
                 std::size_t extra, const parallel::Grid& grid) {
  parallel::run_agreed(grid.comm(), [&] {
    if (grid.rank() != 0) return;
    std::uint64_t need = extra + (64u << 10); // and per dataset its metadata, under 2 KiB
    for (const layers::ParamInfo& p : whole.params) {
      std::uint64_t n = 1;
      for (auto d : p.shape)
        n *= std::uint64_t(d);
      need += parts * (n * sizeof(float) + 2048);
    }
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(partial).parent_path();
    const std::filesystem::space_info space = std::filesystem::space(dir, ec);
    if (!ec && space.available < need) {
      throw Error(fmt::format("cannot save '{}': it needs {:.1f} MiB and its file system has "
                              "{:.1f} MiB free; free space there, lower checkpoint.keep or move "
                              "checkpoint.dir (the previous checkpoint is kept)",
                              partial.substr(0, partial.size() - 8), double(need) / (1 << 20),
                              double(space.available) / (1 << 20)));
    }
  });
}

// A shard of nothing, for a rank that holds none of a tensor.
io::TensorShard nothing(const layers::ParamInfo& global) {
  io::TensorShard s;
  s.global_shape.assign(global.shape.begin(), global.shape.end());
  s.local_shape.assign(global.shape.size(), 0);
  return s;
}

void sum_over_grid(std::vector<std::uint64_t>& values, const parallel::Grid& grid) {
  parallel::MpiComm all(parallel::borrow_comm(grid.comm()));
  all.all_reduce(Span<std::uint64_t>(values));
}

bool failed_anywhere(const std::string& failure, const parallel::Grid& grid) {
  std::vector<std::uint64_t> failed{failure.empty() ? 0u : 1u};
  sum_over_grid(failed, grid);
  return failed[0] != 0;
}

// Rank 0's tokenizer bytes, as a uint8 dataset every rank takes part in writing.
void write_tokenizer(io::ParallelFile& f, const std::string& tokenizer,
                     const parallel::Grid& grid) {
  std::vector<std::uint64_t> size{grid.rank() == 0 ? std::uint64_t(tokenizer.size()) : 0};
  sum_over_grid(size, grid);
  if (size[0] == 0) return;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(tokenizer.data());
  f.write<std::uint8_t>("tokenizer/model", size[0], 0,
                        Span<const std::uint8_t>(bytes, grid.rank() == 0 ? tokenizer.size() : 0));
}

// The root attributes, checked against this run: this model shape, and moments when they are
// wanted. The file is the same for every rank: what one finds wrong, all find at the same point.
CheckpointMeta read_header(const io::ParallelFile& f, const std::string& path,
                           const layers::ModelConfig& config, bool want_optimizer) {
  layers::ModelConfig stored;
  const CheckpointMeta meta = read_root_attributes(f, path, stored);
  const std::pair<const char*, std::pair<int, int>> keys[] = {
      {"vocab_size", {stored.vocab_size, config.vocab_size}},
      {"seq_len", {stored.seq_len, config.seq_len}},
      {"n_layer", {stored.n_layer, config.n_layer}},
      {"n_head", {stored.n_head, config.n_head}},
      {"d_model", {stored.d_model, config.d_model}},
      {"tied_embeddings", {stored.tied_embeddings, config.tied_embeddings}}};
  for (const auto& [key, values] : keys) {
    if (values.first != values.second) {
      throw Error(fmt::format("'{}' holds a model with {} = {}, but this run has model.{} = {}: "
                              "a checkpoint loads only into the model shape that wrote it",
                              path, key, values.first, key, values.second));
    }
  }
  if (want_optimizer && !meta.optimizer) {
    throw Error(fmt::format("'{}' holds weights without optimizer state, so a run cannot "
                            "resume from it; start from its weights with --init-from {}",
                            path, path));
  }
  return meta;
}

// Every tensor dataset, in the order of the model's table: each rank its boxes, or nothing.
// Gives each dataset's name and this rank's part of its checksum; `attempt` notes failures.
using Attempt = std::function<void(const std::function<void()>&)>;
void write_tensors(io::ParallelFile& f, const PipelineModel& model, const layers::ParamTable& whole,
                   const std::vector<Part>& parts, const std::vector<std::vector<HostView>>& host,
                   const parallel::Grid& grid, const Attempt& attempt, const FaultSwitch& kill,
                   std::vector<std::string>& names, std::vector<std::uint64_t>& sums) {
  for (const layers::ParamInfo& global : whole.params) {
    const std::vector<Holding> held = holdings(model, global.name, grid);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      io::TensorShard shard = nothing(global);
      Span<const float> data;
      for (const Holding& h : held) {
        if (!h.writes) continue;
        const layers::ParamInfo& p = model.chunks()[h.chunk]->table().params[std::size_t(h.index)];
        shard = param_shard(p, grid.coords().tp);
        data = Span<const float>(host[k][h.chunk].data() + p.offset, p.size);
      }
      names.push_back(prefix(parts[k]) + global.name);
      attempt([&] { f.write_shard(names.back(), shard, data); });
      sums.push_back(io::shard_checksum(shard, data));
      kill.at(names.size(), whole.params.size() * parts.size());
    }
  }
}

} // namespace

namespace {

// The root attributes of the file at `path` (its .partial): the checksums (one attribute for
// all, one collective operation rather than one per dataset) and `meta`. Attributes are HDF5
// metadata, which every rank must write alike: a rank that failed to leaves the file's metadata
// differing between the ranks, and closing it would hang in HDF5's collective flush. That rank
// ends the job (the other ranks cannot know).
void write_attributes(io::ParallelFile& f, const ChecksumTable& table, const CheckpointMeta& meta,
                      const layers::ModelConfig& config, const char* format,
                      const FaultSwitch& kill, const std::string& path) {
  try {
    kill.attributes();
    f.write_attribute("/", "checksums", checksum_text(table));
    write_root_attributes(f, meta, config, format);
  } catch (const Error& e) {
    abort_job(fmt::format("cannot save '{}': {}; the ranks' metadata of the file now differ, so "
                          "it cannot be closed, and the job ends. The previous checkpoint is "
                          "kept ('{}.partial' is left half-written)",
                          path, e.what(), path));
  }
}

// The file of write_model_file and write_gradient_file: `parts` from `from`, in `format`.
WriteStats write_file(const std::string& path, const Sources& from, const std::vector<Part>& parts,
                      const CheckpointMeta& meta, const layers::ModelConfig& config,
                      const parallel::Grid& grid, const std::string& tokenizer, const char* format,
                      bool direct_io) {
  const PipelineModel& model = from.model;
  const std::string partial = path + ".partial";
  const layers::ParamTable whole = layers::make_param_table(config);
  // Host staging: the mirrors that are copies, not the model's own buffers.
  std::uint64_t staging = 0;
  std::vector<std::vector<HostView>> host;
  for (Part part : parts)
    host.push_back(to_host(from, part, Use::write, &staging));
  // A write that fails (a full disk) fails on the ranks whose data it carries: they note it and
  // go on taking part in the collective steps with the others, and all agree at the end, so no
  // rank is left waiting and the previous checkpoint stays what `latest` names.
  std::string failure;
  auto attempt = [&](const std::function<void()>& body) {
    try {
      body();
    } catch (const Error& e) {
      if (failure.empty()) failure = e.what();
    }
  };
  const FaultSwitch kill(meta.step, grid);
  check_space(partial, whole, parts.size(), tokenizer.size(), grid);
  std::uint64_t direct = 0;
  {
    parallel::fault::hang_in_save_if_asked(meta.step);
    io::ParallelFile f = io::ParallelFile::create(grid.comm(), partial);
    f.set_direct_io(direct_io);
    std::vector<std::string> names;
    std::vector<std::uint64_t> sums;
    write_tensors(f, model, whole, parts, host, grid, attempt, kill, names, sums);
    sum_over_grid(sums, grid);
    ChecksumTable table;
    for (std::size_t i = 0; i < names.size(); ++i)
      table.emplace_back(names[i], sums[i]);
    CheckpointMeta m = meta;
    m.optimizer = from.opt != nullptr;
    m.optimizer_updates = from.opt != nullptr ? from.opt->updates() : -1;
    write_attributes(f, table, m, config, format, kill, path);
    // The tokenizer's size is summed over the grid first: by every rank, or by none.
    if (!failed_anywhere(failure, grid)) {
      attempt([&] { write_tokenizer(f, tokenizer, grid); });
      attempt([&] { f.flush(); });
    }
    direct = f.direct_bytes();
  }
  try {
    parallel::agree_on_errors(grid.comm(), failure.empty()
                                               ? std::string()
                                               : fmt::format("cannot save '{}': {}; the previous "
                                                             "checkpoint is kept",
                                                             path, failure));
  } catch (const CollectiveError&) {
    std::error_code ec;
    if (grid.rank() == 0) std::filesystem::remove(partial, ec);
    throw;
  }
  std::uint64_t bytes = 0;
  parallel::run_agreed(grid.comm(), [&] {
    if (grid.rank() != 0) return;
    std::error_code ec;
    bytes = std::filesystem::file_size(partial, ec);
    std::filesystem::rename(partial, path, ec);
    if (ec) {
      throw Error(fmt::format("cannot rename '{}' to '{}': {}", partial, path, ec.message()));
    }
  });
  // The size is rank 0's alone (the others report 0): one maximum gives both on every rank.
  std::vector<std::uint64_t> stats{bytes, staging};
  parallel::MpiComm all(parallel::borrow_comm(grid.comm()));
  all.all_reduce(Span<std::uint64_t>(stats), parallel::ReduceOp::max);
  std::vector<std::uint64_t> total{direct};
  all.all_reduce(Span<std::uint64_t>(total));
  return WriteStats{stats[0], stats[1], total[0]};
}

} // namespace

WriteStats write_model_file(const std::string& path, const PipelineModel& model,
                            const OptimizerStep* optimizer, const CheckpointMeta& meta,
                            const layers::ModelConfig& config, const parallel::Grid& grid,
                            const std::string& tokenizer, bool direct_io) {
  std::vector<Part> parts{Part::params};
  if (optimizer != nullptr) parts.insert(parts.end(), {Part::m, Part::v});
  return write_file(path, Sources{model, optimizer, nullptr}, parts, meta, config, grid, tokenizer,
                    format_name, direct_io);
}

WriteStats write_gradient_file(const std::string& path, const PipelineModel& model, GradSync& sync,
                               const CheckpointMeta& meta, const layers::ModelConfig& config,
                               const parallel::Grid& grid, bool direct_io) {
  return write_file(path, Sources{model, nullptr, &sync}, {Part::grads}, meta, config, grid, "",
                    gradients_format_name, direct_io);
}

CheckpointMeta read_model_header(const std::string& path, const layers::ModelConfig& config,
                                 const parallel::Grid& grid, bool want_optimizer) {
  io::ParallelFile f = io::ParallelFile::open_read(grid.comm(), path);
  CheckpointMeta meta;
  parallel::run_agreed(grid.comm(), [&] { meta = read_header(f, path, config, want_optimizer); });
  return meta;
}

CheckpointMeta read_model_file(const std::string& path, PipelineModel& model,
                               OptimizerStep* optimizer, const layers::ModelConfig& config,
                               const parallel::Grid& grid, bool direct_io) {
  io::ParallelFile f = io::ParallelFile::open_read(grid.comm(), path);
  f.set_direct_io(direct_io);
  std::vector<Part> parts{Part::params};
  if (optimizer != nullptr) parts.insert(parts.end(), {Part::m, Part::v});
  std::vector<std::vector<HostView>> host;
  for (Part part : parts)
    host.push_back(to_host(Sources{model, optimizer, nullptr}, part, Use::read));
  CheckpointMeta meta;
  parallel::run_agreed(grid.comm(),
                       [&] { meta = read_header(f, path, config, optimizer != nullptr); });
  const layers::ParamTable whole = layers::make_param_table(config);
  std::vector<std::string> names;
  std::vector<std::uint64_t> sums, stored;
  parallel::run_agreed(grid.comm(), [&] {
    // Every read this rank makes, in the order of the file's table: (dataset, shard) for the
    // read-ahead hint; the part, holding and parameter for the read itself.
    std::vector<std::pair<std::string, io::TensorShard>> reads;
    struct Target {
      std::size_t part;
      Holding holding;
      const layers::ParamInfo* param;
    };
    std::vector<Target> targets;
    for (const layers::ParamInfo& global : whole.params) {
      const std::vector<Holding> held = holdings(model, global.name, grid);
      for (std::size_t k = 0; k < parts.size(); ++k) {
        names.push_back(prefix(parts[k]) + global.name);
        for (const Holding& h : held) {
          const layers::ParamInfo& p =
              model.chunks()[h.chunk]->table().params[std::size_t(h.index)];
          reads.emplace_back(names.back(), param_shard(p, grid.coords().tp));
          targets.push_back({k, h, &p});
        }
      }
    }
    f.prefetch(reads);
    // Each dataset's checksum part comes from the holding that writes it (0 when none does).
    std::map<std::string, std::uint64_t> mine;
    for (std::size_t i = 0; i < reads.size(); ++i) {
      const auto& [name, shard] = reads[i];
      const Target& t = targets[i];
      Span<float> out(host[t.part][t.holding.chunk].data() + t.param->offset, t.param->size);
      f.read_shard(name, shard, out, io::Transfer::independent);
      if (t.holding.writes) mine[name] = io::shard_checksum(shard, out);
    }
    for (const std::string& name : names) {
      const auto it = mine.find(name);
      sums.push_back(it != mine.end() ? it->second : 0);
    }
  });
  sum_over_grid(sums, grid);
  parallel::run_agreed(grid.comm(), [&] {
    std::map<std::string, std::uint64_t> table;
    for (const auto& [name, sum] : read_checksums(f))
      table[name] = sum;
    for (const std::string& n : names) {
      if (table.count(n) == 0) {
        throw Error(fmt::format("'{}' has no checksum for dataset '{}': the file is damaged or "
                                "was not written by gridlm",
                                path, n));
      }
      stored.push_back(table[n]);
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (sums[i] != stored[i]) {
        throw Error(fmt::format("'{}': dataset '{}' does not match its checksum ({} stored, {} "
                                "read): the file is damaged; use an earlier checkpoint",
                                path, names[i], checksum_hex(stored[i]), checksum_hex(sums[i])));
      }
    }
  });
  for (std::size_t k = 0; k < parts.size(); ++k)
    from_host(host[k], model, optimizer, parts[k]);
  if (optimizer != nullptr) optimizer->set_updates(int(meta.optimizer_updates));
  return meta;
}

} // namespace gridlm::engine
