// The step loop, and the wiring of the run's parts around it: a Run holds every room of the
// engine for one training run, built in the order their collectives need; train() drives it.
#include "engine/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <unistd.h>

#include "engine/checkpoint.hpp"
#include "engine/checkpoint_tools.hpp"
#include "engine/checkpointer.hpp"
#include "engine/comm_backend.hpp"
#include "engine/data.hpp"
#include "engine/grad_sync.hpp"
#include "engine/job_control.hpp"
#include "engine/optimizer_step.hpp"
#include "engine/pipeline_model.hpp"
#include "engine/reference_dump.hpp"
#include "engine/reporter.hpp"
#include "engine/run_plan.hpp"
#include "engine/statistics.hpp"
#include "engine/step_guard.hpp"
#include "engine/validation.hpp"
#include "layers/optimizer_config.hpp"
#include "layers/parameters.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/stage_layout.hpp"
#include "parallel/trace.hpp"
#include "parallel/watchdog.hpp"

namespace gridlm::engine {
namespace {

std::unique_ptr<parallel::Comm> transfer_comm(const RunPlan& plan, const parallel::Grid& grid) {
  if (plan.transfer_backend == "mpi") return nullptr; // the executor's own MPI pp communicator
  return make_axis_comm(grid, parallel::Axis::pp, plan.transfer_backend);
}

class Run {
public:
  // `dry`: only what comes before the first step, and of the checkpoint to start from only its
  // header (check_run).
  Run(const RunConfig& config, const parallel::Grid& grid, const std::string& config_text,
      bool dry = false)
      : config_(config), grid_(grid), plan_(plan_run(config, grid)), data_(open_data(config, grid)),
        trace_(grid, plan_.trace_path.empty() ? 0 : config.output.trace_steps),
        tp_(make_axis_comm(grid, parallel::Axis::tp, plan_.backend)),
        model_(config.model, config.train.micro_batch, config.model.seq_len, grid, plan_.pipeline,
               plan_.stage_blocks, tp_.get(), std::uint64_t(config.train.seed), &trace_,
               transfer_comm(plan_, grid), parse_precision(config.train.precision)),
        grad_sync_(grid, plan_.backend, model_, config.parallel.grad_bucket_mb,
                   config.parallel.zero),
        optimizer_(plan_.optim, model_, grad_sync_, grid), report_(config, plan_, grid, !dry),
        checkpoints_(config, plan_, grid),
        job_(config, grid, layers::make_param_table(config.model).total * 3 * sizeof(float)),
        guard_(config.train, grid),
        skip_steps_(parse_step_list(config.train.skip_steps, "train.skip_steps")) {
    // The report's header first, then where the run starts (a resumed checkpoint, its data).
    memory_per_rank_ =
        report_.startup(model_, *data_.train, optimizer_.state_bytes(), grad_sync_.buffer_bytes());
    report_.note(job_.describe());
    report_.note(validation_shortfall(data_, config, grid));
    report_.note(layers::schedule_note(plan_.optim, config.train.steps));
    start(dry);
    if (dry) return;
    if (plan_.reference_dump) {
      dump_ = std::make_unique<ReferenceDump>(config, plan_.optim, *model_.chunks()[0]);
    }
    const bool tokens = model_.executor().needs_tokens();
    validation_ = std::make_unique<Validation>(data_, config, grid, tokens);
    feed_ = std::make_unique<BatchFeed>(*data_.train, config, grid, tokens, first_step_,
                                        meta_.samples_seen);
    if (dump_) dump_->first_forward(feed_->batch(0));
    config_text_ = config_text;
    record_run();
    report_.open_metrics(first_step_);
  }

  int first_step() const { return first_step_; }
  bool weights_missing() const { return missing_on_root(plan_.weights_path, grid_); }
  double memory_per_rank() const { return memory_per_rank_; }

