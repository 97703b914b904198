// Process-wide logging through the user's callback (specla_set_log_callback).
#pragma once

#include <string>

#include "specla/specla.h"
#include "util/error.h"

namespace specla {

bool log_enabled(specla_log_level level);
void log_message(specla_log_level level, const std::string &message);

template <typename... Parts>
void log(specla_log_level level, Parts &&...parts) {
    if (log_enabled(level)) log_message(level, detail::concat(std::forward<Parts>(parts)...));
}

}  // namespace specla
