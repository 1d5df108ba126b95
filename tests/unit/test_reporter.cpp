// The step's records: metrics.jsonl says whether a validation ran after a step by the presence of
// val_loss, so a validation whose loss is not finite (a diverged model) must still be there (as
// null), not read as "no validation".
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/reporter.hpp"
#include "engine/run_plan.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {
namespace {

namespace fs = std::filesystem;

TEST(Reporter, ANonFiniteValidationLossIsReportedNotHidden) {
  const fs::path dir = fs::temp_directory_path() / ("gridlm-reporter-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  RunConfig config;
  config.train.steps = 3;
  config.train.eval_every = 1;
  RunPlan plan;
  plan.metrics_path = (dir / "metrics.jsonl").string();
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_SELF, {});
  {
    Reporter report(config, plan, grid);
    report.open_metrics(0);
    StepRecord r;
    r.loss = 4.0;
    r.seconds = 1.0;
    for (int step = 0; step < 3; ++step) {
      r.step = step;
      r.validated = step != 1;
      r.val_loss = step == 0 ? 3.5 : std::nan("");
      report.step(r);
    }
  }
  std::ifstream in(plan.metrics_path);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(in, line))
    rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["val_loss"], 3.5);
  EXPECT_FALSE(rows[1].contains("val_loss")) << "no validation after step 2";
  ASSERT_TRUE(rows[2].contains("val_loss")) << "a NaN validation loss after step 3 vanished";
  EXPECT_TRUE(rows[2]["val_loss"].is_null());
  fs::remove_all(dir);
}

} // namespace
} // namespace gridlm::engine
