#include "util/log.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace specla {
namespace {

// The installed sink and the calls in flight to it. The user's callback runs with no lock held
// (it may call back into the library: log, load a model, replace the sink); the counts let
// specla_set_log_callback wait until calls to the sinks it replaced have returned, so that their
// user_data may be released afterwards.
struct LogSink {
    std::mutex mutex;
    std::condition_variable retired_returned;
    specla_log_callback callback = nullptr;
    void *user_data = nullptr;
    uint64_t generation = 0;  // bumped by every specla_set_log_callback
    int current_calls = 0;    // calls in flight to the installed sink
    int retired_calls = 0;    // calls in flight to sinks replaced since they started
    std::atomic<int> min_level{SPECLA_LOG_WARN};
};

LogSink &sink() {
    static LogSink s;
    return s;
}

// How many callback calls this thread is inside (a callback that logs or replaces the sink).
thread_local int t_callback_depth = 0;

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
    specla_log_callback callback;
    void *user_data;
    uint64_t generation;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        callback = s.callback;
        user_data = s.user_data;
        generation = s.generation;
        if (callback) ++s.current_calls;
    }
    if (!callback) {
        std::fprintf(stderr, "specla %s: %s\n", level_name(level), message.c_str());
        return;
    }
    // Counted out again even if a C++ callback throws through the library.
    struct InFlight {
        LogSink &s;
        uint64_t generation;
        InFlight(LogSink &sink, uint64_t g) : s(sink), generation(g) { ++t_callback_depth; }
        ~InFlight() {
            --t_callback_depth;
            std::lock_guard<std::mutex> lock(s.mutex);
            if (generation == s.generation) --s.current_calls;
            else if (--s.retired_calls == 0) s.retired_returned.notify_all();
        }
    } in_flight(s, generation);
    callback(level, message.c_str(), user_data);
}

}  // namespace specla

extern "C" SPECLA_API void specla_set_log_callback(specla_log_callback callback, void *user_data,
                                                   specla_log_level min_level) {
    specla::LogSink &s = specla::sink();
    std::unique_lock<std::mutex> lock(s.mutex);
    s.callback = callback;
    s.user_data = user_data;
    s.min_level = callback ? min_level : SPECLA_LOG_WARN;
    ++s.generation;
    s.retired_calls += s.current_calls;
    s.current_calls = 0;
    // From inside a callback, waiting would wait for that very call: the replaced sink may then
    // still be running elsewhere when this returns (documented in specla.h).
    if (specla::t_callback_depth == 0) s.retired_returned.wait(lock, [&] { return s.retired_calls == 0; });
}