  // One optimizer step, its validation and checkpoint when due, and its report. A step that
  // rolls back (train.on_nonfinite) returns at once with rollback_to set.
  StepRecord step(int step) {
    parallel::Executor& pipeline = model_.executor();
    StepRecord r;
    r.step = step;
    const double begin = parallel::steady_seconds();
    trace_.set_step(step);
    const double comm_before = pipeline.comm_seconds(), wait_before = feed_->waited();
    if (skip_steps_.count(step) != 0) {
      drop_batch(step, r);
    } else {
      train_step(step, r);
    }
    if (r.rollback_to >= 0) return r;
    r.rolled_back_from = std::exchange(rolled_back_from_, -1);
    r.rolled_back_for = std::exchange(rolled_back_for_, "");
    r.bad_steps = bad_steps_;
    r.seconds = parallel::steady_seconds() - begin;
    r.comm_seconds = pipeline.comm_seconds() - comm_before;
    r.data_wait = feed_->waited() - wait_before;
    r.pipeline = pipeline.last_timing();
    // ZeRO-1's parameters arrive during the next step's forward; a validation reads them before.
    if (validation_->due(step)) {
      parallel::flight::set_phase("validation", -1, -1);
      grad_sync_.wait_params();
      r.val_loss = validation_->run(pipeline, grad_sync_.scalars());
      r.validated = true;
      parallel::flight::set_phase("", -1, -1);
    }
    if (checkpoints_.due(step)) save(step + 1, r, step == config_.train.steps - 1);
    answer_job(step, r, parallel::steady_seconds() - begin);
    r.tokens_per_s = report_.step(r);
    return r;
  }

  // After the last step, `steps` done: the weights file (unless `weights` is false), the
  // reference dump, the trace (unless `trace` is false).
  void finish(bool weights, bool trace, int steps) {
    grad_sync_.wait_params();
    feed_->stop(); // HDF5 is not thread-safe: the reader thread ends before files are written
    if (weights && !plan_.weights_path.empty()) {
      advance(steps); // a stopped run's file says where it stopped, not where it was headed
      write_model_file(plan_.weights_path, model_, nullptr, meta_, config_.model, grid_,
                       data_.tokenizer, config_.checkpoint.direct_io);
      report_.wrote("weights", plan_.weights_path);
    }
    if (dump_) dump_->write(config_.output.reference_dump);
    if (!trace) return;
    trace_.write(plan_.trace_path);
    report_.wrote("trace", plan_.trace_path);
  }

private:
  // Where the run starts: step 0, or where a checkpoint left off (--resume), with the weights
  // of a file (--init-from) or initialised.
  void start(bool dry) {
    if (dry) {
      if (!plan_.resume_path.empty()) {
        meta_ = read_model_header(plan_.resume_path, config_.model, grid_, true);
        check_same_data(meta_);
        note_changed_course(meta_);
        first_step_ = meta_.step;
        report_.note(fmt::format("dry run: would resume from {}", plan_.resume_path));
      } else if (!plan_.init_from.empty()) {
        read_model_header(plan_.init_from, config_.model, grid_, false);
      }
      return;
    }
    if (!plan_.resume_path.empty()) {
      const double begin = parallel::steady_seconds();
      meta_ = read_model_file(plan_.resume_path, model_, &optimizer_, config_.model, grid_,
                              config_.checkpoint.direct_io);
      const double seconds = parallel::steady_seconds() - begin;
      check_same_data(meta_);
      first_step_ = meta_.step;
      first_samples_ = meta_.samples_seen;
      last_checkpoint_ = plan_.resume_path;
      report_.resumed(plan_.resume_path, meta_, seconds);
      note_changed_course(meta_);
    } else if (!plan_.init_from.empty()) {
      read_model_file(plan_.init_from, model_, nullptr, config_.model, grid_,
                      config_.checkpoint.direct_io);
      report_.wrote("weights from", plan_.init_from);
    }
  }

