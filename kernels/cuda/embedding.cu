// CUDA embedding. The forward copies weight rows per id. The backward never adds into a row from
// two threads: it sorts the unique keys (id << 32 | position) with a bitonic sort (shared-memory
// tiles, global steps between them), then the first sorted entry of each id's run sums that run's
// gradient rows, in position order, for 32 channels per warp. That is the CPU kernel's order of
// additions, so the f32 results match it bit for bit, run after run.
#include "kernels/cuda/embedding.h"

#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;
using u64 = unsigned long long;

constexpr u64 kNoId = 0xFFFFFFFFull;  // key id of padding and of out-of-range ids (skipped)
constexpr int64_t kSortTile = 2048;   // keys sorted in shared memory per block (16 KB)

// Ids outside [0, V) were rejected by the caller; here they read zeros and are never written.
template <typename IdT>
__device__ __forceinline__ bool valid_id(IdT id, int64_t V) {
  return int64_t(id) >= 0 && int64_t(id) < V;
}

// out (n, C) = w[ids] with w's rows w_stride elements apart. E is the element's bit pattern type.
template <typename IdT, typename E>
__global__ void embedding_kernel(const E* __restrict__ w, int64_t w_stride, int64_t V,
                                 const IdT* __restrict__ ids, E* __restrict__ out, int64_t n,
                                 int64_t C) {
  const int64_t total = n * C;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / C, c = e - i * C;
    const IdT id = ids[i];
    out[e] = valid_id(id, V) ? w[int64_t(id) * w_stride + c] : E(0);
  }
}

// keys[i] = id << 32 | i for i < n, all ones for the padding up to the power of two.
template <typename IdT>
__global__ void fill_keys_kernel(const IdT* __restrict__ ids, int64_t n, int64_t V, u64 padded,
                                 u64* __restrict__ keys) {
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < padded;
       i += u64(gridDim.x) * blockDim.x) {
    if (i < u64(n)) {
      const IdT id = ids[i];
      keys[i] = ((valid_id(id, V) ? u64(id) : kNoId) << 32) | i;
    } else {
      keys[i] = ~0ull;
    }
  }
}

// One compare-exchange of bitonic stage (k, j): pair t is (i, i + j).
__device__ __forceinline__ void compare_exchange(u64* a, u64 i, u64 l, bool ascending) {
  const u64 x = a[i], y = a[l];
  if ((x > y) == ascending) {
    a[i] = y;
    a[l] = x;
  }
}

__global__ void bitonic_global_kernel(u64* keys, u64 padded, u64 k, u64 j) {
  for (u64 t = u64(blockIdx.x) * blockDim.x + threadIdx.x; t < padded / 2;
       t += u64(gridDim.x) * blockDim.x) {
    const u64 i = (t / j) * 2 * j + t % j;
    compare_exchange(keys, i, i + j, (i & k) == 0);
  }
}

// Steps whose pairs lie inside one tile of `tile` keys (tile / 2 threads, one pair each): with
// k == 0 the whole sort up to stage k = tile, else the steps j < tile of stage k.
__global__ void bitonic_tile_kernel(u64* keys, u64 tile, u64 k) {
  __shared__ u64 s[kSortTile];
  const u64 base = u64(blockIdx.x) * tile, t = threadIdx.x, half = tile / 2;
  s[t] = keys[base + t];
  s[t + half] = keys[base + t + half];
  __syncthreads();
  const u64 k_first = k == 0 ? 2 : k, k_last = k == 0 ? tile : k;
  for (u64 kk = k_first; kk <= k_last; kk <<= 1) {
    for (u64 j = (k == 0 ? kk : tile) / 2; j > 0; j >>= 1) {
      const u64 i = (t / j) * 2 * j + t % j;
      compare_exchange(s, i, i + j, ((base + i) & kk) == 0);
      __syncthreads();
    }
  }
  keys[base + t] = s[t];
  keys[base + t + half] = s[t + half];
}

// Warp threadIdx.y of block x takes sorted entry k; when k starts a run of one id, its lanes sum
// the run's rows of g (n, C) into gw[id] for channels blockIdx.y * 32 + lane (+ gridDim.y * 32 ...).
template <typename G, typename W>
__global__ void accumulate_runs_kernel(const u64* __restrict__ keys, int64_t n,
                                       const G* __restrict__ g, int64_t C, W* __restrict__ gw,
                                       int64_t gw_stride) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (k >= n) return;
  const u64 id = keys[k] >> 32;
  if (id == kNoId || (k > 0 && (keys[k - 1] >> 32) == id)) return;
  int64_t end = k + 1;
  while (end < n && (keys[end] >> 32) == id) ++end;
  W* dst = gw + int64_t(id) * gw_stride;
  for (int64_t c = int64_t(blockIdx.y) * 32 + threadIdx.x; c < C; c += int64_t(gridDim.y) * 32) {
    float acc = float(dst[c]);
    for (int64_t r = k; r < end; ++r) acc += float(g[int64_t(keys[r] & 0xFFFFFFFFull) * C + c]);
    dst[c] = W(acc);
  }
}

void check_ids(const Tensor& ids, Device d, const char* op) {
  TS_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, op,
           "expected ids i32 or i64, got ", ids.describe());
  nu::check_on_device(ids, d, op, "ids");
}

// ids as a contiguous tensor of its own dtype, dispatched to IdT.
template <typename Fn>
void dispatch_ids(const Tensor& ids, Fn&& fn) {
  if (ids.dtype() == DType::i32) {
    fn.template operator()<int32_t>();
  } else {
    fn.template operator()<int64_t>();
  }
}

