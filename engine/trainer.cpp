// The step loop, and the wiring of the run's parts around it.
#include "engine/trainer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/comm_backend.hpp"
#include "engine/data.hpp"
#include "engine/grad_sync.hpp"
#include "engine/optimizer_step.hpp"
#include "engine/pipeline_model.hpp"
#include "engine/reference_dump.hpp"
#include "engine/reporter.hpp"
#include "engine/run_plan.hpp"
#include "engine/validation.hpp"
#include "engine/weights_file.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

TrainResult train(const RunConfig& config, const parallel::Grid& grid) {
  const RunPlan plan = plan_run(config, grid);
  const RunData data = open_data(config, grid);
  parallel::TraceRecorder trace(grid, plan.trace_path.empty() ? 0 : config.output.trace_steps);
  const std::unique_ptr<parallel::Comm> tp = make_axis_comm(grid, parallel::Axis::tp, plan.backend);
  PipelineModel model(config.model, config.train.micro_batch, config.model.seq_len, grid,
                      plan.pipeline, plan.stage_blocks, tp.get(), std::uint64_t(config.train.seed),
                      &trace,
                      plan.transfer_backend == "mpi"
                          ? nullptr
                          : make_axis_comm(grid, parallel::Axis::pp, plan.transfer_backend));
  parallel::Executor& pipeline = model.executor();
  OptimizerStep optimizer(plan.optim, model);
  GradSync grad_sync(grid, plan.backend);
  Reporter report(config, plan, grid);
  report.startup(model, *data.train, optimizer.state_bytes());
  std::unique_ptr<ReferenceDump> dump;
  if (plan.reference_dump)
    dump = std::make_unique<ReferenceDump>(config, plan.optim, *model.chunks()[0]);
  const Validation validation(data, config, grid, pipeline.needs_tokens());
  BatchFeed feed(*data.train, config, grid, pipeline.needs_tokens());
  if (dump) dump->first_forward(feed.batch(0));

  const float loss_weight = 1.0f / float(config.train.grad_accum * grid.layout().dp);
  std::vector<double> rates;
  TrainResult result;
  for (int step = 0; step < config.train.steps; ++step) {
    StepRecord r;
    r.step = step;
    const double start = parallel::steady_seconds();
    trace.set_step(step);
    const double comm_before = pipeline.comm_seconds(), wait_before = feed.waited();
    pipeline.zero_grad();
    parallel::Executor::Samples samples = feed.samples(step);
    if (dump) {
      samples = [&dump, read = samples](int micro, std::vector<std::int32_t>& seq) {
        read(micro, seq);
        dump->batch(seq);
      };
    }
    r.loss = grad_sync.reduce(model, pipeline.step(samples, loss_weight), &trace);
    if (dump) dump->step(step, r.loss);
    const OptimizerStep::Result update = optimizer.apply(model, step, &trace);
    r.grad_norm = update.grad_norm;
    r.lr = update.lr;
    r.seconds = parallel::steady_seconds() - start;
    r.comm_seconds = pipeline.comm_seconds() - comm_before;
    r.data_wait = feed.waited() - wait_before;
    r.pipeline = pipeline.last_timing();
    if (!std::isfinite(r.loss)) {
      abort_job(
          fmt::format("loss is {} at step {}: training diverged; lower train.lr", r.loss, step));
    }
    result.losses.push_back(r.loss);
    r.val_loss = std::nan("");
    if (validation.due(step)) {
      r.val_loss = validation.run(pipeline, grad_sync.scalars());
      result.val_losses.emplace_back(step, r.val_loss);
    }
    const double rate = report.step(r);
    if (step > 0) rates.push_back(rate);
  }
  if (!result.losses.empty()) {
    result.first_loss = result.losses.front();
    result.last_loss = result.losses.back();
  }
  result.tokens_per_s = median(rates);
  feed.stop(); // HDF5 is not thread-safe: the reader thread ends before files are written
  if (!plan.weights_path.empty()) {
    write_weights(plan.weights_path, model, config.model, grid, data.tokenizer);
    report.wrote("weights", plan.weights_path);
  }
  if (dump) dump->write(config.output.reference_dump);
  trace.write(plan.trace_path);
  report.wrote("trace", plan.trace_path);
  return result;
}

} // namespace gridlm::engine