  // The forward, backward and gradient reduction, and the update unless the step is bad.
  void train_step(int step, StepRecord& r) {
    parallel::Executor& pipeline = model_.executor();
    pipeline.zero_grad();
    parallel::Executor::Samples samples = feed_->samples(step);
    if (dump_) {
      samples = [this, read = samples](int micro, std::vector<std::int32_t>& seq) {
        read(micro, seq);
        dump_->batch(seq);
      };
    }
    const float loss_weight = 1.0f / float(config_.train.grad_accum * grid_.layout().dp);
    const double loss = pipeline.step(samples, loss_weight, grad_sync_.during_step()) +
                        parallel::fault::loss_offset_now(step);
    r.loss = grad_sync_.finish(loss, &trace_);
    if (dump_) dump_->step(step, r.loss);
    if (parallel::fault::nan_gradient_now(step)) optimizer_.poison_gradient(model_);
    r.grad_norm = optimizer_.grad_norm(model_);
    r.lr = layers::learning_rate(plan_.optim, step);
    const StepGuard::Verdict verdict = guard_.check(r.loss, r.grad_norm);
    if (!verdict.bad) {
      optimizer_.update(model_, r.lr, r.grad_norm, &trace_);
      guard_.accept(step, r.loss);
    }
    // Before gather_params, which under ZeRO spends the reduced gradients' buffer.
    if (step == first_step_ && !plan_.gradients_path.empty()) write_gradients(step);
    grad_sync_.gather_params();
    r.dp_in_flight = grad_sync_.last_timing().in_flight;
    r.dp_exposed = grad_sync_.last_timing().exposed;
    r.dp_buckets = grad_sync_.last_timing().buckets;
    r.dp_buckets_overlapped = grad_sync_.last_timing().early;
    r.dp_gather = grad_sync_.last_timing().gather_in_flight;
    r.dp_gather_exposed = grad_sync_.last_timing().gather_exposed;
    if (verdict.bad) answer_bad_step(step, verdict.what, r);
  }

  // train.skip_steps: the step's samples are read and dropped (a middle pipeline stage has none).
  void drop_batch(int step, StepRecord& r) {
    const bool reads = model_.executor().needs_tokens();
    std::vector<std::int32_t> seq;
    for (int micro = 0; reads && micro < config_.train.grad_accum; ++micro)
      feed_->samples(step)(micro, seq);
    r.loss = r.grad_norm = std::nan("");
    r.lr = layers::learning_rate(plan_.optim, step);
    r.action = "skip_steps";
    r.samples = samples_of(step);
    r.event = fmt::format("skipped as train.skip_steps asks: samples {} to {} read and dropped, "
                          "no update",
                          r.samples.first, r.samples.second);
  }

  // The global indices of the first and last samples of `step` in the run's order.
  std::pair<std::uint64_t, std::uint64_t> samples_of(int step) const {
    return {samples_before(step), samples_before(step + 1) - 1};
  }

  // train.on_nonfinite, the same on every rank (the verdict is agreed).
  void answer_bad_step(int step, const std::string& what, StepRecord& r) {
    ++bad_steps_;
    // ZeRO-1's parameter gathers of this step are posted: they complete before a stop unwinds
    // (every rank is here, the verdict being agreed), so that no buffer goes while MPI reads it.
    grad_sync_.wait_params();
    r.samples = samples_of(step);
    const std::string policy = config_.train.on_nonfinite;
    const std::string where = fmt::format("step {}: {}, on samples {} to {}", step + 1, what,
                                          r.samples.first, r.samples.second);
    const bool root = grid_.rank() == 0;
    if (policy == "stop") {
      throw CollectiveError(
          fmt::format("{}: the run stops before its update (train.on_nonfinite = stop). The "
                      "weights are those after step {}. If training diverged, lower train.lr "
                      "or raise train.warmup_steps; for bad data, set train.on_nonfinite = skip, "
                      "or rollback with checkpoints",
                      where, step),
          root, grid_.size());
    }
    if (bad_steps_ > config_.train.max_bad_steps) {
      throw CollectiveError(
          fmt::format("{}: bad step number {} of this run, more than train.max_bad_steps = {}: "
                      "the run stops (training has likely diverged; lower train.lr, or raise "
                      "train.max_bad_steps)",
                      where, bad_steps_, config_.train.max_bad_steps),
          root, grid_.size());
    }
    r.bad = what;
    r.action = policy;
    if (policy == "skip") {
      r.event = fmt::format("{}, on samples {} to {}: its update is dropped "
                            "(train.on_nonfinite = skip)",
                            what, r.samples.first, r.samples.second);
      return;
    }
    if (last_checkpoint_.empty()) {
      throw CollectiveError(
          fmt::format("{}: train.on_nonfinite = rollback, but this run has no checkpoint to go "
                      "back to yet; save earlier (checkpoint.every), or skip",
                      where),
          root, grid_.size());
    }
    rollback(step, fmt::format("{}, on samples {} to {}", what, r.samples.first, r.samples.second));
    r.rollback_to = first_step_;
  }

