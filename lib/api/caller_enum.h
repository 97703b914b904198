// Enum fields and arguments a caller passes. C lets a program store any int in an enum field;
// in C++ reading a value outside the enumerators' range through the enum type is undefined
// (UBSan's -fsanitize=enum stops there), so the API reads what the caller wrote as the int it is
// and checks it before anything converts it back to the enum.
#pragma once

#include <cstring>
#include <type_traits>

namespace specla {

template <class E>
int caller_enum(const E &value) {
    static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int), "a C enum of the public header");
    int raw;
    std::memcpy(&raw, &value, sizeof raw);
    return raw;
}

}  // namespace specla
