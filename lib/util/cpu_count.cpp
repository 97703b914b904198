#include "util/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>
#include <thread>

namespace specla {
namespace {

std::string read_text(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// ceil(quota / period) CPUs, or INT_MAX for no quota (also for anything unparsable).
int quota_cpus(long long quota, long long period) {
    if (quota <= 0 || period <= 0) return INT_MAX;
    return int(std::min<long long>((quota + period - 1) / period, INT_MAX));
}

// v2: "max 100000" or "150000 100000".
int cpu_max_limit(const std::string &dir) {
    std::istringstream in(read_text(dir + "/cpu.max"));
    std::string quota;
    long long period = 0;
    if (!(in >> quota >> period) || quota == "max") return INT_MAX;
    try {
        return quota_cpus(std::stoll(quota), period);
    } catch (...) {
        return INT_MAX;
    }
}

// v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
int cfs_limit(const std::string &dir) {
    long long quota = -1, period = 0;
    std::istringstream(read_text(dir + "/cpu.cfs_quota_us")) >> quota;
    std::istringstream(read_text(dir + "/cpu.cfs_period_us")) >> period;
    return quota_cpus(quota, period);
}

// The smallest limit of `dir` and its ancestors up to `root` (a quota on a parent binds too).
template <typename Limit>
int limit_up_to(const std::string &root, std::string path, Limit limit) {
    int cpus = INT_MAX;
    for (;;) {
        cpus = std::min(cpus, limit(root + path));
        if (path.empty() || path == "/") return cpus;
        const size_t slash = path.find_last_of('/');
        path = slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
    }
}

}  // namespace

int usable_cpus_from(const std::string &cgroup_fs, const std::string &proc_self_cgroup, int affinity) {
    int cpus = std::max(affinity, 1);
    std::istringstream lines(proc_self_cgroup);
    std::string line;
    while (std::getline(lines, line)) {
        // "hierarchy-id:controllers:path"; v2 has id 0 and no controllers.
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
        std::string path = line.substr(b + 1);
        if (path == "/") path.clear();
        if (id == "0" && controllers.empty()) {
            cpus = std::min(cpus, limit_up_to(cgroup_fs, path, cpu_max_limit));
            continue;
        }
        std::istringstream names(controllers);
        std::string name;
        bool has_cpu = false;
        while (std::getline(names, name, ',')) has_cpu |= name == "cpu";
        if (!has_cpu) continue;
        // Mounted as "cpu,cpuacct" (or "cpu"); inside a container the process's cgroup is the
        // mount's root, whatever path the host sees.
        for (const std::string &mount : {cgroup_fs + "/" + controllers, cgroup_fs + "/cpu"}) {
            std::ifstream probe(mount + path + "/cpu.cfs_period_us");
            const std::string base = probe ? path : std::string();
            cpus = std::min(cpus, limit_up_to(mount, base, cfs_limit));
        }
    }
    return cpus;
}

int usable_cpus() {
    int affinity = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) affinity = CPU_COUNT(&set);
    if (affinity <= 0) affinity = int(std::max(1u, std::thread::hardware_concurrency()));
    return usable_cpus_from("/sys/fs/cgroup", read_text("/proc/self/cgroup"), affinity);
}

}  // namespace specla