  // What the files this run writes say about it (meta_ besides the position): its
  // configuration, data and layout, not those of a checkpoint it read.
  void record_run() {
    meta_.config = config_text_;
    meta_.data_source = config_.data.source;
    meta_.data_seed = config_.data.seed;
    if (const auto extent = data_.train->extent()) {
      meta_.data_tokens = std::int64_t(extent->tokens);
      meta_.data_documents = std::int64_t(extent->documents);
    }
    meta_.global_batch = global_batch(config_.train, grid_.layout().dp);
    meta_.decay_steps = plan_.optim.decay_steps;
    meta_.layout =
        fmt::format("{}; schedule {}, {} chunk(s), blocks per virtual stage {}",
                    grid_.layout().str(), config_.parallel.schedule, config_.parallel.chunks,
                    parallel::stage_blocks_text(plan_.stage_blocks));
  }

  // Back to the newest checkpoint this run saved or started from, with the data cursor past the
  // samples of `step`, so that they are not met again (`why`: what was wrong with the step).
  void rollback(int step, const std::string& why) {
    const std::uint64_t past = samples_before(step + 1);
    grad_sync_.wait_params();
    feed_->stop();
    meta_ = read_model_file(last_checkpoint_, model_, &optimizer_, config_.model, grid_,
                            config_.checkpoint.direct_io);
    record_run(); // the checkpoint may be the one this run resumed from, with older data counts
    first_step_ = meta_.step;
    first_samples_ = past;
    guard_.rolled_back_to(first_step_);
    feed_->restart(first_step_, past);
    rolled_back_from_ = step;
    rolled_back_for_ = why;
    report_.rolled_back(step, why, last_checkpoint_, meta_.step, past);
  }

  // A resumed run goes on through the same samples in the same order; new data is a new run.
  // A dataset remade at the same path (more text, say) changes the epoch's length and the order
  // of its samples: stopped, unless data.on_change = continue.
  void check_same_data(const CheckpointMeta& m) const {
    std::string changed; // the dataset's counts differ from the checkpoint's: how
    parallel::run_agreed(grid_.comm(), [&] {
      if (m.data_source != config_.data.source || m.data_seed != config_.data.seed) {
        throw Error(fmt::format(
            "'{}' was trained on data.source = '{}' with data.seed = {}, but this run has '{}' "
            "with {}: a resumed run reads the same samples in the same order; set them back, or "
            "start a new run from its weights with --init-from",
            plan_.resume_path, m.data_source, m.data_seed, config_.data.source, config_.data.seed));
      }
      if (grid_.rank() == 0) check_same_tokenizer(plan_.resume_path, data_.tokenizer);
      const auto now = data_.train->extent();
      if (m.data_tokens < 0 || !now ||
          (std::uint64_t(m.data_tokens) == now->tokens &&
           std::uint64_t(m.data_documents) == now->documents)) {
        return;
      }
      changed = fmt::format(
          "'{}' was trained on '{}' when its training split held {} tokens in {} documents; it "
          "holds {} tokens in {} documents now (remade at the same path?), so the samples' order "
          "and the epoch's length differ from the run's",
          plan_.resume_path, m.data_source, m.data_tokens, m.data_documents, now->tokens,
          now->documents);
      if (config_.data.on_change != "continue") {
        throw Error(changed + ": point data.source at the dataset it was trained on, set "
                              "data.on_change = \"continue\" to go on from the same sample "
                              "count through the new order, or start a new run from its weights "
                              "with --init-from");
      }
    });
    if (!changed.empty()) {
      report_.note(changed + "; data.on_change = continue: going on from sample " +
                   std::to_string(m.samples_seen) + " of the new order");
    }
  }

