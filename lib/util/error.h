// Internal error type. Engine code throws specla::Error with a status and a message a user can
// act on; the C shim (lib/api/) turns it into a status code plus the thread's last-error text.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "specla/specla.h"

namespace specla {

class Error : public std::runtime_error {
public:
    Error(specla_status status, std::string message)
        : std::runtime_error(std::move(message)), status_(status) {}
    specla_status status() const noexcept { return status_; }

private:
    specla_status status_;
};

namespace detail {
template <typename... Parts>
std::string concat(Parts &&...parts) {
    std::ostringstream os;
    (os << ... << std::forward<Parts>(parts));
    return os.str();
}
}  // namespace detail

// fail(SPECLA_ERR_IO, "cannot open ", path, ": ", strerror(errno));
template <typename... Parts>
[[noreturn]] void fail(specla_status status, Parts &&...parts) {
    throw Error(status, detail::concat(std::forward<Parts>(parts)...));
}

// Argument checks that read like assertions but report to the user.
template <typename... Parts>
void require(bool ok, specla_status status, Parts &&...parts) {
    if (!ok) fail(status, std::forward<Parts>(parts)...);
}

}  // namespace specla
