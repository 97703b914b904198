#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace specla {
namespace {

struct LogSink {
    std::mutex mutex;
    specla_log_callback callback = nullptr;
    void *user_data = nullptr;
    std::atomic<int> min_level{SPECLA_LOG_WARN};
};

LogSink &sink() {
    static LogSink s;
    return s;
}

const char *level_name(specla_log_level level) {
    switch (level) {
        case SPECLA_LOG_DEBUG: return "debug";
        case SPECLA_LOG_INFO: return "info";
        case SPECLA_LOG_WARN: return "warning";
        default: return "error";
    }
}

}  // namespace

bool log_enabled(specla_log_level level) { return level >= sink().min_level.load(); }

void log_message(specla_log_level level, const std::string &message) {
    LogSink &s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.callback) {
        s.callback(level, message.c_str(), s.user_data);
    } else {
        std::fprintf(stderr, "specla %s: %s\n", level_name(level), message.c_str());
    }
}

}  // namespace specla

extern "C" SPECLA_API void specla_set_log_callback(specla_log_callback callback, void *user_data,
                                                   specla_log_level min_level) {
    specla::LogSink &s = specla::sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.callback = callback;
    s.user_data = user_data;
    s.min_level = callback ? min_level : SPECLA_LOG_WARN;
}
