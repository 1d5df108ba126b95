// TOML configuration: the field table, parsing with toml++, overrides and validation.
#include "app/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/step_guard.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/schedule.hpp"

namespace gridlm::app {

std::vector<ConfigField> config_fields(RunConfig& c) {
  auto& m = c.model;
  auto& t = c.train;
  auto& o = t.optim;
  return {
      {"model", "vocab_size", "tokens in the vocabulary", &m.vocab_size},
      {"model", "seq_len", "context length in tokens (also the training sequence length)",
       &m.seq_len},
      {"model", "n_layer", "transformer blocks", &m.n_layer},
      {"model", "n_head", "attention heads per block", &m.n_head},
      {"model", "d_model", "width of the residual stream; a multiple of n_head", &m.d_model},
      {"model", "tied_embeddings", "the LM head shares the token embedding matrix",
       &m.tied_embeddings},
      {"model", "init_std",
       "std of the normal initialisation (residual projections: / sqrt(2 n_layer))", &m.init_std},
      {"train", "micro_batch", "sequences per micro-batch on each data-parallel replica",
       &t.micro_batch},
      {"train", "grad_accum", "micro-batches accumulated per optimizer step", &t.grad_accum},
      {"train", "steps", "optimizer steps", &t.steps},
      {"train", "seed", "seed of the parameter initialisation", &t.seed},
      {"train", "log_every",
       "print a readable line at steps 1, log_every, 2 log_every, ... and the last", &t.log_every},
      {"train", "eval_every",
       "validation loss every this many steps and after the last (0: never); the same held-out "
       "samples each time",
       &c.train.eval_every},
      {"train", "eval_batches",
       "global batches in one validation, run forward only (the same samples in any layout of the "
       "same global batch)",
       &c.train.eval_batches},
      {"train", "precision",
       "of the matrix products: fp32, or bf16 (operands rounded to bfloat16, fp32 accumulation; "
       "master weights, moments, norms, softmax and loss in fp32)",
       &t.precision},
      {"train", "peak_gflops", "per-rank peak GFLOP/s that MFU is reported against",
       &t.peak_gflops},
      {"train", "exit_margin_minutes",
       "inside a Slurm job with a time limit: save a checkpoint and stop when less than this is "
       "left (-1: twice the slowest step and save, the slowest validation, plus 10 s)",
       &t.exit_margin_minutes},
      {"train", "on_nonfinite",
       "what a bad step (a non-finite loss or gradient norm on any rank, or a loss spike) does: "
       "stop (the run ends with the message), skip (its update is dropped) or rollback (the "
       "newest checkpoint is loaded and the data cursor moves past the step's samples)",
       &t.on_nonfinite},
      {"train", "spike_threshold",
       "a loss this many robust standard deviations (1.4826 MAD) above the median of the last "
       "spike_window losses is a spike, a bad step (0: no spike detection)",
       &t.spike_threshold},
      {"train", "spike_window", "updated steps whose losses the spike median and MAD are over",
       &t.spike_window},
      {"train", "max_bad_steps",
       "bad steps that skip or rollback answer in one run; the next one stops it",
       &t.max_bad_steps},
      {"train", "skip_steps",
       "steps (counted from 1) whose batches are read and dropped without an update, such as "
       "\"40001,40100-40120\" (known bad data; empty: none). A step's samples are those the log "
       "names for it in this run: a rollback or a new global batch moves them",
       &t.skip_steps},
      {"train", "lr", "peak learning rate", &o.lr},
      {"train", "min_lr", "learning rate at the end of the cosine decay", &o.min_lr},
      {"train", "warmup_steps", "steps of linear warmup", &o.warmup_steps},
      {"train", "decay_steps",
       "step, counted from 0, at which the cosine decay reaches min_lr (0: train.steps, so the "
       "run's last step is just above min_lr)",
       &o.decay_steps},
      {"train", "beta1", "AdamW first-moment decay", &o.beta1},
      {"train", "beta2", "AdamW second-moment decay", &o.beta2},
      {"train", "eps", "AdamW denominator epsilon", &o.eps},
      {"train", "weight_decay", "decoupled weight decay of weight matrices", &o.weight_decay},
      {"train", "decay_embeddings", "also apply weight decay to the embeddings",
       &o.decay_embeddings},
      {"train", "decay_norms_and_biases", "also apply weight decay to LayerNorms and biases",
       &o.decay_norms_and_biases},
      {"train", "grad_clip", "clip the global gradient norm to this (0 disables)", &o.grad_clip},
      {"data", "source",
       "where tokens come from: synthetic (a learnable Markov language), or the path of a "
       "dataset file made by gridlm prepare-data (model.vocab_size must cover its vocabulary)",
       &c.data.source},
      {"data", "seed", "seed of the synthetic language, or of the order of a dataset's samples",
       &c.data.seed},
      {"data", "on_change",
       "a resumed run whose dataset now holds another number of tokens or documents than when "
       "its checkpoint was saved (remade at the same path): stop, or continue (from the same "
       "sample count, through the new data's order)",
       &c.data.on_change},
      {"parallel", "dp", "data-parallel replicas: a number or auto", &c.parallel.dp},
      {"parallel", "pp", "pipeline stages: a number or auto", &c.parallel.pp},
      {"parallel", "tp",
       "tensor-parallel ranks per stage: a number or auto (the largest that divides the heads and "
       "keeps each group inside a node)",
       &c.parallel.tp},
      {"parallel", "profile",
       "how auto layout axes are chosen: \"\" (tp the largest that divides a node and the heads, "
       "dp takes the rest), a profile "
       "or machine file (the layout planner picks the auto axes and the micro-batch split of "
       "the global batch), or measure (a profile measured at start-up on these ranks)",
       &c.parallel.profile},
      {"parallel", "force_tp_across_nodes", "allow a tensor-parallel group to span nodes",
       &c.parallel.force_tp_across_nodes},
      {"parallel", "backend",
       "collectives over auto (NCCL on GPU builds; else MPI, staged through host copies when "
       "the model is in GPU memory that this MPI cannot read), mpi, mpi-staged or nccl",
       &c.parallel.backend},
      {"parallel", "schedule",
       "pipeline schedule: gpipe, 1f1b, interleaved-1f1b or zb-h1 (train.grad_accum "
       "micro-batches per step)",
       &c.parallel.schedule},
      {"parallel", "chunks", "model chunks per pipeline stage (interleaved-1f1b)",
       &c.parallel.chunks},
      {"parallel", "stage_layout",
       "blocks per virtual stage: uniform, balanced (by a FLOP estimate counting embedding and "
       "head) or counts such as \"3,4,4,3\"",
       &c.parallel.stage_layout},
      {"parallel", "grad_bucket_mb",
       "data-parallel gradient reduction in buckets of this many MiB, each started as soon as "
       "the backward has produced it (0: one blocking all-reduce after the backward)",
       &c.parallel.grad_bucket_mb},
      {"parallel", "zero",
       "ZeRO stage: 0 (every data-parallel replica holds all optimizer state) or 1 (gradients "
       "reduce-scattered, each replica updates and holds 1/dp of the state, parameters "
       "all-gathered)",
       &c.parallel.zero},
      {"parallel", "timeout_seconds",
       "a rank waiting this long in one communication or parallel-file (HDF5) operation is hung: "
       "every rank reports its recent operations to output.dir/hang/, the likely culprit is "
       "named, the job ends with status 76 (0: no watchdog)",
       &c.parallel.timeout_seconds},
      {"parallel", "wait",
       "how a rank waits for communication: spin (MPI's busy polling, fastest with a core per "
       "rank), yield (poll, then give the core up between polls; a pipeline stage waiting over "
       "1 ms for its neighbour sleeps 500 us between polls) or auto (yield when any node of the "
       "job runs more ranks than it has cores; every rank waits the same way)",
       &c.parallel.wait},
      {"output", "dir",
       "directory for metrics and weights (created if missing); {job_id} is the Slurm job's id",
       &c.output.dir},
      {"output", "metrics", "JSON-lines metrics file inside dir (empty: none)", &c.output.metrics},
      {"output", "weights", "final weights, HDF5 with PyTorch names, inside dir (empty: none)",
       &c.output.weights},
      {"output", "gradients",
       "HDF5 file inside dir of the first step's gradients, averaged over the data-parallel "
       "replicas and before clipping, by PyTorch name (empty: none)",
       &c.output.gradients},
      {"output", "reference_dump",
       "testing: HDF5 file of initial weights, batches and step-0 gradients",
       &c.output.reference_dump},
      {"output", "trace",
       "Chrome-trace JSON (Perfetto) of the first trace_steps steps, inside dir (empty: none)",
       &c.output.trace},
      {"output", "trace_steps", "training steps the trace records", &c.output.trace_steps},
      {"checkpoint", "dir",
       "directory of checkpoints (step-NNNNNN.h5 and latest), inside output.dir (empty: none); "
       "{job_id} is the Slurm job's id (the same when requeued)",
       &c.checkpoint.dir},
      {"checkpoint", "every", "save every this many steps (0: by time and at the end only)",
       &c.checkpoint.every},
      {"checkpoint", "every_minutes", "save when this many minutes passed since the last (0: off)",
       &c.checkpoint.every_minutes},
      {"checkpoint", "keep", "newest checkpoints kept; older ones go once a new one is complete",
       &c.checkpoint.keep},
      {"checkpoint", "resume",
       "checkpoint to resume from (the same run goes on), or auto: the newest in checkpoint.dir, "
       "or a fresh start when there is none",
       &c.checkpoint.resume},
      {"checkpoint", "init_from",
       "weights to start a new run from (a checkpoint or weights file; no optimizer state, step "
       "0)",
       &c.checkpoint.init_from},
      {"checkpoint", "on_save_error",
       "a save refused before it writes (no room by the free-space check, directory gone): stop, "
       "or continue (warn, keep the previous checkpoint and go on; the save at the end or before "
       "the time limit must succeed); a write failing inside MPI-IO always ends the job",
       &c.checkpoint.on_save_error},
      {"checkpoint", "direct_io",
       "large contiguous shards written and read with O_DIRECT, past the page cache (where the "
       "file system allows it; false: all through the page cache)",
       &c.checkpoint.direct_io},
  };
}

namespace {

const char* toml_type_name(const toml::node& node) {
  if (node.is_string()) return "string";
  if (node.is_integer()) return "integer";
  if (node.is_floating_point()) return "number";
  if (node.is_boolean()) return "boolean";
  if (node.is_array()) return "array";
  if (node.is_table()) return "table";
  return "date or time";
}

const char* type_name(const ConfigField& f) {
  switch (f.target.index()) {
  case 0:
  case 1: return "integer";
  case 2: return "number";
  case 3: return "boolean";
  default: return "string";
  }
}

std::string value_text(const ConfigField& f) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          // A TOML basic string: quotes, backslashes and control characters escaped, so that
          // the text a checkpoint stores parses back.
          std::string text = "\"";
          for (const char ch : *p) {
            if (ch == '"' || ch == '\\') {
              text += {'\\', ch};
            } else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
              text += fmt::format("\\u{:04x}", static_cast<unsigned char>(ch));
            } else {
              text += ch;
            }
          }
          return text + "\"";
        } else {
          return fmt::format("{}", *p);
        }
      },
      f.target);
}