// Sorts `padded` (a power of two, >= 2) keys ascending.
void bitonic_sort(u64* keys, u64 padded, cudaStream_t stream) {
  const u64 tile = std::min<u64>(kSortTile, padded);
  const unsigned tiles = unsigned(padded / tile);
  bitonic_tile_kernel<<<tiles, unsigned(tile / 2), 0, stream>>>(keys, tile, 0);
  nu::check_launch();
  for (u64 k = 2 * tile; k <= padded; k <<= 1) {
    for (u64 j = k / 2; j >= tile; j >>= 1) {
      bitonic_global_kernel<<<nu::grid_for(int64_t(padded / 2), 256, 1 << 20), 256, 0, stream>>>(
          keys, padded, k, j);
      nu::check_launch();
    }
    bitonic_tile_kernel<<<tiles, unsigned(tile / 2), 0, stream>>>(keys, tile, k);
    nu::check_launch();
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const char* op = "embedding";
  TS_CHECK(weight.dim() == 2, op, "expected weight of shape (V, C), got ", weight.describe());
  const Device d = weight.device();
  check_ids(ids, d, op);
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape want = ids.shape();
  want.push_back(C);
  TS_CHECK(out.shape() == want && out.dtype() == weight.dtype() && out.device() == d, op,
           "expected out ", shape_str(want), " ", dtype_name(weight.dtype()), " on ", d.str(),
           ", got ", out.describe());
  TS_CHECK(is_floating(weight.dtype()), op, "expected a floating weight, got ", weight.describe());
  const int64_t n = ids.numel();
  if (n == 0 || C == 0) return;
  nu::DeviceGuard guard(d);
  const Tensor w = weight.stride(1) == 1 ? weight : weight.contiguous();
  const Tensor idc = ids.contiguous();
  const Tensor oc = nu::contiguous_output(out);
  constexpr int kThreads = 256;
  const unsigned blocks = nu::grid_for(n * C, kThreads, 1 << 20);
  dispatch_ids(idc, [&]<typename IdT>() {
    const IdT* id_p = static_cast<const IdT*>(idc.data_ptr());
    if (w.itemsize() == 4) {
      embedding_kernel<IdT, uint32_t><<<blocks, kThreads, 0, nu::stream_for(w)>>>(
          static_cast<const uint32_t*>(w.data_ptr()), w.stride(0), V, id_p,
          static_cast<uint32_t*>(oc.data_ptr()), n, C);
    } else {
      embedding_kernel<IdT, uint16_t><<<blocks, kThreads, 0, nu::stream_for(w)>>>(
          static_cast<const uint16_t*>(w.data_ptr()), w.stride(0), V, id_p,
          static_cast<uint16_t*>(oc.data_ptr()), n, C);
    }
    nu::check_launch();
  });
  nu::finish_output(oc, out);
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  const char* op = "embedding_backward";
  TS_CHECK(grad_weight.dim() == 2, op, "expected grad_weight of shape (V, C), got ",
           grad_weight.describe());
  const Device d = grad_weight.device();
  check_ids(ids, d, op);
  const int64_t V = grad_weight.size(0), C = grad_weight.size(1);
  Shape want = ids.shape();
  want.push_back(C);
  TS_CHECK(grad_out.shape() == want && is_floating(grad_out.dtype()) && grad_out.device() == d, op,
           "expected grad_out ", shape_str(want), " floating on ", d.str(), ", got ",
           grad_out.describe());
  TS_CHECK(is_floating(grad_weight.dtype()), op, "expected a floating grad_weight, got ",
           grad_weight.describe());
  const int64_t n = ids.numel();
  if (n == 0 || C == 0) return;
  // Keys hold the id and the position in 32 bits each.
  TS_CHECK(V < int64_t(kNoId) && n <= int64_t(kNoId), op,
           "expected fewer than 2^32 - 1 rows and ids, got V = ", V, " and ", n, " ids");
  nu::DeviceGuard guard(d);
  cudaStream_t stream = nu::stream_for(grad_weight);
  u64 padded = 2;
  while (padded < u64(n)) padded <<= 1;
  const Tensor keys = empty({int64_t(padded)}, {.dtype = DType::i64, .device = d});
  u64* key_p = static_cast<u64*>(keys.data_ptr());
  const Tensor idc = ids.contiguous();
  dispatch_ids(idc, [&]<typename IdT>() {
    fill_keys_kernel<IdT><<<nu::grid_for(int64_t(padded), 256, 1 << 20), 256, 0, stream>>>(
        static_cast<const IdT*>(idc.data_ptr()), n, V, padded, key_p);
    nu::check_launch();
  });
  bitonic_sort(key_p, padded, stream);

  const Tensor g = grad_out.contiguous();
  const Tensor gw = grad_weight.stride(1) == 1 ? grad_weight : grad_weight.clone();
  constexpr int kWarps = 4;
  const dim3 block(32, kWarps);
  const dim3 grid(unsigned((n + kWarps - 1) / kWarps),
                  unsigned(std::min<int64_t>((C + 31) / 32, 65535)));
  dispatch_floating(g.dtype(), op, [&]<typename G>() {
    dispatch_floating(gw.dtype(), op, [&]<typename W>() {
      accumulate_runs_kernel<G, W><<<grid, block, 0, stream>>>(
          key_p, n, static_cast<const G*>(g.data_ptr()), C, static_cast<W*>(gw.data_ptr()),
          gw.stride(0));
      nu::check_launch();
    });
  });
  nu::finish_output(gw, grad_weight);
}

}  // namespace tessera::kernels::cuda
