// The CPUs a CFS bandwidth quota lets this process use: a container's `--cpus`, a Kubernetes
// CPU limit, a systemd CPUQuota. Its affinity mask may show every CPU of the host while the
// quota allows two, so a node's cores for parallel.wait are the smaller of the two.
#pragma once

#include <string>

namespace gridlm::parallel {

// The smallest quota / period of the process's cgroup and the cgroups above it, in cgroup v2
// (cpu.max) or v1 (cpu.cfs_quota_us over cpu.cfs_period_us); 0 when none is set or none can
// be read.
double cpu_quota();

// The same from the text of /proc/self/cgroup and a cgroup file system mounted at `root`
// ("/sys/fs/cgroup"; v1 controllers in folders under it, such as "cpu" or "cpu,cpuacct").
double cpu_quota(const std::string& proc_self_cgroup, const std::string& root);

} // namespace gridlm::parallel
