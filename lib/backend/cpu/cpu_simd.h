// Instruction sets of the CPU kernels. The engine is compiled for the target's baseline ISA (plain
// x86-64 = SSE2, or aarch64 = NEON) so the library loads and runs on every CPU of its architecture.
// The few kernels where decoding spends its time carry SPECLA_CPU_KERNEL: on x86-64 the compiler
// emits them twice from the one source, once for the baseline and once for x86-64-v3 (AVX2, FMA,
// F16C), and the loader picks the clone the running CPU supports (an ifunc resolved with cpuid).
//
// Their arithmetic is written with the compiler's generic vectors (8 floats), which become two
// SSE2 or NEON registers on the baseline and one AVX register in the v3 clone; the same source and
// the same summation order either way. The v3 clone contracts a*b+c into one FMA, the baseline
// rounds the product first: the two paths agree to float rounding, not bit for bit (each is
// deterministic on its own). Helpers called by a kernel must be SPECLA_CPU_INLINE so that they are
// compiled inside each clone rather than once for the baseline.
#pragma once

#include <cstdint>
#include <cstring>

// ThreadSanitizer builds do without the clones: their ifunc resolvers run while the dynamic loader
// relocates the library, before TSan's runtime is set up, and the instrumented resolver crashes.
#if defined(__SANITIZE_THREAD__)
#define SPECLA_CPU_NO_DISPATCH 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPECLA_CPU_NO_DISPATCH 1
#endif
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SPECLA_CPU_NO_DISPATCH)
#define SPECLA_CPU_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPECLA_CPU_KERNEL
#endif
#define SPECLA_CPU_INLINE inline __attribute__((always_inline))

// The kernels pass 32-byte vectors by value only to helpers that are always inlined, so GCC's note
// that such a call changes ABI without AVX does not apply (left off in every file that includes
// this one: the warning comes where the templates are instantiated).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace specla {
namespace cpu {
namespace simd {

constexpr int kLanes = 8;
typedef float f32x8 __attribute__((vector_size(32)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));

SPECLA_CPU_INLINE f32x8 load8(const float *p) {
    f32x8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Weight rows are read in blocks of 16 values, as two vectors of 8 (half 0: values 0-7, half 1:
// values 8-15). A BF16 block is stored packed (pack_bf16_blocks) as eight 32-bit words, word k
// holding value k in its low and value k+8 in its high 16 bits, so that each half is one integer
// op on the words (shift up, or clear the low bits: bf16 -> fp32 is exact), not a widening
// shuffle, which the generic vectors lower to four shuffles and which would bound the product.
constexpr int kBlock = 2 * kLanes;
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the packed bf16 blocks assume little endian");

template <int Half>
SPECLA_CPU_INLINE f32x8 load_block_half(const float *block) {
    return load8(block + Half * kLanes);
}
template <int Half>
SPECLA_CPU_INLINE f32x8 load_block_half(const uint16_t *block) {
    u32x8 words;
    std::memcpy(&words, block, sizeof words);
    const u32x8 bits = Half == 0 ? words << 16 : words & 0xffff0000u;
    f32x8 v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

// Sum of the lanes, halves first: (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then the two.
SPECLA_CPU_INLINE float hsum(f32x8 v) {
    const float a = v[0] + v[4], b = v[1] + v[5], c = v[2] + v[6], d = v[3] + v[7];
    return (a + c) + (b + d);
}

}  // namespace simd
}  // namespace cpu
}  // namespace specla