  // What moves a resumed run off the loss curve so far, allowed and said: the global batch (a
  // new dp, say) and the end of the learning rate's decay (a new train.steps).
  void note_changed_course(const CheckpointMeta& m) const {
    const std::int64_t batch = global_batch(config_.train, grid_.layout().dp);
    if (m.global_batch > 0 && m.global_batch != batch) {
      report_.note(fmt::format(
          "the global batch changes from {} to {} sequences a step (train.micro_batch {} x "
          "train.grad_accum {} x dp {}), so the loss follows another curve than the run's so "
          "far{}; for the same batch, make micro_batch x grad_accum x dp = {}",
          m.global_batch, batch, config_.train.micro_batch, config_.train.grad_accum,
          grid_.layout().dp,
          config_.train.eval_every > 0 ? ", validating on more or fewer samples" : "",
          m.global_batch));
    }
    if (m.decay_steps > 0 && m.decay_steps != plan_.optim.decay_steps) {
      layers::OptimizerConfig before = plan_.optim;
      before.decay_steps = int(m.decay_steps);
      report_.note(fmt::format(
          "the learning rate's decay ended at step {} in the run so far and ends at step {} now "
          "({}): step {}'s rate is {:.3g} instead of {:.3g}; set train.decay_steps = {} to keep "
          "the schedule",
          m.decay_steps, plan_.optim.decay_steps,
          config_.train.optim.decay_steps == 0 ? "train.decay_steps = 0 follows train.steps"
                                               : "train.decay_steps",
          m.step + 1, layers::learning_rate(plan_.optim, m.step),
          layers::learning_rate(before, m.step), m.decay_steps));
    }
  }

  // The data cursor before step `steps`: samples read by the steps before it.
  std::uint64_t samples_before(int steps) const {
    const auto per_step = std::uint64_t(global_batch(config_.train, grid_.layout().dp));
    return first_samples_ + std::uint64_t(steps - first_step_) * per_step;
  }

  // The run's position after `steps` steps.
  void advance(int steps) {
    meta_.step = steps;
    meta_.samples_seen = samples_before(steps);
    meta_.tokens_seen = meta_.samples_seen * std::uint64_t(config_.model.seq_len);
  }

  // A signal or the job's time limit: a checkpoint now, unless this step saved one, and for a
  // stop the end of the run. `seconds`: the whole step's, its validation and save included.
  void answer_job(int step, StepRecord& r, double seconds) {
    const double validation = r.validated ? seconds - r.seconds - r.checkpoint_seconds : 0.0;
    const JobControl::Decision job = job_.after_step(r.seconds, r.checkpoint_seconds, validation);
    if (!job.note.empty()) report_.note(fmt::format("step {}: {}", step + 1, job.note));
    if (!job.save) return;
    const bool last = step == config_.train.steps - 1;
    if (!checkpoints_.enabled()) {
      report_.note(fmt::format("step {}: {} asks for a checkpoint, but checkpoint.dir is not set",
                               step + 1, job.reason));
    } else if (r.checkpoint_path.empty()) {
      // Only a save the run ends with must succeed: after SIGUSR2's the run goes on, and
      // checkpoint.on_save_error says whether a failed one stops it.
      save(step + 1, r, job.stop || last);
      job_.note_save(r.checkpoint_seconds);
    }
    r.stop = job.stop && !last;
    r.stop_reason = job.reason;
  }

