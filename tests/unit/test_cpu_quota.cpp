// parallel/cpu_quota: the CPUs a CFS quota allows, read from cgroup folders laid out as cgroup v2
// and v1 mount them (written into a scratch folder here; tests/cli/cpu_quota.sh runs gridlm in
// a real cgroup with a quota).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "parallel/cpu_quota.hpp"

using namespace gridlm::parallel;
namespace fs = std::filesystem;

namespace {

class CpuQuota : public testing::Test {
protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("gridlm_cgroup_" +
             std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // Writes `text` to root/relative, making its folders.
  void put(const std::string& relative, const std::string& text) {
    const fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  double quota(const std::string& proc_self_cgroup) {
    return cpu_quota(proc_self_cgroup, root_.string());
  }
  fs::path root_;
};

} // namespace

TEST_F(CpuQuota, V2TakesTheSmallestQuotaOfTheCgroupAndThoseAboveIt) {
  put("cpu.max", "max 100000\n");
  put("job/cpu.max", "150000 100000\n");
  put("job/step/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/job/step\n"), 1.5);
  put("job/step/cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/job/step\n"), 0.5);
}

TEST_F(CpuQuota, V2WithoutAQuotaIsZero) {
  put("cpu.max", "max 100000\n");
  EXPECT_EQ(quota("0::/\n"), 0);
  EXPECT_EQ(quota("0::/not/there\n"), 0);
}

TEST_F(CpuQuota, V1ReadsTheCpuControllersFolder) {
  put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n");
  put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"), 2.0);
  // A host that mounts it as "cpu" (with "cpu,cpuacct" a link, or not there at all).
  fs::rename(root_ / "cpu,cpuacct", root_ / "cpu");
  EXPECT_DOUBLE_EQ(quota("3:cpu,cpuacct:/docker/abc\n"), 2.0);
  // -1 everywhere: no quota.
  put("cpu/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(quota("3:cpu,cpuacct:/docker/abc\n"), 0);
}

TEST_F(CpuQuota, OnlyTheCpuControllerCounts) {
  put("cpuset/a/cpu.cfs_quota_us", "100000\n");
  put("cpuset/a/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(quota("2:cpuset:/a\n"), 0);
}

TEST_F(CpuQuota, UnreadableOrMalformedFilesAreNoQuota) {
  put("cpu.max", "lots 100000\n");
  EXPECT_EQ(quota("0::/\n"), 0);
  put("cpu.max", "100000 0\n");
  EXPECT_EQ(quota("0::/\n"), 0);
  put("cpu/cpu.cfs_quota_us", "100000\n"); // no period file
  EXPECT_EQ(quota("1:cpu:/\n"), 0);
  EXPECT_EQ(quota("garbage without colons\n\n"), 0);
}

TEST(CpuQuotaHere, ReadsThisProcessWithoutFailing) { EXPECT_GE(cpu_quota(), 0.0); }
