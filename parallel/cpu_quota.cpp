// Reading a CFS CPU quota from the cgroup file system, v2 or v1.
#include "parallel/cpu_quota.hpp"

#include <fstream>
#include <sstream>
#include <vector>

namespace gridlm::parallel {
namespace {

// "/a/b" -> {"/a/b", "/a", ""}: a cgroup and those above it, as suffixes of its mount folder.
std::vector<std::string> self_and_parents(std::string path) {
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  std::vector<std::string> out;
  for (;;) {
    out.push_back(path);
    if (path.empty()) return out;
    path.erase(path.rfind('/'));
  }
}

bool read_text(const std::string& file, std::string& text) {
  std::ifstream in(file);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  text = s.str();
  return true;
}

// quota / period of one cgroup folder; 0 when it sets none.
double v2_quota(const std::string& dir) {
  std::string text, quota;
  double period = 0;
  if (!read_text(dir + "/cpu.max", text)) return 0;
  std::istringstream in(text);
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  try {
    return std::stod(quota) / period;
  } catch (const std::exception&) {
    return 0;
  }
}

double v1_quota(const std::string& dir) {
  std::string q, p;
  if (!read_text(dir + "/cpu.cfs_quota_us", q) || !read_text(dir + "/cpu.cfs_period_us", p)) {
    return 0;
  }
  try {
    const double quota = std::stod(q), period = std::stod(p);
    return quota > 0 && period > 0 ? quota / period : 0; // -1: no quota
  } catch (const std::exception&) {
    return 0;
  }
}

bool names_cpu(const std::string& controllers) {
  std::istringstream in(controllers);
  for (std::string c; std::getline(in, c, ',');)
    if (c == "cpu") return true;
  return false;
}

void keep_smallest(double& best, double q) {
  if (q > 0 && (best == 0 || q < best)) best = q;
}

} // namespace

double cpu_quota(const std::string& proc_self_cgroup, const std::string& root) {
  double best = 0;
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      // v2: mounted at root itself (a v1 host keeps it under root/unified).
      for (const std::string& mount : {root, root + "/unified"})
        for (const std::string& p : self_and_parents(path))
          keep_smallest(best, v2_quota(mount + p));
    } else if (names_cpu(controllers)) {
      for (const std::string& mount : {root + "/" + controllers, root + "/cpu"})
        for (const std::string& p : self_and_parents(path))
          keep_smallest(best, v1_quota(mount + p));
    }
  }
  return best;
}

double cpu_quota() {
  std::string text;
  return read_text("/proc/self/cgroup", text) ? cpu_quota(text, "/sys/fs/cgroup") : 0;
}

} // namespace gridlm::parallel