  // `write` with the run's position after `steps` steps in meta_; HDF5 is not thread-safe, so
  // the reader thread rests meanwhile and goes on from the next step's samples.
  void write_at(int steps, const std::function<void()>& write) {
    advance(steps);
    feed_->stop();
    try {
      write();
    } catch (...) {
      feed_->restart(steps, meta_.samples_seen); // a failed save may be passed over
      throw;
    }
    feed_->restart(steps, meta_.samples_seen);
  }

  void write_gradients(int step) {
    write_at(step + 1, [&] {
      write_gradient_file(plan_.gradients_path, model_, grad_sync_, meta_, config_.model, grid_,
                          config_.checkpoint.direct_io);
    });
    report_.wrote("gradients", plan_.gradients_path);
  }

  // `must`: the save at the end or before the time limit, which checkpoint.on_save_error =
  // continue does not pass over (the job would end with its work unsaved). Only an error every
  // rank agreed on can be passed over: then no rank is left inside the collective write.
  void save(int steps, StepRecord& r, bool must) {
    parallel::flight::set_phase("saving a checkpoint", -1, -1); // for a hang report
    grad_sync_.wait_params(); // ZeRO-1's parameters may still be arriving
    Checkpointer::Saved saved;
    try {
      write_at(steps,
               [&] { saved = checkpoints_.save(meta_, model_, optimizer_, data_.tokenizer); });
      parallel::flight::set_phase("", -1, -1);
    } catch (const CollectiveError& e) {
      if (must || config_.checkpoint.on_save_error != "continue") throw;
      checkpoints_.discard(steps);
      r.checkpoint_error = e.what();
      r.event = fmt::format("checkpoint not saved: {}; going on (checkpoint.on_save_error = "
                            "continue), the newest complete checkpoint is {}",
                            e.what(), last_checkpoint_.empty() ? "none" : last_checkpoint_);
      return;
    }
    r.checkpoint_path = saved.path;
    last_checkpoint_ = saved.path;
    r.checkpoint_seconds = saved.seconds;
    r.checkpoint_bytes = saved.bytes;
    r.checkpoint_staging = saved.staging;
    r.checkpoint_direct = saved.direct;
  }

