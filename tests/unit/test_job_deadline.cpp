// Reading the job's end from Slurm (engine/job_deadline): squeue's time-left format in all its
// forms, the words for "no limit", text that is not a duration, and SLURM_JOB_END_TIME, which
// wins over squeue. And the exit margin a signalled save widens, and a limit extended while the
// job runs (engine/job_control).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include <mpi.h>
#include <unistd.h>

#include "engine/job_control.hpp"
#include "engine/job_deadline.hpp"
#include "engine/job_signals.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"

using namespace gridlm::engine;

TEST(JobDeadline, ReadsSqueueTimeLeft) {
  EXPECT_EQ(parse_slurm_duration("0:45"), 45.0);
  EXPECT_EQ(parse_slurm_duration("12:05"), 12 * 60.0 + 5);
  EXPECT_EQ(parse_slurm_duration("3:59:58"), 3 * 3600.0 + 59 * 60 + 58);
  EXPECT_EQ(parse_slurm_duration("2-01:00:00"), 2 * 86400.0 + 3600);
  EXPECT_EQ(parse_slurm_duration(" 1:00\n"), 60.0);
}

TEST(JobDeadline, NoLimitIsNone) {
  for (const char* none : {"UNLIMITED", "NOT_SET", "INVALID", "Partition_Limit"})
    EXPECT_FALSE(parse_slurm_duration(none).has_value()) << none;
}

TEST(JobDeadline, OtherTextIsAnError) {
  for (const char* bad : {"", "soon", "12", "1:2:3:4", "1:xx", "a-1:00", "-1:00"}) {
    try {
      parse_slurm_duration(bad);
      ADD_FAILURE() << "'" << bad << "' was read as a duration";
    } catch (const gridlm::Error& e) {
      EXPECT_NE(std::string(e.what()).find("[days-][hours:]minutes:seconds"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("export SLURM_JOB_END_TIME="), std::string::npos)
          << "the fix: " << e.what();
    }
  }
}

TEST(JobDeadline, JobEndTimeFromTheEnvironment) {
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
  EXPECT_FALSE(read_job_deadline().has_value()) << "outside a Slurm job";
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("SLURM_JOB_END_TIME", std::to_string(std::time(nullptr) + 600).c_str(), 1);
  const auto d = read_job_deadline();
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->seconds_left, 600.0, 2.0);
  EXPECT_EQ(d->source, "SLURM_JOB_END_TIME");
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
}

// The measured exit margin is twice the slowest step and save plus 10 s: a save that a signal
// asked for after the step (note_save) counts like a periodic one, so a slow SIGUSR2 save moves
// the stop earlier instead of leaving too little time for the last one.
TEST(JobControl, ASignalledSaveWidensTheMeasuredMargin) {
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("SLURM_JOB_END_TIME", std::to_string(std::time(nullptr) + 600).c_str(), 1);
  RunConfig config; // exit_margin_minutes -1: measured
  gridlm::parallel::GridOptions o;
  const gridlm::parallel::Grid grid = gridlm::parallel::Grid::create(MPI_COMM_WORLD, o);
  JobControl job(config, grid, 1 << 20);
  EXPECT_FALSE(job.after_step(0.1, 0.0).stop) << "a margin of ~20 s with 600 s left";
  job.note_save(300.0);
  const JobControl::Decision d = job.after_step(0.1, 0.0);
  EXPECT_TRUE(d.stop && d.save) << "a margin of 2 x 300 + 10 s with under 600 s left";
  EXPECT_NE(d.reason.find("the job's time limit"), std::string::npos) << d.reason;
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
}

// A job whose time limit is within its exit margin would stop after one step and be requeued to
// do the same forever (train.sbatch requeues on status 75): refused at the start, dry run too.
TEST(JobControl, AJobWhoseLimitIsWithinItsMarginIsRefused) {
  setenv("SLURM_JOB_ID", "42", 1);
  const std::time_t now = std::time(nullptr);
  setenv("SLURM_JOB_START_TIME", std::to_string(now - 10).c_str(), 1);
  setenv("SLURM_JOB_END_TIME", std::to_string(now + 30).c_str(), 1);
  RunConfig config;
  config.train.exit_margin_minutes = 1;
  gridlm::parallel::GridOptions o;
  const gridlm::parallel::Grid grid = gridlm::parallel::Grid::create(MPI_COMM_WORLD, o);
  try {
    JobControl job(config, grid, 1 << 20);
    ADD_FAILURE() << "a job of 40 s with a margin of 60 s started";
  } catch (const gridlm::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("the job's time limit of 40 s is within the exit margin "
                                         "of 60 s (train.exit_margin_minutes)"),
              std::string::npos)
        << e.what();
  }
  config.train.exit_margin_minutes = 0.6;
  EXPECT_NO_THROW(JobControl(config, grid, 1 << 20))
      << "36 s of margin: 30 s left is one short job, the next gets the whole 40 s";
  unsetenv("SLURM_JOB_START_TIME");
  config.train.exit_margin_minutes = 1;
  EXPECT_NO_THROW(JobControl(config, grid, 1 << 20)) << "the limit is not known";
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
}

