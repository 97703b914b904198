// Size-prefixed structs (the header's conventions): every params and info struct begins with
// `size_t struct_size`, the sizeof the caller was compiled with. A program built against an older
// header passes a shorter struct, one built against a newer header a longer one; these three
// helpers are the only code that touches a caller's struct as bytes, so neither case ever reads
// or writes past the caller's struct_size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "util/error.h"

namespace specla {

// The smallest struct_size: the size field itself. Below it (0 included) the caller did not set it.
constexpr size_t kMinStructSize = sizeof(size_t);

// The struct_size a caller wrote, checked against the floor; SPECLA_ERR_INVALID_ARGUMENT names the struct.
inline size_t caller_struct_size(const void *caller, const char *struct_name) {
    size_t size = 0;
    std::memcpy(&size, caller, sizeof size);  // struct_size is the first field of every such struct
    require(size >= kMinStructSize, SPECLA_ERR_INVALID_ARGUMENT, struct_name, ".struct_size is ", size,
            ", smaller than the size field itself: set it to sizeof(", struct_name,
            ") (the *_params_init functions and *_default_params do)");
    return size;
}

// The caller's params: `defaults`, overwritten by the first min(caller's struct_size, sizeof(T))
// bytes of *caller (so fields an older caller does not know keep their defaults); NULL means the
// defaults. A caller struct larger than ours is accepted when the bytes beyond ours are all zero
// (fields of a newer header left at zero), else SPECLA_ERR_UNSUPPORTED naming the struct.
template <class T>
T read_params(const T *caller, const T &defaults, const char *struct_name) {
    T ours = defaults;
    if (!caller) return ours;
    const size_t size = caller_struct_size(caller, struct_name);
    if (size > sizeof(T)) {
        const unsigned char *tail = reinterpret_cast<const unsigned char *>(caller) + sizeof(T);
        require(std::all_of(tail, tail + (size - sizeof(T)), [](unsigned char b) { return b == 0; }),
                SPECLA_ERR_UNSUPPORTED, struct_name, ".struct_size is ", size, " but this library's ", struct_name,
                " has ", sizeof(T), " bytes, and the fields beyond them are set: the program was built against "
                "a newer specla.h than the library it runs with");
    }
    std::memcpy(static_cast<void *>(&ours), caller, std::min(size, sizeof(T)));
    ours.struct_size = sizeof(T);
    return ours;
}

// Fill an info struct the caller passed: the first min(caller's struct_size, sizeof(T)) bytes of
// `ours`, with the caller's struct_size kept; bytes beyond ours (a newer caller's fields) are left
// as they are.
template <class T>
void write_info(T *caller, T ours, const char *struct_name) {
    const size_t size = caller_struct_size(caller, struct_name);
    ours.struct_size = size;
    std::memcpy(static_cast<void *>(caller), &ours, std::min(size, sizeof(T)));
}

// *_params_init: the caller's struct_size bytes at `caller` hold `defaults` (the part of them that
// fits), zeros beyond ours (what a newer header's fields look like to this library), and
// struct_size.
template <class T>
void init_params(T *caller, size_t struct_size, T defaults, const char *struct_name) {
    require(caller != nullptr, SPECLA_ERR_INVALID_ARGUMENT, struct_name, " pointer must not be NULL");
    require(struct_size >= kMinStructSize, SPECLA_ERR_INVALID_ARGUMENT, "struct_size of ", struct_name, " is ",
            struct_size, ", smaller than the size field itself: pass sizeof(", struct_name, ")");
    defaults.struct_size = struct_size;
    unsigned char *bytes = reinterpret_cast<unsigned char *>(caller);
    std::memcpy(bytes, &defaults, std::min(struct_size, sizeof(T)));
    if (struct_size > sizeof(T)) std::memset(bytes + sizeof(T), 0, struct_size - sizeof(T));
}

}  // namespace specla
