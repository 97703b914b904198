// Whether this test binary is built with a sanitizer: such builds run the engine several times
// slower, so checks of wall-clock latency scale their bounds (the Release suite holds the real
// ones) and checks that need the process's memory map (address-space caps) are skipped.
#pragma once

namespace test {

#if defined(__SANITIZE_ADDRESS__)  // GCC
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;
// How much slower instrumented code runs, for time bounds: measured under ASan + UBSan on two
// shared cores, an 8-token CPU prompt block takes about 75 ms instead of about 12 ms.
constexpr double kSanitizerSlowdown = kSanitized ? 8.0 : 1.0;

}  // namespace test
