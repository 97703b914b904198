// Tests that take resources away from the process (an address-space cap, thread limits) run in a
// forked child, so that the test program itself keeps them. The child reports through a pipe;
// a time limit turns a deadlock into a failure instead of a hung suite.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "support/sanitizer.h"

namespace test {

struct ChildResult {
    bool exited = false;     // false: killed by a signal (SIGALRM: it ran past its time)
    int code = -1;           // exit code when exited
    int signal = 0;          // the signal that ended it otherwise
    std::string report;      // everything the child wrote to `out`
};

// Runs body(out) in a forked child that dies of SIGALRM after timeout_s seconds; body's return
// value is the child's exit code. Fork only from a single-threaded point of the test program.
inline ChildResult run_in_child(const std::function<int(FILE *out)> &body, unsigned timeout_s) {
    int fds[2];
    if (pipe(fds) != 0) return {};
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(timeout_s);
        FILE *out = fdopen(fds[1], "w");
        setvbuf(out, nullptr, _IONBF, 0);
        _exit(body(out));
    }
    close(fds[1]);
    ChildResult r;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) r.report.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return r;
}

// Bytes of address space the process has mapped now (VmSize).
inline size_t address_space_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0;
    statm >> pages;
    return pages * size_t(sysconf(_SC_PAGESIZE));
}

// Sets the soft RLIMIT_AS (the hard limit stays, so the cap can be lifted again).
inline bool cap_address_space(rlim_t bytes) {
    rlimit rl{};
    if (getrlimit(RLIMIT_AS, &rl) != 0) return false;
    rl.rlim_cur = bytes;
    return setrlimit(RLIMIT_AS, &rl) == 0;
}

inline bool lift_address_space_cap() { return cap_address_space(RLIM_INFINITY); }

// Threads of this process now.
inline int thread_count() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
}

}  // namespace test