std::string known_keys(std::vector<ConfigField>& fields, const std::string& section) {
  std::string out;
  for (const ConfigField& f : fields) {
    if (f.section == section) out += (out.empty() ? "" : ", ") + f.key;
  }
  return out;
}

ConfigField* find_field(std::vector<ConfigField>& fields, const std::string& section,
                        const std::string& key) {
  for (ConfigField& f : fields) {
    if (f.section == section && f.key == key) return &f;
  }
  return nullptr;
}

void set_from_toml(ConfigField& f, const toml::node& node, const std::string& where) {
  auto wrong = [&] {
    auto article = [](const char* noun) { return std::strchr("aeiou", noun[0]) ? "an" : "a"; };
    return Error(fmt::format("{}: {} must be {} {}, not {} {}", where, f.dotted(),
                             article(type_name(f)), type_name(f), article(toml_type_name(node)),
                             toml_type_name(node)));
  };
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) throw wrong();
          *p = node.as_boolean()->get();
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!node.is_string()) throw wrong();
          *p = node.as_string()->get();
        } else if constexpr (std::is_same_v<T, double>) {
          if (node.is_integer()) {
            *p = double(node.as_integer()->get());
          } else if (node.is_floating_point()) {
            *p = node.as_floating_point()->get();
          } else {
            throw wrong();
          }
        } else {
          if (!node.is_integer()) throw wrong();
          const auto v = node.as_integer()->get();
          if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
            throw Error(fmt::format("{}: {} = {} is out of range", where, f.dotted(), v));
          }
          *p = T(v);
        }
      },
      f.target);
}

