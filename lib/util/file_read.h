// Opening and reading the files of a model folder without trusting them. A folder may hold a
// named pipe (open() would wait for a writer forever), a symlink to /dev/zero (a read would never
// end) or a file of any size; every file the library reads goes through here, which refuses
// anything but a regular file and caps what is read.
//
// Header-only on purpose: sources that test programs and fuzzers compile on their own (the
// safetensors reader) use it without needing another object file.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "specla/specla.h"
#include "util/error.h"

namespace specla {

// Whether anything is at `path` (symlinks followed). Does not open it, so it cannot block; what
// it is gets checked when ReadOnlyFile opens it.
inline bool path_exists(const std::string &path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// A regular file opened for reading; closed on destruction.
class ReadOnlyFile {
public:
    // Opens without blocking and checks the opened descriptor (not the path, which could be
    // swapped in between) for a regular file. Throws SPECLA_ERR_IO naming the path otherwise.
    explicit ReadOnlyFile(const std::string &path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        require(fd_ >= 0, SPECLA_ERR_IO, "cannot open ", path, ": ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd_, &st) != 0) {
            const int err = errno;
            ::close(fd_);
            fail(SPECLA_ERR_IO, "cannot inspect ", path, ": ", std::strerror(err));
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd_);
            fail(SPECLA_ERR_IO, path, " is ", kind_of(st.st_mode), ", not a regular file");
        }
        size_ = uint64_t(st.st_size);
    }
    ~ReadOnlyFile() { ::close(fd_); }
    ReadOnlyFile(const ReadOnlyFile &) = delete;
    ReadOnlyFile &operator=(const ReadOnlyFile &) = delete;

    int fd() const { return fd_; }
    uint64_t size() const { return size_; }  // as fstat saw it when opened
    const std::string &path() const { return path_; }

    // The whole file. Refuses (SPECLA_ERR_UNSUPPORTED naming `limit_name`) a file larger than
    // `max_bytes`, also one that grows past it while being read.
    std::string read_all(uint64_t max_bytes, const char *limit_name) const {
        require(size_ <= max_bytes, SPECLA_ERR_UNSUPPORTED, path_, " is ", size_, " bytes, larger than ",
                limit_name, " (", max_bytes, ")");
        std::string text(size_t(size_), '\0');
        size_t got = 0;
        for (;;) {
            if (got == text.size()) {  // the file may have grown (or fstat said 0, as in /proc)
                require(text.size() <= max_bytes, SPECLA_ERR_UNSUPPORTED, path_, " is larger than ",
                        limit_name, " (", max_bytes, ")");
                text.resize(text.size() + 4096);
            }
            const ssize_t n = ::read(fd_, &text[got], text.size() - got);
            if (n < 0 && errno == EINTR) continue;
            require(n >= 0, SPECLA_ERR_IO, "cannot read ", path_, ": ", std::strerror(errno));
            if (n == 0) break;
            got += size_t(n);
        }
        text.resize(got);
        require(got <= max_bytes, SPECLA_ERR_UNSUPPORTED, path_, " is larger than ", limit_name, " (",
                max_bytes, ")");
        return text;
    }

private:
    static const char *kind_of(mode_t mode) {
        if (S_ISDIR(mode)) return "a folder";
        if (S_ISFIFO(mode)) return "a named pipe";
        if (S_ISCHR(mode)) return "a character device";
        if (S_ISBLK(mode)) return "a block device";
        if (S_ISSOCK(mode)) return "a socket";
        return "a special file";
    }

    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

// The text of a JSON file (config.json, tokenizer.json, side files, the shard index).
inline std::string read_json_file(const std::string &path) {
    return ReadOnlyFile(path).read_all(SPECLA_LIMIT_JSON_FILE_BYTES, "SPECLA_LIMIT_JSON_FILE_BYTES");
}

}  // namespace specla
