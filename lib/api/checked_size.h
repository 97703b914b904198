// Sizes the C API computes from counts a caller passes (rows x vocabulary and the like). A
// product that does not fit a size_t is refused instead of wrapping to a small number that a
// capacity check would then wave through.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/error.h"

namespace specla {

// a * b, or SPECLA_ERR_INVALID_ARGUMENT naming `what` (e.g. "n_tokens x vocab_size").
inline size_t checked_product(size_t a, size_t b, const char *what) {
    require(a == 0 || b <= SIZE_MAX / a, SPECLA_ERR_INVALID_ARGUMENT, what, " = ", a, " x ", b,
            " does not fit in a size_t");
    return a * b;
}

}  // namespace specla