void set_from_text(ConfigField& f, const std::string& text) {
  auto bad = [&] {
    const char* noun = type_name(f);
    const char* range =
        std::holds_alternative<int*>(f.target) ? " from -2147483648 to 2147483647" : "";
    return Error(fmt::format("--set {}={}: expected {} {}{}", f.dotted(), text,
                             noun[0] == 'i' ? "an" : "a", noun, range));
  };
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (text == "true") {
            *p = true;
          } else if (text == "false") {
            *p = false;
          } else {
            throw bad();
          }
        } else if constexpr (std::is_same_v<T, std::string>) {
          // A value quoted as in the TOML file (--set 'output.dir="run 1"') means the same
          // string as the bare one: a quote is never meant to be part of a path or name.
          const bool quoted = text.size() >= 2 && text.front() == '"' && text.back() == '"';
          *p = quoted ? text.substr(1, text.size() - 2) : text;
        } else if constexpr (std::is_same_v<T, double>) {
          char* end = nullptr;
          errno = 0;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || *end != '\0') throw bad();
          // Too small for a normal double (1e-320) is still that number; too large is not.
          if (errno == ERANGE && std::fabs(v) >= 1.0) {
            throw Error(fmt::format("--set {}={}: out of the range of a number (about 1.8e308)",
                                    f.dotted(), text));
          }
          *p = v;
        } else {
          char* end = nullptr;
          errno = 0;
          const long long v = std::strtoll(text.c_str(), &end, 10);
          if (text.empty() || *end != '\0' || errno != 0 || v < std::numeric_limits<T>::min() ||
              v > std::numeric_limits<T>::max()) {
            throw bad();
          }
          *p = T(v);
        }
      },
      f.target);
}

} // namespace