// Before stopping for the time limit, rank 0 asks squeue again (SLURM_JOB_END_TIME is the end as
// the job started): an administrator's `scontrol update TimeLimit` lets the run go on, to the
// new end or, lifted to UNLIMITED, to its last step. A fake squeue first in PATH answers.
TEST(JobControl, ALimitExtendedWhileTheJobRunsLetsTheRunGoOn) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gridlm-squeue-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto answer = [&](const std::string& line) {
    std::ofstream(dir / "squeue") << "#!/bin/sh\necho '" << line << "'\n";
    std::filesystem::permissions(dir / "squeue", std::filesystem::perms::owner_all);
  };
  const std::string path = std::getenv("PATH");
  setenv("PATH", (dir.string() + ":" + path).c_str(), 1);
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("SLURM_JOB_END_TIME", std::to_string(std::time(nullptr) + 30).c_str(), 1);
  RunConfig config;
  config.train.exit_margin_minutes = 1;
  gridlm::parallel::GridOptions o;
  const gridlm::parallel::Grid grid = gridlm::parallel::Grid::create(MPI_COMM_WORLD, o);
  const bool root = grid.rank() == 0;

  answer("9:00 15:00");
  JobControl extended(config, grid, 1 << 20);
  JobControl::Decision d = extended.after_step(0.1, 0.0);
  EXPECT_FALSE(d.stop || d.save) << "9 minutes left now, a margin of 1";
  if (root) {
    EXPECT_NE(d.note.find("the job's time limit was extended: it ends in 9.0 min instead of 0.5"),
              std::string::npos)
        << d.note;
  }
  EXPECT_FALSE(extended.after_step(0.1, 0.0).stop);

  answer("0:20 15:00");
  JobControl same(config, grid, 1 << 20);
  d = same.after_step(0.1, 0.0);
  EXPECT_TRUE(d.stop && d.save) << "squeue says what the job's end said";
  EXPECT_EQ(d.note, "");

  answer("soon 15:00");
  JobControl garbled(config, grid, 1 << 20);
  EXPECT_TRUE(garbled.after_step(0.1, 0.0).stop) << "an answer not understood: the end stands";

  answer("UNLIMITED UNLIMITED");
  JobControl lifted(config, grid, 1 << 20);
  d = lifted.after_step(0.1, 0.0);
  EXPECT_FALSE(d.stop || d.save) << "no limit any more";
  if (root) {
    EXPECT_NE(d.note.find("the job's time limit was lifted"), std::string::npos) << d.note;
    EXPECT_EQ(lifted.describe(), "") << "no end to describe";
  }
  EXPECT_FALSE(lifted.after_step(0.1, 0.0).stop);

  setenv("PATH", path.c_str(), 1);
  std::filesystem::remove_all(dir);
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
}

// A validation runs inside a step, before the step's end is answered: the measured margin leaves
// room for one once one is measured, or a job whose validation began just outside the margin
// ran past its limit.
TEST(JobControl, TheMarginHoldsAValidation) {
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("SLURM_JOB_END_TIME", std::to_string(std::time(nullptr) + 600).c_str(), 1);
  gridlm::parallel::GridOptions o;
  const gridlm::parallel::Grid grid = gridlm::parallel::Grid::create(MPI_COMM_WORLD, o);
  RunConfig config;
  EXPECT_FALSE(JobControl(config, grid, 1 << 20).after_step(1.0, 0.0, 590.0).stop)
      << "no validation asked for";
  config.train.eval_every = 5;
  JobControl job(config, grid, 1 << 20);
  EXPECT_FALSE(job.after_step(1.0, 0.0, 3.0).stop) << "a validation of 3 s";
  EXPECT_TRUE(job.after_step(1.0, 0.0, 590.0).stop) << "a validation of 590 s";
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_END_TIME");
}

// squeue that does not answer (a slurmctld down) leaves the end unknown after the wait given,
// rather than holding the ranks waiting for rank 0 until the hang watchdog ends the job.
TEST(JobDeadline, ASqueueThatDoesNotAnswerIsNotWaitedFor) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("gridlm_squeue_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream script(dir + "/squeue");
    script << "#!/bin/sh\nexec sleep 30\n";
  }
  std::filesystem::permissions(dir + "/squeue", std::filesystem::perms::owner_all);
  const std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  setenv("PATH", (dir + ":" + path).c_str(), 1);
  setenv("SLURM_JOB_ID", "42", 1);
  unsetenv("SLURM_JOB_END_TIME");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(read_job_deadline(false, 1.0).has_value());
  EXPECT_FALSE(read_job_deadline(true, 1.0).has_value());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 10.0);
  setenv("PATH", path.c_str(), 1);
  unsetenv("SLURM_JOB_ID");
  std::filesystem::remove_all(dir);
}

// One `scancel --signal=USR2` reaches the ranks on either side of a step's end (at 2 ranks:
// rank 0 before the first step's end, rank 1 after): one save, not one each step.
TEST(JobControl, ASaveSignalReachingTheRanksAtDifferentStepsSavesOnce) {
  unsetenv("SLURM_JOB_ID");
  install_job_signals();
  gridlm::parallel::GridOptions o;
  const gridlm::parallel::Grid grid = gridlm::parallel::Grid::create(MPI_COMM_WORLD, o);
  JobControl job(RunConfig{}, grid, 1 << 20);
  if (grid.rank() == 0) std::raise(SIGUSR2);
  EXPECT_TRUE(job.after_step(0.1, 0.0).save) << "rank 0's signal";
  if (grid.size() > 1) {
    if (grid.rank() == 1) std::raise(SIGUSR2);
    EXPECT_FALSE(job.after_step(0.1, 0.0).save) << "the same request, reaching rank 1 late";
  }
  std::raise(SIGUSR2);
  const JobControl::Decision d = job.after_step(0.1, 0.0);
  EXPECT_TRUE(d.save && !d.stop) << "a second request";
  EXPECT_EQ(d.reason, "SIGUSR2");
  EXPECT_FALSE(job.after_step(0.1, 0.0).save) << "answered";
}
