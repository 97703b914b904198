// The CUDA backend lives in a module that libspecla loads on demand (lib/engine/cuda_module.h).
// Through the public API: what the module logs arrives at the log callback installed in the
// library (one logger, not a copy inside the module), and what it throws arrives as the status
// and message it was thrown with. Without a GPU the module's backend constructor throws
// SPECLA_ERR_BACKEND_UNAVAILABLE; with one the model loads.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <mutex>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/fixture.h"

namespace {

struct LogCapture {
    std::mutex mutex;
    std::vector<std::string> lines;
    static void callback(specla_log_level level, const char *message, void *user_data) {
        auto *self = static_cast<LogCapture *>(user_data);
        std::lock_guard<std::mutex> lock(self->mutex);
        self->lines.push_back(std::to_string(int(level)) + " " + message);
    }
    bool has(specla_log_level level, const std::string &text) {
        std::lock_guard<std::mutex> lock(mutex);
        for (const std::string &l : lines)
            if (l.rfind(std::to_string(int(level)) + " ", 0) == 0 && l.find(text) != std::string::npos) return true;
        return false;
    }
};

bool gpu_present() {
    struct stat st {};
    return stat("/dev/nvidiactl", &st) == 0 || stat("/dev/nvidia0", &st) == 0;
}

}  // namespace

TEST_CASE("the CUDA module logs through the library's callback and reports through its statuses") {
    if (!specla_has_cuda()) {
        MESSAGE("this build has no CUDA backend: nothing to check");
        return;
    }
    LogCapture log;
    specla_set_log_callback(LogCapture::callback, &log, SPECLA_LOG_DEBUG);
    specla_model_params p = specla_model_default_params();
    p.backend = SPECLA_BACKEND_CUDA;
    specla_model *model = nullptr;
    const specla_status st = specla_model_load(test::fixture_dir("gdn_tiny_a").c_str(), &p, &model);
    const std::string error = specla_last_error();
    specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
    INFO("status ", int(st), ": ", error);

    // Logged inside the module (lib/backend/cuda/cuda_backend.cpp).
    CHECK(log.has(SPECLA_LOG_DEBUG, "creating the CUDA backend on device 0 (kernels for "));
    if (gpu_present()) {
        REQUIRE(st == SPECLA_OK);
        CHECK(log.has(SPECLA_LOG_INFO, "CUDA backend on device 0"));
        specla_model_free(model);
    } else {
        // Thrown inside the module by the backend's constructor, caught by the library's C shim.
        CHECK(st == SPECLA_ERR_BACKEND_UNAVAILABLE);
        CHECK(error.find("the CUDA backend found no") != std::string::npos);
        CHECK(model == nullptr);
    }
}