void load_config_file(RunConfig& config, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    if (src.begin.line == 0) {
      throw Error(fmt::format("cannot read config '{}': {}", path, e.description()));
    }
    throw Error(
        fmt::format("{}:{}:{}: {}", path, src.begin.line, src.begin.column, e.description()));
  }
  std::vector<ConfigField> fields = config_fields(config);
  for (const auto& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    const toml::table* table = section_node.as_table();
    if (section_node.is_array_of_tables()) {
      throw Error(fmt::format("{}: [[{}]] is an array of tables; write [{}], once", path, section,
                              section));
    }
    if (table == nullptr) {
      std::string homes; // every section with a key of that name (seed: [train] and [data])
      for (const ConfigField& f : fields) {
        if (f.key == section) homes += (homes.empty() ? " [" : " or [") + f.section + "]";
      }
      throw Error(fmt::format("{}: key '{}' is outside any section; put it under its section{}",
                              path, section,
                              homes.empty() ? " ([model], [train], [data], [parallel], [output] "
                                              "or [checkpoint])"
                                            : homes));
    }
    if (known_keys(fields, section).empty()) {
      throw Error(fmt::format("{}: unknown section [{}]; sections are [model], [train], [data], "
                              "[parallel], [output], [checkpoint]",
                              path, section));
    }
    for (const auto& [key, node] : *table) {
      ConfigField* f = find_field(fields, section, std::string(key.str()));
      if (f == nullptr) {
        throw Error(fmt::format("{}: unknown key '{}.{}'; keys of [{}]: {}", path, section,
                                key.str(), section, known_keys(fields, section)));
      }
      set_from_toml(*f, node, path);
    }
  }
}

void apply_override(RunConfig& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    throw Error(
        fmt::format("--set {}: expected section.key=value, e.g. train.lr=3e-4", assignment));
  }
  const std::string section = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  std::vector<ConfigField> fields = config_fields(config);
  ConfigField* f = find_field(fields, section, key);
  if (f == nullptr) {
    const std::string keys = known_keys(fields, section);
    throw Error(fmt::format("--set {}: unknown key '{}.{}'{}", assignment, section, key,
                            keys.empty()
                                ? "; sections are model, train, data, parallel, output, checkpoint"
                                : "; keys of " + section + ": " + keys));
  }
  set_from_text(*f, assignment.substr(eq + 1));
}

