// The SIMT emulator itself: barriers order shared-memory traffic, shuffles exchange lanes, the
// m16n8k16 product follows PTX's fragment layout (checked against a plain matrix product through
// the loaders the attention kernels use), and GPU-fatal mistakes (divergent barriers, misaligned
// vector accesses, reading shared memory before writing it) are reported, not hidden.
#include "tests/testing/simt_emulator.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/attention_mma_body.cuh"
#include "kernels/cuda/simt.cuh"

namespace {

using namespace tessera;

TEST_CASE("simt: a block barrier orders shared memory across warps", "[simt]") {
  std::vector<float> out(2 * 96);
  simt::emulate(2, 96, 96 * sizeof(float), [&](int64_t block, int tid, unsigned char* shared) {
    float* s = reinterpret_cast<float*>(shared);
    s[tid] = float(block * 1000 + tid);
    simt::sync_block();
    out[size_t(block * 96 + tid)] = s[95 - tid];  // written by another warp
  });
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 96; ++t) REQUIRE(out[size_t(b * 96 + t)] == float(b * 1000 + 95 - t));
  }
}

TEST_CASE("simt: shfl_xor exchanges lanes within each warp", "[simt]") {
  std::vector<float> sums(64), swapped(64);
  simt::emulate(1, 64, 0, [&](int64_t, int tid, unsigned char*) {
    float v = float(tid);
    swapped[size_t(tid)] = simt::shfl_xor(v, 5);
    for (int o = 16; o > 0; o >>= 1) v += simt::shfl_xor(v, o);
    sums[size_t(tid)] = v;
  });
  for (int t = 0; t < 64; ++t) {
    REQUIRE(swapped[size_t(t)] == float((t & ~31) | ((t & 31) ^ 5)));
    REQUIRE(sums[size_t(t)] == float(t < 32 ? 496 : 32 * 32 + 496));
  }
}

TEST_CASE("simt: shfl_down, shfl, block_sum and atomics behave as on a GPU", "[simt]") {
  std::vector<int64_t> down(64), bcast(64);
  std::vector<double> total(96);
  int32_t counter = 0;
  simt::emulate(1, 96, 32 * sizeof(double), [&](int64_t, int tid, unsigned char* shared) {
    const int64_t v = int64_t(tid) << 33;  // needs all 8 bytes
    if (tid < 64) {
      down[size_t(tid)] = simt::shfl_down(v, 3);
      bcast[size_t(tid)] = simt::shfl(v, 7);
    }
    total[size_t(tid)] = simt::block_sum(double(tid), reinterpret_cast<double*>(shared), tid, 96);
    simt::atomic_add(&counter, 2);
  });
  for (int t = 0; t < 64; ++t) {
    const int lane = t & 31, src_down = lane + 3 < 32 ? t + 3 : t;
    REQUIRE(down[size_t(t)] == int64_t(src_down) << 33);
    REQUIRE(bcast[size_t(t)] == int64_t((t & ~31) | 7) << 33);
  }
  for (double x : total) REQUIRE(x == 95.0 * 96.0 / 2.0);
  REQUIRE(counter == 192);
}

// A (16 x 16) and B (16 x 8) in shared tiles read through the attention loaders: A row-major, B
// stored as its transpose (8 rows of 16), as K is for S = Q K^T.
template <typename T>
void check_mma() {
  using namespace kernels::cuda::attention_mma;
  constexpr int kLd = 24;  // padded like the kernels' tiles
  std::vector<float> a(16 * 16), b(16 * 8);
  for (int i = 0; i < 16 * 16; ++i) a[size_t(i)] = float(T(float((i * 37) % 29 - 14) / 8.0f));
  for (int i = 0; i < 16 * 8; ++i) b[size_t(i)] = float(T(float((i * 11) % 23 - 11) / 4.0f));
  std::vector<float> got(16 * 8, -1.0f);
  simt::emulate(1, 32, sizeof(uint16_t) * (16 + 8) * kLd,
                [&](int64_t, int lane, unsigned char* shared) {
                  uint16_t* as = reinterpret_cast<uint16_t*>(shared);
                  uint16_t* bt = as + 16 * kLd;
                  for (int i = lane; i < 16 * 16; i += 32)
                    as[(i / 16) * kLd + i % 16] = T(a[size_t(i)]).bits;
                  for (int i = lane; i < 16 * 8; i += 32)
                    bt[(i % 8) * kLd + i / 8] = T(b[size_t(i)]).bits;  // B(k, n) at row n
                  simt::sync_warp();
                  const int g = lane / 4, tig = lane % 4;
                  uint32_t af[4], bf[2];
                  load_a<kLd>(as, g, 0, tig, af);
                  load_b<kLd>(bt, 0, 0, g, tig, bf);
                  float c[4] = {1.0f, 2.0f, 3.0f, 4.0f};  // accumulates onto C
                  simt::mma_16816<T>(c, af, bf);
                  for (int e = 0; e < 4; ++e) {
                    const int row = frag_row(g, e), col = frag_col(0, tig, e);
                    got[size_t(row * 8 + col)] = c[e] - float(e + 1);
                  }
                });
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) {
      double ref = 0.0;
      for (int k = 0; k < 16; ++k)
        ref += double(a[size_t(r * 16 + k)]) * double(b[size_t(k * 8 + n)]);
      INFO("row " << r << " col " << n);
      REQUIRE(got[size_t(r * 8 + n)] == Approx(ref).margin(1e-5));
    }
  }
}

TEST_CASE("simt: mma_16816 computes A B + C in PTX's fragment layout", "[simt]") {
  check_mma<BFloat16>();
  check_mma<Half>();
}

TEST_CASE("simt: barriers a GPU would not complete are errors", "[simt]") {
  SECTION("lanes of a warp in different primitives") {
    REQUIRE_THROWS_WITH(
        simt::emulate(1, 64, 0,
                      [](int64_t, int tid, unsigned char*) {
                        if (tid % 32 < 16)
                          simt::sync_warp();
                        else
                          simt::shfl_xor(1.0f, 1);
                      }),
        Catch::Contains("cannot complete") && Catch::Contains("lane 16+: shfl_xor"));
  }
  SECTION("a lane leaves while its warp shuffles") {
    REQUIRE_THROWS_WITH(simt::emulate(1, 32, 0,
                                      [](int64_t, int tid, unsigned char*) {
                                        if (tid == 3) return;
                                        simt::shfl_xor(1.0f, 1);
                                      }),
                        Catch::Contains("exited") && Catch::Contains("shfl_xor"));
  }
  SECTION("exceptions in a thread reach the caller") {
    REQUIRE_THROWS_WITH(simt::emulate(3, 32, 0,
                                      [](int64_t block, int tid, unsigned char*) {
                                        if (block == 2 && tid == 7)
                                          throw std::runtime_error("boom");
                                      }),
                        "boom");
  }
}

TEST_CASE("simt: misaligned vector accesses and unwritten shared memory show", "[simt]") {
  REQUIRE_THROWS_WITH(
      simt::emulate(1, 32, 64,
                    [](int64_t, int, unsigned char* shared) {
                      (void)simt::load_u32(reinterpret_cast<const uint16_t*>(shared + 4));
                      (void)simt::load16(shared + 4);
                    }),
      Catch::Contains("misaligned 16-byte"));
  float seen = 0.0f;
  simt::emulate(1, 32, 64, [&](int64_t, int tid, unsigned char* shared) {
    if (tid == 0) std::memcpy(&seen, shared + 8, sizeof(float));
  });
  REQUIRE(std::isnan(seen));
}

}  // namespace
