// CUDA embedding. The forward copies weight rows per id. The backward never adds into a row from
// two threads: it sorts the unique keys (id << 32 | position) with a bitonic sort (shared-memory
// tiles, global steps between them), then the first sorted entry of each id's run sums that run's
// gradient rows, in position order, for 32 channels per warp. That is the CPU kernel's order of
// additions, so the f32 results match it bit for bit, run after run. Kernel bodies live in
// embedding_body.cuh; this file holds the __global__ wrappers and the launchers.
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/embedding_body.cuh"
#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;
namespace eb = embedding_body;
using eb::u64;

template <typename IdT, typename E>
__global__ void embedding_kernel(const E* __restrict__ w, int64_t w_stride, int64_t V,
                                 const IdT* __restrict__ ids, E* __restrict__ out, int64_t n,
                                 int64_t C) {
  eb::embedding_forward(w, w_stride, V, ids, out, n, C, blockIdx.x, gridDim.x, threadIdx.x,
                        blockDim.x);
}

template <typename IdT>
__global__ void fill_keys_kernel(const IdT* __restrict__ ids, int64_t n, int64_t V, u64 padded,
                                 u64* __restrict__ keys) {
  eb::fill_keys(ids, n, V, padded, keys, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
}

__global__ void bitonic_global_kernel(u64* keys, u64 padded, u64 k, u64 j) {
  eb::bitonic_global(keys, padded, k, j, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
}

__global__ void bitonic_tile_kernel(u64* keys, u64 tile, u64 k) {
  __shared__ __align__(16) unsigned char shared[eb::kSortSharedBytes];
  eb::bitonic_tile(keys, tile, k, blockIdx.x, threadIdx.x, blockDim.x, shared);
}

template <typename G, typename W>
__global__ void accumulate_runs_kernel(const u64* __restrict__ keys, int64_t n,
                                       const G* __restrict__ g, int64_t C, W* __restrict__ gw,
                                       int64_t gw_stride) {
  eb::accumulate_runs(keys, n, g, C, gw, gw_stride, blockIdx.x, blockIdx.y, gridDim.y, threadIdx.x);
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
  const u64 tile = eb::sort_tile(padded);
  const unsigned tiles = unsigned(padded / tile);
  eb::bitonic_schedule(
      padded,
      [&](u64 k) {
        bitonic_tile_kernel<<<tiles, eb::sort_tile_threads(tile), 0, stream>>>(keys, tile, k);
        nu::check_launch();
      },
      [&](u64 k, u64 j) {
        bitonic_global_kernel<<<eb::grid_for(int64_t(padded / 2), eb::kThreads), eb::kThreads, 0,
                                stream>>>(keys, padded, k, j);
        nu::check_launch();
      });
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
  const unsigned blocks = eb::grid_for(n * C, eb::kThreads);
  dispatch_ids(idc, [&]<typename IdT>() {
    const IdT* id_p = static_cast<const IdT*>(idc.data_ptr());
    if (w.itemsize() == 4) {
      embedding_kernel<IdT, uint32_t><<<blocks, eb::kThreads, 0, nu::stream_for(w)>>>(
          static_cast<const uint32_t*>(w.data_ptr()), w.stride(0), V, id_p,
          static_cast<uint32_t*>(oc.data_ptr()), n, C);
    } else {
      embedding_kernel<IdT, uint16_t><<<blocks, eb::kThreads, 0, nu::stream_for(w)>>>(
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
  TS_CHECK(V < int64_t(eb::kNoId) && n <= int64_t(eb::kNoId), op,
           "expected fewer than 2^32 - 1 rows and ids, got V = ", V, " and ", n, " ids");
  nu::DeviceGuard guard(d);
  cudaStream_t stream = nu::stream_for(grad_weight);
  const u64 padded = eb::padded_keys(n);
  const Tensor keys = empty({int64_t(padded)}, {.dtype = DType::i64, .device = d});
  u64* key_p = static_cast<u64*>(keys.data_ptr());
  const Tensor idc = ids.contiguous();
  dispatch_ids(idc, [&]<typename IdT>() {
    fill_keys_kernel<IdT><<<eb::grid_for(int64_t(padded), eb::kThreads), eb::kThreads, 0, stream>>>(
        static_cast<const IdT*>(idc.data_ptr()), n, V, padded, key_p);
    nu::check_launch();
  });
  bitonic_sort(key_p, padded, stream);

  const Tensor g = grad_out.contiguous();
  const Tensor gw = grad_weight.stride(1) == 1 ? grad_weight : grad_weight.clone();
  const eb::AccumulateGrid ag = eb::accumulate_grid(n, C);
  const dim3 grid(ag.x, ag.y);
  dispatch_floating(g.dtype(), op, [&]<typename G>() {
    dispatch_floating(gw.dtype(), op, [&]<typename W>() {
      accumulate_runs_kernel<G, W><<<grid, 32 * eb::kAccumulateWarps, 0, stream>>>(
          key_p, n, static_cast<const G*>(g.data_ptr()), C, static_cast<W*>(gw.data_ptr()),
          gw.stride(0));
      nu::check_launch();
    });
  });
  nu::finish_output(gw, grad_weight);
}

}  // namespace tessera::kernels::cuda