void validate(const RunConfig& c) {
  std::vector<std::string> problems;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) problems.push_back(what);
  };
  // Every number must be a number: inf and nan pass the range checks below unnoticed.
  RunConfig copy = c;
  for (const ConfigField& f : config_fields(copy)) {
    if (const auto* d = std::get_if<double*>(&f.target); d != nullptr && !std::isfinite(**d))
      problems.push_back(fmt::format("{} = {}: give a finite number", f.dotted(), **d));
  }
  const auto& m = c.model;
  need(m.vocab_size >= 2, "model.vocab_size must be at least 2");
  need(m.seq_len >= 1, "model.seq_len must be positive");
  need(m.n_layer >= 1, "model.n_layer must be positive");
  need(m.n_head >= 1, "model.n_head must be positive");
  need(m.d_model >= 1 && m.n_head >= 1 && m.d_model % m.n_head == 0,
       fmt::format("model.d_model = {} must be a positive multiple of model.n_head = {}", m.d_model,
                   m.n_head));
  need(m.init_std > 0, "model.init_std must be positive");
  const auto& t = c.train;
  need(t.micro_batch >= 1, "train.micro_batch must be positive");
  need(t.grad_accum >= 1, "train.grad_accum must be positive");
  need(t.grad_accum <= parallel::max_micro_batches,
       fmt::format("train.grad_accum must be at most {} (the pipeline numbers a step's "
                   "micro-batches in its messages): raise train.micro_batch or parallel.dp for "
                   "the same batch",
                   parallel::max_micro_batches));
  need(t.steps >= 1, fmt::format("train.steps = {}: give at least 1 (the steps the run ends at; a "
                                 "resumed run counts the steps already done)",
                                 t.steps));
  need(t.seed >= 0 && t.seed <= 0xFFFFFFFFL,
       fmt::format("train.seed = {}: give a whole number from 0 to 4294967295", t.seed));
  need(c.data.seed >= 0 && c.data.seed <= 0xFFFFFFFFL,
       fmt::format("data.seed = {}: give a whole number from 0 to 4294967295", c.data.seed));
  need(t.log_every >= 1, "train.log_every must be positive");
  need(t.peak_gflops > 0, "train.peak_gflops must be positive");
  need(t.precision == "fp32" || t.precision == "bf16",
       fmt::format("train.precision = \"{}\": the choices are fp32 and bf16", t.precision));
  need(t.exit_margin_minutes >= 0 || t.exit_margin_minutes == -1,
       "train.exit_margin_minutes must be -1 (measured) or not negative");
  need(t.optim.lr > 0 && t.optim.min_lr >= 0 && t.optim.min_lr <= t.optim.lr,
       "train.lr must be positive and train.min_lr between 0 and train.lr");
  need(t.optim.warmup_steps >= 0, "train.warmup_steps must not be negative");
  need(t.optim.decay_steps >= 0, "train.decay_steps must not be negative (0: train.steps)");
  need(t.optim.beta1 >= 0 && t.optim.beta1 < 1 && t.optim.beta2 >= 0 && t.optim.beta2 < 1,
       "train.beta1 and train.beta2 must be in [0, 1)");
  need(t.optim.eps > 0, "train.eps must be positive");
  need(t.optim.weight_decay >= 0, "train.weight_decay must not be negative");
  need(t.optim.grad_clip >= 0, "train.grad_clip must not be negative (0 disables clipping)");
  need(c.parallel.backend == "auto" || c.parallel.backend == "mpi" ||
           c.parallel.backend == "mpi-staged" || c.parallel.backend == "nccl",
       fmt::format("parallel.backend = \"{}\": the backends are auto, mpi, mpi-staged and nccl",
                   c.parallel.backend));
  need(c.parallel.wait == "auto" || c.parallel.wait == "spin" || c.parallel.wait == "yield",
       fmt::format("parallel.wait = \"{}\": the choices are auto (yield when a node runs more "
                   "ranks than it has cores), spin and yield",
                   c.parallel.wait));
  need(c.parallel.chunks >= 1, "parallel.chunks must be positive");
  need(c.parallel.zero == 0 || c.parallel.zero == 1,
       fmt::format("parallel.zero = {}: the ZeRO stages are 0 (off) and 1 (sharded optimizer "
                   "state)",
                   c.parallel.zero));
  need(!(c.parallel.timeout_seconds < 0),
       "parallel.timeout_seconds must not be negative (0: no watchdog)");
  need(c.parallel.grad_bucket_mb >= 0,
       "parallel.grad_bucket_mb must not be negative (0: one all-reduce after the backward)");
  need(c.output.trace_steps >= 1, "output.trace_steps must be positive");
  const auto& k = c.checkpoint;
  need(k.every >= 0, "checkpoint.every must not be negative (0: by time and at the end only)");
  need(k.every_minutes >= 0, "checkpoint.every_minutes must not be negative (0: off)");
  need(k.keep >= 1, "checkpoint.keep must be at least 1");
  need(k.resume.empty() || k.init_from.empty(),
       "checkpoint.resume and checkpoint.init_from exclude each other: resume goes on with a "
       "run, init_from starts a new one from its weights");
  need(k.resume != "auto" || !k.dir.empty(),
       "checkpoint.resume = \"auto\" looks in checkpoint.dir: set checkpoint.dir too");
  need(k.on_save_error == "stop" || k.on_save_error == "continue",
       fmt::format("checkpoint.on_save_error = \"{}\": the choices are stop and continue",
                   k.on_save_error));
  need(c.data.on_change == "stop" || c.data.on_change == "continue",
       fmt::format("data.on_change = \"{}\": the choices are stop and continue", c.data.on_change));
  need(t.on_nonfinite == "stop" || t.on_nonfinite == "skip" || t.on_nonfinite == "rollback",
       fmt::format("train.on_nonfinite = \"{}\": the choices are stop, skip and rollback",
                   t.on_nonfinite));
  need(t.on_nonfinite != "rollback" || !k.dir.empty(),
       "train.on_nonfinite = \"rollback\" loads the newest checkpoint: set checkpoint.dir too");
  need(!(t.spike_threshold < 0),
       "train.spike_threshold must not be negative (0: no spike detection)");
  need(t.spike_window >= int(engine::spike_min_losses),
       fmt::format("train.spike_window must be at least {} steps", engine::spike_min_losses));
  need(t.max_bad_steps >= 0, "train.max_bad_steps must not be negative");
  try {
    engine::parse_step_list(t.skip_steps, "train.skip_steps");
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  need(c.train.eval_every >= 0, "train.eval_every must not be negative (0: no validation)");
  need(c.train.eval_batches >= 1 && c.train.eval_batches <= 4096,
       "train.eval_batches must be from 1 to 4096 (a validation's samples are read into memory "
       "at start-up)");
  if (const std::string v = engine::validation_memory_problem(c.train, c.model.seq_len); !v.empty())
    problems.push_back(v);
  need(!c.output.dir.empty(),
       "output.dir is empty: give a directory for the run's files (\".\" for the current one)");
  need(!c.data.source.empty(),
       "data.source must be synthetic or the path of a dataset file (gridlm prepare-data)");
  if (!problems.empty()) {
    std::string text = "invalid configuration:";
    for (const auto& p : problems)
      text += "\n  " + p;
    throw Error(text);
  }
}

