// The few warp- and block-level primitives the tensor-core kernels use, written once for both
// targets: under nvcc they are the CUDA intrinsics and PTX; under a host compiler they are calls
// into the SIMT emulator (tests/testing/simt_emulator), which runs a kernel's threads as fibers on
// the CPU. That lets this machine, which has no GPU, run the kernels' index and fragment arithmetic
// against the CPU kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "core/macros.h"

#if defined(__CUDACC__)
#define TS_SIMT __device__ __forceinline__
#define TS_UNROLL _Pragma("unroll")
#define TS_UNROLL8 _Pragma("unroll 8")
#else
#define TS_SIMT inline
#define TS_UNROLL
#define TS_UNROLL8
#endif

namespace tessera::simt {

// 16 bytes moved as one vector access (ld.global.v4 / ld.shared.v4 when aligned).
struct alignas(16) Pack16 {
  uint32_t w[4];
};

// Two 16-bit floats in one 32-bit register, `lo` in bits 0-15 (the element with the lower column
// index in every mma fragment).
#if !defined(__CUDACC__)
// A GPU faults on a misaligned vector access; the emulator says so.
void check_aligned(const void* p, size_t bytes);
#endif

// Memory accesses that are single vector loads and stores on the GPU and alias-safe copies on the
// host. Addresses must be aligned to the access size.
TS_SIMT uint32_t load_u32(const uint16_t* p) {
#if defined(__CUDACC__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  check_aligned(p, sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

TS_SIMT Pack16 load16(const void* p) {
#if defined(__CUDACC__)
  return *reinterpret_cast<const Pack16*>(p);
#else
  check_aligned(p, sizeof(Pack16));
  Pack16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

TS_SIMT void store16(void* p, const Pack16& v) {
#if defined(__CUDACC__)
  *reinterpret_cast<Pack16*>(p) = v;
#else
  check_aligned(p, sizeof(Pack16));
  std::memcpy(p, &v, sizeof(v));
#endif
}

// Whether the 16-bit type is bf16 (else IEEE half): picks the mma variant.
template <typename T>
inline constexpr bool kIsBFloat16 = std::is_same_v<T, BFloat16>;

template <typename T>
TS_SIMT uint32_t pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  // One cvt.rn (round to nearest even, as the software conversion) for both halves: the first
  // source goes to the upper half.
  uint32_t r;
  if constexpr (kIsBFloat16<T>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
#else
  return uint32_t(T(lo).bits) | (uint32_t(T(hi).bits) << 16);
#endif
}

// e^x where a few ulp of error are fine (softmax numerators): the hardware ex2 on the GPU.
TS_SIMT float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return expf(x);
#endif
}

#if defined(__CUDACC__)

TS_SIMT void sync_block() { __syncthreads(); }
TS_SIMT void sync_warp() { __syncwarp(); }

// Warp shuffles over all 32 lanes (every lane must call them): the value of lane ^ lane_mask, of
// lane + delta (a lane's own value where that is past 31), of lane src.
template <typename V>
TS_SIMT V shfl_xor(V v, int lane_mask) {
  return __shfl_xor_sync(0xFFFFFFFFu, v, lane_mask);
}
template <typename V>
TS_SIMT V shfl_down(V v, int delta) {
  return __shfl_down_sync(0xFFFFFFFFu, v, delta);
}
template <typename V>
TS_SIMT V shfl(V v, int src_lane) {
  return __shfl_sync(0xFFFFFFFFu, v, src_lane);
}

TS_SIMT float atomic_add(float* p, float v) { return atomicAdd(p, v); }
TS_SIMT int32_t atomic_add(int32_t* p, int32_t v) { return atomicAdd(p, v); }
TS_SIMT int64_t atomic_add(int64_t* p, int64_t v) {
  return int64_t(
      atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v)));
}
TS_SIMT int32_t atomic_exch(int32_t* p, int32_t v) { return atomicExch(p, v); }

// D = A (16 x 16, row) * B (16 x 8, col) + C with f32 accumulation, PTX mma.m16n8k16. With
// g = lane / 4 and t = lane % 4: a[0] holds A(g, 2t..2t+1), a[1] A(g+8, 2t..), a[2] A(g, 2t+8..),
// a[3] A(g+8, 2t+8..); b[0] holds B(2t..2t+1, g), b[1] B(2t+8..2t+9, g); c[0..1] is C(g, 2t..2t+1),
// c[2..3] C(g+8, 2t..2t+1).
template <typename T>
TS_SIMT void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (kIsBFloat16<T>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

#else  // host: the emulator in tests/testing/simt_emulator.cc

void sync_block();
void sync_warp();

// The emulator moves 8-byte lane values; the templates below carry any value of up to 8 bytes.
enum class Shuffle { xor_mask, down, index };
uint64_t shuffle_bits(uint64_t bits, Shuffle kind, int arg);

template <typename V>
inline V shuffle_value(V v, Shuffle kind, int arg) {
  static_assert(sizeof(V) <= 8 && std::is_trivially_copyable_v<V>,
                "shuffles move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(V));
  bits = shuffle_bits(bits, kind, arg);
  std::memcpy(&v, &bits, sizeof(V));
  return v;
}
template <typename V>
inline V shfl_xor(V v, int lane_mask) {
  return shuffle_value(v, Shuffle::xor_mask, lane_mask);
}
template <typename V>
inline V shfl_down(V v, int delta) {
  return shuffle_value(v, Shuffle::down, delta);
}
template <typename V>
inline V shfl(V v, int src_lane) {
  return shuffle_value(v, Shuffle::index, src_lane);
}

// Fibers switch only at barriers, so a plain read-modify-write is atomic under the emulator.
template <typename V>
inline V atomic_add(V* p, V v) {
  const V old = *p;
  *p = old + v;
  return old;
}
inline int32_t atomic_exch(int32_t* p, int32_t v) {
  const int32_t old = *p;
  *p = v;
  return old;
}
void mma_16816_emulated(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16);

template <typename T>
inline void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_16816_emulated(c, a, b, kIsBFloat16<T>);
}

#endif

// Blocks for a grid-stride loop over n items, per_block items per block: at least 1, at most cap
// (the loop covers the rest).
TS_HOST_DEVICE inline int64_t grid_blocks(int64_t n, int64_t per_block, int64_t cap) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return blocks < 1 ? 1 : (blocks > cap ? cap : blocks);
}

// Sum and max over the 32 lanes of a warp, returned to every lane.
template <typename V>
TS_SIMT V warp_sum(V v) {
  for (int o = 16; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}
TS_SIMT float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, shfl_xor(v, o));
  return v;
}

// Sum of v over a block of `threads` threads (a multiple of 32, at most 1024), returned to every
// thread; `scratch` is 32 values of shared memory. Every thread of the block must call it.
template <typename V>
TS_SIMT V block_sum(V v, V* scratch, int tid, int threads) {
  const int lane = tid & 31, warp = tid >> 5;
  v = warp_sum(v);
  sync_block();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  sync_block();
  return warp_sum(lane < (threads >> 5) ? scratch[lane] : V(0));
}

}  // namespace tessera::simt
