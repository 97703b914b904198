// Shared by the fuzz targets: what counts as a finding besides a sanitizer report, and a way to
// hand fuzz input to code that reads files.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "specla/specla.h"
#include "util/error.h"

namespace fuzz {

// Stops the run with a message; libFuzzer saves the input that got here as a crasher.
[[noreturn]] inline void finding(const std::string &what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
    std::abort();
}

// Refusing bad input is the expected outcome, but it must be a user-facing status with a message:
// SPECLA_ERR_INTERNAL means the library reports a bug of its own.
inline void check_refusal(specla_status status, const char *message) {
    if (status == SPECLA_OK) finding("a refusal with status SPECLA_OK");
    if (status == SPECLA_ERR_INTERNAL) finding(std::string("SPECLA_ERR_INTERNAL: ") + message);
    if (message == nullptr || *message == '\0') finding("a refusal without a message");
}
inline void check_refusal(const specla::Error &e) { check_refusal(e.status(), e.what()); }

// An anonymous in-memory file holding `data`, for parsers that take a path: open it through
// path(). Nothing touches the disk, so many thousand runs per second stay cheap.
class MemFile {
public:
    MemFile(const uint8_t *data, size_t size) : fd_(memfd_create("fuzz-input", MFD_CLOEXEC)) {
        if (fd_ < 0) finding("memfd_create failed");
        for (size_t done = 0; done < size;) {
            const ssize_t n = ::write(fd_, data + done, size - done);
            if (n <= 0) finding("write to memfd failed");
            done += size_t(n);
        }
    }
    ~MemFile() { ::close(fd_); }
    MemFile(const MemFile &) = delete;
    MemFile &operator=(const MemFile &) = delete;
    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
    int fd_;
};

}  // namespace fuzz