namespace {

std::string as_toml(RunConfig c, const std::string& title) {
  std::vector<ConfigField> fields = config_fields(c);
  std::string out = title;
  std::string section;
  for (const ConfigField& f : fields) {
    if (f.section != section) {
      section = f.section;
      out += fmt::format("\n[{}]\n", section);
    }
    out += fmt::format("{} = {}  # {}\n", f.key, value_text(f), f.doc);
  }
  return out;
}

} // namespace

std::string defaults_as_toml() {
  return as_toml(RunConfig{}, "# gridlm run configuration: every key with its default.\n");
}

std::string config_as_toml(const RunConfig& config) {
  return as_toml(config, "# gridlm run configuration, as this run resolved it.\n");
}

std::string defaults_as_markdown() {
  RunConfig c;
  std::vector<ConfigField> fields = config_fields(c);
  std::string out = "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const ConfigField& f : fields) {
    out +=
        fmt::format("| `{}` | {} | `{}` | {} |\n", f.dotted(), type_name(f), value_text(f), f.doc);
  }
  return out;
}

RunConfig read_run_config(const std::string& path, const std::vector<std::string>& sets) {
  RunConfig config;
  if (!path.empty()) load_config_file(config, path);
  for (const std::string& s : sets)
    apply_override(config, s);
  validate(config);
  return config;
}

} // namespace gridlm::app
