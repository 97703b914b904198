// How many CPUs this process can actually use: the smaller of its affinity mask and its cgroup's
// CPU bandwidth quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up,
// for the process's cgroup and every ancestor). A container limited to 2 CPUs on a 64-core host
// has 2, not 64; threads beyond that only wait for each other.
#pragma once

#include <string>

namespace specla {

int usable_cpus();

// The same from given sources, for tests: `cgroup_fs` is where the cgroup hierarchy is mounted
// (/sys/fs/cgroup), `proc_self_cgroup` the text of /proc/self/cgroup, `affinity` the number of
// CPUs in the affinity mask. Missing or unreadable files mean no limit from them.
int usable_cpus_from(const std::string &cgroup_fs, const std::string &proc_self_cgroup, int affinity);

}  // namespace specla