  const RunConfig& config_;
  const parallel::Grid& grid_;
  const RunPlan plan_;
  const RunData data_;
  parallel::TraceRecorder trace_;
  const std::unique_ptr<parallel::Comm> tp_;
  PipelineModel model_;
  GradSync grad_sync_;
  OptimizerStep optimizer_;
  Reporter report_;
  Checkpointer checkpoints_;
  JobControl job_;
  std::unique_ptr<ReferenceDump> dump_;
  std::unique_ptr<Validation> validation_;
  std::unique_ptr<BatchFeed> feed_;
  CheckpointMeta meta_;
  StepGuard guard_;
  const std::set<int> skip_steps_;  // 0-based
  int first_step_ = 0;              // where this run (or its last rollback) started
  double memory_per_rank_ = 0.0;    // the start-up report's total on the largest rank
  std::uint64_t first_samples_ = 0; // the data cursor there
  std::string last_checkpoint_;     // the newest checkpoint saved or resumed from ("" for none)
  std::string config_text_;         // the run's configuration as TOML, for the files it writes
  int bad_steps_ = 0;               // steps train.on_nonfinite answered
  int rolled_back_from_ = -1;       // the step the last rollback left, for the next report
  std::string rolled_back_for_;     // and why, with its samples
};

} // namespace

void check_run(const RunConfig& config, const parallel::Grid& grid) {
  const auto run =
      end_job_on_local_error([&] { return std::make_unique<Run>(config, grid, "", true); });
  if (grid.rank() == 0) {
    std::printf("dry run: configuration, layout, data, checkpoints and memory are fine; "
                "%d steps would run from step %d\n",
                config.train.steps - run->first_step(), run->first_step());
  }
}

namespace {

// GRIDLM_STATUS_FILE: where the watchdog says the job hung (parallel::WatchdogOptions).
std::string status_file_from_environment() {
  const char* path = std::getenv("GRIDLM_STATUS_FILE");
  return path != nullptr ? path : "";
}

} // namespace

TrainResult train(const RunConfig& config, const parallel::Grid& grid,
                  const std::string& config_text) {
  parallel::fault::configure_from_environment();
  const parallel::Coords at = grid.coords();
  // The run's id in its hang requests and reports: rank 0's host, process and start time.
  std::string run_id = grid.rank() == 0 ? fmt::format("{}-{}-{:.6f}", host_name(), ::getpid(),
                                                      parallel::flight::wall_seconds())
                                        : std::string();
  parallel::broadcast_text(grid.comm(), run_id);
  const parallel::Watchdog watchdog(parallel::WatchdogOptions{
      config.parallel.timeout_seconds, config.output.dir, grid.rank(), grid.size(), host_name(),
      at.dp, at.pp, at.tp, run_id, status_file_from_environment(), ""});
  // An error that only this rank saw while the run is set up (a file one node cannot read)
  // ends the job here, as in a step: the other ranks wait in the next collective.
  const auto made =
      end_job_on_local_error([&] { return std::make_unique<Run>(config, grid, config_text); });
  Run& run = *made;
  TrainResult result;
  result.steps_done = run.first_step();
  result.memory_per_rank = run.memory_per_rank();
  std::map<int, double> rates; // by step: a rollback drops the steps it runs again
  double first_rate = 0.0;
  for (int step = run.first_step(); step < config.train.steps; ++step) {
    parallel::flight::set_step(step);
    parallel::fault::hang_if_asked(step);
    // A step's error that only this rank saw ends the job here, not after unwinding through the
    // run's open files (see end_job_on_local_error).
    const StepRecord r = end_job_on_local_error([&] { return run.step(step); });
    if (r.rollback_to >= 0) {
      rates.erase(rates.lower_bound(r.rollback_to), rates.end());
      step = r.rollback_to - 1; // the loop's ++ makes it the checkpoint's step
      continue;
    }
    result.losses.push_back(r.loss);
    result.grad_norms.push_back(r.grad_norm);
    result.dp_buckets = r.dp_buckets;
    result.dp_buckets_overlapped += r.dp_buckets_overlapped;
    if (r.validated) result.val_losses.emplace_back(step, r.val_loss);
    // The first step (allocation, warm-up) is left out of the median, unless it is the only
    // one; a step train.skip_steps dropped has no rate (NaN).
    if (std::isfinite(r.tokens_per_s)) {
      if (step > run.first_step()) {
        rates[step] = r.tokens_per_s;
      } else {
        first_rate = r.tokens_per_s;
      }
    }
    result.steps_done = step + 1;
    if (r.stop) {
      result.stopped = r.stop_reason;
      result.checkpoint = r.checkpoint_path;
      break;
    }
  }
  // The first and last losses a step computed (a dropped step's is NaN).
  bool seen = false; // no step computed a loss: NaN, not the defaults' 0
  result.first_loss = result.last_loss = std::nan("");
  for (const double loss : result.losses) {
    if (!std::isfinite(loss)) continue;
    if (!std::exchange(seen, true)) result.first_loss = loss;
    result.last_loss = loss;
  }
  std::vector<double> kept;
  for (const auto& entry : rates)
    kept.push_back(entry.second);
  result.tokens_per_s = kept.empty() ? first_rate : median(kept);
  // Stopped early with a checkpoint: it holds the weights; without one, the weights file does.
  // A run that had already reached its last step leaves the files of the run that did as they
  // are, but writes the weights file that run never wrote (a crash after its last save).
  const bool ran = run.first_step() < config.train.steps;
  end_job_on_local_error([&] {
    run.finish(ran ? result.stopped.empty() || result.checkpoint.empty() : run.weights_missing(),
               ran, result.steps_done);
  });
  return result;
}

} // namespace gridlm::engine
