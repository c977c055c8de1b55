// SGEMM driver: argument checks, ISA dispatch, OpenMP threading, and BLIS-style packing and cache
// blocking around the register-tile micro-kernels of gemm_avx2.cc and gemm_avx512.cc.
#include "kernels/cpu/gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace tessera::kernels::cpu {
namespace detail {
namespace {

// Below this many multiply-adds per thread, forking costs more than the extra core gains.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 19;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// op(X) of a stored row-major matrix seen as (rows, depth): element (r, k) is data[r*ld + k], or
// data[k*ld + r] when `transposed`. A is op(A) (M, K); B enters as op(B)^T (N, K), so one packing
// routine serves both operands.
struct Operand {
  const float* data;
  int64_t ld;
  bool transposed;
};

struct Problem {
  int64_t m, n, k;
  float alpha;
  Operand a;  // (m, k)
  Operand b;  // (n, k)
  float beta;
  float* c;  // (m, n), row stride ldc
  int64_t ldc;
  const float* bias;  // (n) added to every row, or null
};

struct Range {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

// Part `index` of `parts` of [0, total), cut at multiples of `unit` so tiles are not split.
Range split_range(int64_t total, int64_t unit, int parts, int index) {
  const int64_t units = ceil_div(total, unit);
  const int64_t begin = units * index / parts * unit;
  const int64_t end = units * (index + 1) / parts * unit;
  return {std::min(begin, total), std::min(end, total)};
}

// Largest part of split_range(total, unit, parts, .).
int64_t max_part(int64_t total, int64_t unit, int parts) {
  return ceil_div(ceil_div(total, unit), parts) * unit;
}

// A block size <= max_block (a multiple of unit) that cuts `total` into nearly equal blocks, so
// no thin last block wastes a pass over the packed panels.
int64_t even_block(int64_t total, int64_t max_block, int64_t unit) {
  if (total <= 0) return unit;
  const int64_t blocks = ceil_div(total, max_block);
  return round_up(ceil_div(total, blocks), unit);
}

// ---------------------------------------------------------------------------------------------
// Packing: a panel is (kc, width) floats, `width` values of op(X) rows per k, zero-padded.

// Transposes an 8x8 block held in rows[0..7] (row r = 8 consecutive k) in place, so that rows[j]
// holds the 8 values of depth j.
// Every loop here and at its callers is fully unrolled, so the blocks stay in registers (a loop
// left rolled indexes them, which puts them on the stack: packing ran 2x slower that way).
inline void transpose_8x8(__m256 rows[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    rows[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// How far ahead (floats) the packing prefetches each source row. It reads rows as short runs,
// eight at a time, that the hardware prefetcher barely learns before they end: without this the
// packing stalled on its loads (26% of a one-thread (256, 2304) x (2304, 768) product profile).
constexpr int64_t kPackPrefetch = 64;

// Source rows pack_panels copies together when the values of one k are contiguous.
constexpr int64_t kPackRowGroup = 8;

// Packs `rows` source rows (row r at src + r*ld, contiguous in k) of depth kc into a (kc, width)
// panel: a transpose, done 8x8 in registers so packing stays far cheaper than the FMAs.
void pack_transposed(const float* src, int64_t ld, int rows, int64_t kc, int width, float* dst) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int r0 = 0; r0 < width; r0 += 8) {
    const int group = std::min(8, width - r0);           // lanes written per k
    const int live = std::clamp(rows - r0, 0, group);    // lanes read from src; others are zero
    const __m256i store_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(group), lanes);
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      __m256 block[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        if (r < live) {
          const float* row = src + (r0 + r) * ld + k;
          _mm_prefetch(reinterpret_cast<const char*>(row + kPackPrefetch), _MM_HINT_T0);
          block[r] = _mm256_loadu_ps(row);
        } else {
          block[r] = _mm256_setzero_ps();
        }
      }
      transpose_8x8(block);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        float* out = dst + (k + j) * width + r0;
        if (group == 8) {
          _mm256_storeu_ps(out, block[j]);
        } else {
          _mm256_maskstore_ps(out, store_mask, block[j]);
        }
      }
    }
    for (; k < kc; ++k) {
      for (int r = 0; r < group; ++r) {
        dst[k * width + r0 + r] = r < live ? src[(r0 + r) * ld + k] : 0.0f;
      }
    }
  }
}

// Copies `count` rows of one panel, row k of the source at in + k*ld, into (count, width) packed
// floats: `live` values a row, zeros after them. The whole panels of the widths the micro-kernels
// use are copied in fixed-size vector moves: a memcpy call per row cost more than the copy, and
// even a loop over the row's vectors costs more than its moves. With memcpy and std::fill, an
// AVX2 weight-gradient product that packs a transposed A into 6-wide panels and has few output
// columns ran 13% below OpenBLAS (768 x 96 x 1024).
template <int W>
void copy_panel_rows_fixed(const float* in, int64_t ld, int64_t count, float* out) {
  for (int64_t k = 0; k < count; ++k, in += ld, out += W) {
    _mm_prefetch(reinterpret_cast<const char*>(in + kPackPrefetch), _MM_HINT_T0);
    if constexpr (W % 8 == 0) {
#pragma GCC unroll 8
      for (int c = 0; c < W; c += 8) _mm256_storeu_ps(out + c, _mm256_loadu_ps(in + c));
    } else {
      static_assert(W == 6, "a fixed panel width is a multiple of 8, or 6");
      _mm_storeu_ps(out, _mm_loadu_ps(in));
      std::memcpy(out + 4, in + 4, 2 * sizeof(float));  // one 8-byte move
    }
  }
}

void copy_panel_rows(const float* in, int64_t ld, int64_t count, int live, int width, float* out) {
  if (live == width) {
    switch (width) {
      case 6: return copy_panel_rows_fixed<6>(in, ld, count, out);
      case 8: return copy_panel_rows_fixed<8>(in, ld, count, out);
      case 16: return copy_panel_rows_fixed<16>(in, ld, count, out);
      case 48: return copy_panel_rows_fixed<48>(in, ld, count, out);
      case 64: return copy_panel_rows_fixed<64>(in, ld, count, out);
      default: break;
    }
  }
  for (int64_t k = 0; k < count; ++k, in += ld, out += width) {
    _mm_prefetch(reinterpret_cast<const char*>(in + kPackPrefetch), _MM_HINT_T0);
    std::memcpy(out, in, sizeof(float) * live);
    std::fill(out + live, out + width, 0.0f);
  }
}

// Packs panels [first, last) of rows [r0, r0 + rows) of op(X), depth [k0, k0 + kc); panel q
// starts at dst + q*width*kc.
void pack_panels(const Operand& x, int64_t r0, int64_t rows, int64_t k0, int64_t kc, int width,
                 int64_t first, int64_t last, float* dst) {
  if (!x.transposed) {
    for (int64_t q = first; q < last; ++q) {
      const int64_t r = q * width;
      const int live = static_cast<int>(std::min<int64_t>(width, rows - r));
      pack_transposed(x.data + (r0 + r) * x.ld + k0, x.ld, live, kc, width, dst + q * width * kc);
    }
    return;
  }
  // The values of one k are contiguous in the source, and successive k sit ld apart, often a
  // page or more. Packing panel by panel revisits every source row once per panel, each visit on
  // a page the hardware prefetcher cannot enter (10% of an AVX2 forward product went to those
  // copies); k by k for all panels scatters the writes over panels whose 4 KiB-multiple strides
  // alias in L1. So a group of kPackRowGroup rows is packed at a time: it is read as that many
  // sequential runs, and each panel receives one contiguous piece of it.
  for (int64_t kg = 0; kg < kc; kg += kPackRowGroup) {
    const int64_t k_end = std::min(kc, kg + kPackRowGroup);
    for (int64_t q = first; q < last; ++q) {
      const int64_t r = q * width;
      const int live = static_cast<int>(std::min<int64_t>(width, rows - r));
      copy_panel_rows(x.data + (k0 + kg) * x.ld + r0 + r, x.ld, k_end - kg, live, width,
                      dst + q * width * kc + kg * width);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Blocking and threading.

// How threads share one product. kSharedA: they split the columns and pack one A block together;
// kRows / kColumns: each owns rows / columns and packs its own A and B blocks (so kRows packs all
// of B in every thread, kColumns all of A).
enum class Split { kSharedA, kRows, kColumns };

// How one product is cut up: block sizes and how threads share the work.
struct Plan {
  int threads = 1;
  Split split = Split::kSharedA;
  int64_t kc = 0, mc = 0, nc = 0;
  int64_t a_floats = 0;  // one packed A block
  int64_t b_floats = 0;  // one thread's packed B block

  int64_t workspace_floats() const {
    return split == Split::kSharedA ? a_floats + threads * b_floats
                                    : threads * (a_floats + b_floats);
  }
};

// The relative cost of packing op(X): its rows times two when the packer transposes (a source row
// holds k-contiguous values), one when it copies.
int64_t packing_cost(const Operand& x, int64_t rows) { return x.transposed ? rows : 2 * rows; }

Plan make_plan(const GemmKernel& g, const Problem& p, int max_threads) {
  const int64_t m = p.m, n = p.n, k = p.k;
  Plan plan;
  const int64_t by_work = std::max<int64_t>(1, m * n * k / kMinMacsPerThread);
  plan.threads = static_cast<int>(std::min<int64_t>(max_threads, by_work));
  if (plan.threads > 1) {
    // Threads own rows where there are enough: each packs its own A and B blocks, so no packed
    // block is read across cores, at the cost of every thread packing all of B. Sharing one A
    // block (kSharedA) packs nothing twice, but every thread streams the whole block, half of it
    // from the other core's cache. On a 2-core Zen 4 host owning rows ran the GPT-2 training
    // products (forward, dX, dW, and their tensor-parallel shards) a median 18% faster with the
    // AVX-512 kernel and 7% with AVX2, up to 47%; it lost (by up to 5%) only where N is many
    // times M, and the redundant B packing weighs most: those keep sharing A.
    // Where packing all of A costs less than packing all of B, threads own columns instead, each
    // packing A and its part of B: on a 2-core Zen 5 host the 256-token forward products with 768
    // outputs ran 6-7% faster on both ISAs, the other products that switch within the noise (2%).
    const bool rows_enough = m >= 2 * plan.threads * g.mr;
    const bool cols_enough = n >= 2 * plan.threads * g.nr;
    if (rows_enough && (n < 8 * m || !cols_enough)) {
      const bool a_cheaper = packing_cost(p.a, m) < packing_cost(p.b, n);
      plan.split = cols_enough && a_cheaper ? Split::kColumns : Split::kRows;
    } else if (!cols_enough) {
      plan.threads = 1;
    }
  }
  const int row_parts = plan.split == Split::kRows ? plan.threads : 1;
  const int col_parts = plan.split == Split::kRows ? 1 : plan.threads;
  plan.kc = even_block(k, g.kc, 8);  // multiple of 8 keeps every packed panel 64-byte aligned
  plan.mc = even_block(max_part(m, g.mr, row_parts), g.mc, g.mr);
  plan.nc = even_block(max_part(n, g.nr, col_parts), g.nc, g.nr);
  plan.a_floats = plan.mc * plan.kc;
  plan.b_floats = plan.nc * plan.kc;
  return plan;
}

// The threads that share one packed A block; a team of one needs no barriers.
struct Team {
  float* a_pack;
  int rank;
  int size;
};

void team_barrier(const Team& team) {
  if (team.size > 1) {
#pragma omp barrier
  }
}

// Runs every (mr, nr) tile of a packed (mc, kc) A block times a packed (kc, nc) B block, adding
// bias (nc values, or null) to every row. The A panel stays in L1 while the inner loop streams B
// panels from L2.
void macro_kernel(const GemmKernel& g, const float* a_pack, const float* b_pack, int64_t mc,
                  int64_t nc, int64_t kc, float alpha, float beta, const float* bias, float* c,
                  int64_t ldc) {
  for (int64_t ir = 0; ir < mc; ir += g.mr) {
    const int m = static_cast<int>(std::min<int64_t>(g.mr, mc - ir));
    for (int64_t jr = 0; jr < nc; jr += g.nr) {
      const int n = static_cast<int>(std::min<int64_t>(g.nr, nc - jr));
      g.kernel(kc, a_pack + ir * kc, b_pack + jr * kc, c + ir * ldc + jr, ldc, alpha, beta,
               bias != nullptr ? bias + jr : nullptr, m, n);
    }
  }
}

// One thread's share, C[rows, cols]: the BLIS loop nest k-block -> A block -> B block -> tiles.
// Team members have the same rows, pack the A block together and wait for each other.
void run_share(const Problem& p, const GemmKernel& g, const Plan& plan, Range rows, Range cols,
               const Team& team, float* b_pack) {
  for (int64_t k0 = 0; k0 < p.k; k0 += plan.kc) {
    const int64_t kc = std::min(plan.kc, p.k - k0);
    // Later k-blocks accumulate onto the partial result of the earlier ones; the first adds the
    // bias.
    const bool first = k0 == 0;
    const float beta = first ? p.beta : 1.0f;
    for (int64_t i0 = rows.begin; i0 < rows.end; i0 += plan.mc) {
      const int64_t mc = std::min(plan.mc, rows.end - i0);
      const Range mine = split_range(ceil_div(mc, g.mr), 1, team.size, team.rank);
      pack_panels(p.a, i0, mc, k0, kc, g.mr, mine.begin, mine.end, team.a_pack);
      team_barrier(team);
      for (int64_t j0 = cols.begin; j0 < cols.end; j0 += plan.nc) {
        const int64_t nc = std::min(plan.nc, cols.end - j0);
        pack_panels(p.b, j0, nc, k0, kc, g.nr, 0, ceil_div(nc, g.nr), b_pack);
        const float* bias = first && p.bias != nullptr ? p.bias + j0 : nullptr;
        macro_kernel(g, team.a_pack, b_pack, mc, nc, kc, p.alpha, beta, bias,
                     p.c + i0 * p.ldc + j0, p.ldc);
      }
      team_barrier(team);  // the shared A block is overwritten next
    }
  }
}

// Thread `rank`'s part of the product under `plan`, using its slice of `workspace`.
void run_thread(const Problem& p, const GemmKernel& g, const Plan& plan, int rank,
                float* workspace) {
  if (plan.split == Split::kSharedA) {
    const Team team{workspace, rank, plan.threads};
    float* b_pack = workspace + plan.a_floats + rank * plan.b_floats;
    run_share(p, g, plan, {0, p.m}, split_range(p.n, g.nr, plan.threads, rank), team, b_pack);
    return;
  }
  float* mine = workspace + rank * (plan.a_floats + plan.b_floats);
  const Team team{mine, 0, 1};
  const Range all_rows{0, p.m}, all_cols{0, p.n};
  const bool rows = plan.split == Split::kRows;
  run_share(p, g, plan, rows ? split_range(p.m, g.mr, plan.threads, rank) : all_rows,
            rows ? all_cols : split_range(p.n, g.nr, plan.threads, rank), team,
            mine + plan.a_floats);
}

void run_plan(const Problem& p, const GemmKernel& g, const Plan& plan, float* workspace) {
  if (plan.threads == 1) {
    run_thread(p, g, plan, 0, workspace);
    return;
  }
#pragma omp parallel num_threads(plan.threads)
  {
    // The runtime may grant fewer threads than asked; the plan needs all of them, so the first
    // thread then does the whole product alone (the workspace fits the single-thread layout).
    if (omp_get_num_threads() == plan.threads) {
      run_thread(p, g, plan, omp_get_thread_num(), workspace);
    } else if (omp_get_thread_num() == 0) {
      Plan serial = plan;
      serial.threads = 1;
      serial.split = Split::kSharedA;
      run_thread(p, g, serial, 0, workspace);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Workspace and entry points.

// 64-byte aligned scratch owned by the calling thread and reused across calls: allocating a
// fresh megabyte per call would page-fault on every product.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { std::free(data_); }

  float* get(int64_t floats) {
    if (floats > capacity_) {
      std::free(data_);
      data_ = nullptr;
      capacity_ = 0;
      const size_t bytes = static_cast<size_t>(round_up(floats * int64_t{sizeof(float)}, 64));
      data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = floats;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;
};

float* thread_workspace(int64_t floats) {
  thread_local Workspace workspace;
  return workspace.get(floats);
}

// C = beta * C (+ bias), for products with nothing to add (K == 0 or alpha == 0).
void scale_c(int64_t m, int64_t n, float beta, const float* bias, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
    if (bias != nullptr) {
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
  }
}

void check_args(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                int64_t lda, int64_t ldb, int64_t ldc) {
  TS_CHECK(batch >= 0 && m >= 0 && n >= 0 && k >= 0, "sgemm",
           "expected non-negative sizes, got batch=", batch, " M=", m, " N=", n, " K=", k);
  const int64_t a_width = trans_a ? m : k;
  const int64_t b_width = trans_b ? k : n;
  TS_CHECK(lda >= a_width, "sgemm", "expected lda >= ", a_width, ", got ", lda);
  TS_CHECK(ldb >= b_width, "sgemm", "expected ldb >= ", b_width, ", got ", ldb);
  TS_CHECK(ldc >= n, "sgemm", "expected ldc >= ", n, ", got ", ldc);
}

// The micro-kernel for C of width n: with AVX-512, 6 x 64 tiles where they divide n and 8 x 48
// tiles do not (see gemm_avx512.cc).
GemmKernel select_kernel(GemmIsa isa, int64_t n) {
  if (isa == GemmIsa::kAuto) isa = cpu_has_avx512() ? GemmIsa::kAvx512 : GemmIsa::kAvx2;
  if (isa == GemmIsa::kAvx512) {
    TS_CHECK(cpu_has_avx512(), "sgemm", "expected a CPU with AVX-512, got one without");
    if (n % 64 == 0 && n % 48 != 0) return gemm_kernel_avx512_n64();
    return gemm_kernel_avx512();
  }
  return gemm_kernel_avx2();
}

Problem make_problem(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc, const float* bias) {
  // op(B)^T (n, k) reads B row-major exactly when B is stored transposed.
  return Problem{m, n, k, alpha, {a, lda, trans_a}, {b, ldb, !trans_b}, beta, c, ldc, bias};
}

}  // namespace

void sgemm_batched_with_isa(GemmIsa isa, bool trans_a, bool trans_b, int64_t batch, int64_t M,
                            int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                            int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                            float beta, float* C, int64_t ldc, int64_t stride_c,
                            const float* bias) {
  check_args(trans_a, trans_b, batch, M, N, K, lda, ldb, ldc);
  if (batch == 0 || M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    for (int64_t i = 0; i < batch; ++i) scale_c(M, N, beta, bias, C + i * stride_c, ldc);
    return;
  }
  const GemmKernel g = select_kernel(isa, N);
  auto problem = [&](int64_t i) {
    return make_problem(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                        ldb, beta, C + i * stride_c, ldc, bias);
  };
  const int max_threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const Plan plan = make_plan(g, problem(0), max_threads);

  // Many products that each fill fewer threads than we have: one product per thread. A shared C
  // (stride_c == 0) must be accumulated in order, so it never takes this path.
  const int64_t total_work = batch * M * N * K / kMinMacsPerThread;
  const int batch_threads = static_cast<int>(
      std::clamp<int64_t>(std::min<int64_t>(batch, total_work), 1, max_threads));
  if (stride_c != 0 && batch_threads > plan.threads) {
    const Plan serial = make_plan(g, problem(0), 1);
    float* workspace = thread_workspace(batch_threads * serial.workspace_floats());
#pragma omp parallel for num_threads(batch_threads) schedule(static)
    for (int64_t i = 0; i < batch; ++i) {
      float* mine = workspace + omp_get_thread_num() * serial.workspace_floats();
      run_plan(problem(i), g, serial, mine);
    }
    return;
  }
  float* workspace = thread_workspace(plan.workspace_floats());
  for (int64_t i = 0; i < batch; ++i) run_plan(problem(i), g, plan, workspace);
}

}  // namespace detail

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc) {
  detail::sgemm_batched_with_isa(detail::GemmIsa::kAuto, trans_a, trans_b, 1, M, N, K, alpha, A,
                                 lda, 0, B, ldb, 0, beta, C, ldc, 0);
}

void sgemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                   float alpha, const float* A, int64_t lda, int64_t stride_a, const float* B,
                   int64_t ldb, int64_t stride_b, float beta, float* C, int64_t ldc,
                   int64_t stride_c, const float* bias) {
  detail::sgemm_batched_with_isa(detail::GemmIsa::kAuto, trans_a, trans_b, batch, M, N, K, alpha,
                                 A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c, bias);
}

const char* sgemm_isa() { return cpu_has_avx512() ? "avx512" : "avx2"; }

}  // namespace tessera::kernels::cpu
