// Asynchronous global -> shared copies (cp.async, sm_80+): many loads in flight per thread without
// registers to hold them, completed by a wait and, where other threads read the data, a barrier.
// Device code only.
#pragma once

#include <stdint.h>

namespace specla {
namespace kern {

// 16 bytes; with pred false nothing is read and the 16 bytes are zero-filled.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool pred) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int bytes = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes)
                 : "memory");
}
// 4 bytes (one float or int); with pred false nothing is read and the word is zero-filled.
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, bool pred) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int bytes = pred ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Waits for every copy this thread issued, committed or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace kern
}  // namespace specla
