// A planner candidate in words (a table row), as `gridlm train` flags, and as the configuration
// that runs it.
#include <fmt/format.h>

#include "engine/planner.hpp"
#include "parallel/stage_layout.hpp"

namespace gridlm::engine {

std::string Candidate::flags() const {
  return fmt::format("--set parallel.dp={} --set parallel.pp={} --set parallel.tp={} "
                     "--set train.micro_batch={} --set train.grad_accum={} --set "
                     "parallel.schedule={} --set parallel.chunks={} --set parallel.zero={} --set "
                     "parallel.stage_layout={}",
                     layout.dp, layout.pp, layout.tp, micro_batch, micro_batches, schedule, chunks,
                     zero, parallel::stage_blocks_text(stage_blocks));
}

std::string Candidate::str() const {
  return fmt::format("{}, {}{}, {} x {}, zero {}", layout.str(), schedule,
                     chunks > 1 ? fmt::format(" x{}", chunks) : "", micro_batch, micro_batches,
                     zero);
}

RunConfig with_candidate(const RunConfig& config, const Candidate& c) {
  RunConfig r = config;
  r.parallel.dp = std::to_string(c.layout.dp);
  r.parallel.pp = std::to_string(c.layout.pp);
  r.parallel.tp = std::to_string(c.layout.tp);
  r.parallel.schedule = c.schedule;
  r.parallel.chunks = c.chunks;
  r.parallel.zero = c.zero;
  r.parallel.stage_layout = parallel::stage_blocks_text(c.stage_blocks);
  r.train.micro_batch = c.micro_batch;
  r.train.grad_accum = c.micro_batches;
  return r;
}

} // namespace gridlm::engine
