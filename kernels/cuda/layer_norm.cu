// CUDA layer norm. Rows of up to 1024 channels get one warp each (8 rows per block), longer rows a
// 512-thread block; the statistics come from one Welford pass merged across threads, everything
// accumulates in f32. grad_weight / grad_bias are summed per chunk of rows into partials, then the
// partials are summed in chunk order: deterministic, no atomics.
#include "kernels/cuda/layer_norm.h"

#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;

constexpr int kWarpRowsMaxC = 1024;  // up to this many channels a row gets one warp
constexpr int kWarpThreads = 256;    // 8 warps = 8 rows per block
constexpr int kBlockThreads = 512;   // one block per row above kWarpRowsMaxC

struct Welford {
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
};

__device__ __forceinline__ void welford_add(Welford& a, float v) {
  a.n += 1.0f;
  const float d = v - a.mean;
  a.mean += d / a.n;
  a.m2 += d * (v - a.mean);
}

__device__ __forceinline__ void welford_merge(Welford& a, const Welford& b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return;
  const float delta = b.mean - a.mean, fb = b.n / n;
  a.mean += delta * fb;
  a.m2 += b.m2 + delta * delta * a.n * fb;
  a.n = n;
}

// Statistics over the row group (a warp, or the whole block when group == blockDim.x), the same
// bits in every thread of the group. `shared` holds 3 * 32 floats.
__device__ Welford group_welford(Welford w, int group, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    Welford other;
    other.n = __shfl_xor_sync(0xFFFFFFFFu, w.n, o);
    other.mean = __shfl_xor_sync(0xFFFFFFFFu, w.mean, o);
    other.m2 = __shfl_xor_sync(0xFFFFFFFFu, w.m2, o);
    welford_merge(w, other);
  }
  // The merge is not commutative bit for bit: take lane 0's result.
  w.n = __shfl_sync(0xFFFFFFFFu, w.n, 0);
  w.mean = __shfl_sync(0xFFFFFFFFu, w.mean, 0);
  w.m2 = __shfl_sync(0xFFFFFFFFu, w.m2, 0);
  if (group == 32) return w;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // the previous row's readers are done with shared
  if (lane == 0) {
    shared[warp] = w.n;
    shared[32 + warp] = w.mean;
    shared[64 + warp] = w.m2;
  }
  __syncthreads();
  Welford total;
  for (int k = 0; k < warps; ++k) welford_merge(total, Welford{shared[k], shared[32 + k], shared[64 + k]});
  return total;
}

// Sum over the row group, the same bits in every thread of it. `shared` holds 32 floats.
__device__ __forceinline__ float group_sum(float v, int group, float* shared) {
  return group == 32 ? nu::warp_sum(v) : nu::block_sum(v, shared);
}

// x, y: (rows, C) contiguous; w, b: (C) f32 or null; mean, rstd: (rows) f32 contiguous.
template <typename T>
__global__ void layer_norm_forward_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float eps, T* __restrict__ y,
                                          float* __restrict__ mean, float* __restrict__ rstd,
                                          int64_t rows, int64_t C, int group) {
  __shared__ float shared[96];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x % group;
  // Loop bounds are uniform over a group, so block-wide barriers in group_welford are safe.
  for (int64_t row = int64_t(blockIdx.x) * per_block + threadIdx.x / group; row < rows;
       row += int64_t(gridDim.x) * per_block) {
    const T* xr = x + row * C;
    Welford acc;
    for (int64_t i = gid; i < C; i += group) welford_add(acc, float(xr[i]));
    const Welford s = group_welford(acc, group, shared);
    const float mu = s.mean;
    const float rs = 1.0f / sqrtf(s.m2 / float(C) + eps);
    if (gid == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
    T* yr = y + row * C;
    for (int64_t i = gid; i < C; i += group) {
      float v = (float(xr[i]) - mu) * rs;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = T(v);
    }
  }
}

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) per row. All row tensors contiguous.
template <typename T>
__global__ void layer_norm_grad_x_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                         const float* __restrict__ w, const float* __restrict__ mean,
                                         const float* __restrict__ rstd, T* __restrict__ dx,
                                         int64_t rows, int64_t C, int group) {
  __shared__ float shared[32];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x % group;
  for (int64_t row = int64_t(blockIdx.x) * per_block + threadIdx.x / group; row < rows;
       row += int64_t(gridDim.x) * per_block) {
    const T* gr = g + row * C;
    const T* xr = x + row * C;
    const float mu = mean[row], rs = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t i = gid; i < C; i += group) {
      const float wg = w ? float(gr[i]) * w[i] : float(gr[i]);
      s1 += wg;
      s2 += wg * ((float(xr[i]) - mu) * rs);
    }
    const float m1 = group_sum(s1, group, shared) / float(C);
    const float m2 = group_sum(s2, group, shared) / float(C);
    T* dr = dx + row * C;
    for (int64_t i = gid; i < C; i += group) {
      const float wg = w ? float(gr[i]) * w[i] : float(gr[i]);
      const float xh = (float(xr[i]) - mu) * rs;
      dr[i] = T(rs * (wg - m1 - xh * m2));
    }
  }
}

constexpr int kColTile = 32, kRowLanes = 8;

// Partials over one chunk of rows (blockIdx.y) for 32 channels (blockIdx.x): dw_part[chunk, c] =
// sum g * xhat, db_part[chunk, c] = sum g. Either output may be null.
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                 const float* __restrict__ mean,
                                                 const float* __restrict__ rstd, int64_t rows,
                                                 int64_t C, int64_t rows_per_chunk,
                                                 float* __restrict__ dw_part,
                                                 float* __restrict__ db_part) {
  __shared__ float sw[kRowLanes][kColTile + 1], sb[kRowLanes][kColTile + 1];
  const int64_t c = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r_end = min(rows, (chunk + 1) * rows_per_chunk);
  float aw = 0.0f, ab = 0.0f;
  if (c < C) {
    for (int64_t r = chunk * rows_per_chunk + threadIdx.y; r < r_end; r += kRowLanes) {
      const float gv = float(g[r * C + c]);
      aw += gv * ((float(x[r * C + c]) - mean[r]) * rstd[r]);
      ab += gv;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tw = 0.0f, tb = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) {
      tw += sw[k][threadIdx.x];
      tb += sb[k][threadIdx.x];
    }
    if (dw_part) dw_part[chunk * C + c] = tw;
    if (db_part) db_part[chunk * C + c] = tb;
  }
}

// out[c] = sum over chunks of part[chunk, c], in chunk order.
__global__ void sum_partials_kernel(const float* __restrict__ part, int64_t chunks, int64_t C,
                                    float* __restrict__ out) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += int64_t(gridDim.x) * blockDim.x) {
    float t = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) t += part[k * C + c];
    out[c] = t;
  }
}

int64_t leading_rows(const Tensor& t) {
  return t.dim() == 0 ? 1 : t.numel() / (t.shape().back() > 0 ? t.shape().back() : 1);
}
int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.shape().back(); }

// An optional per-channel tensor as contiguous f32 on the device (undefined stays undefined).
Tensor channel_f32(const Tensor& t, int64_t C, Device d, const char* op, const char* name) {
  if (!t.defined()) return t;
  TS_CHECK(t.dim() == 1 && t.size(0) == C && is_floating(t.dtype()), op, "expected ", name,
           " of shape (", C, "), got ", t.describe());
  nu::check_on_device(t, d, op, name);
  return t.to(DType::f32).contiguous();
}

void check_stats(const Tensor& s, int64_t rows, Device d, const char* op, const char* name) {
  TS_CHECK(s.defined() && s.dtype() == DType::f32 && s.numel() == rows, op, "expected ", name,
           " f32 with ", rows, " elements, got ", s.defined() ? s.describe() : "undefined");
  nu::check_on_device(s, d, op, name);
}

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// Threads per block and the row-group size (32: a warp per row; else the whole block).
struct RowLaunch {
  int threads, group;
  unsigned blocks;
};
RowLaunch row_launch(int64_t rows, int64_t C) {
  if (C <= kWarpRowsMaxC) {
    return {kWarpThreads, 32, nu::grid_for(rows, kWarpThreads / 32)};
  }
  return {kBlockThreads, kBlockThreads, nu::grid_for(rows, 1)};
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const char* op = "layer_norm";
  const Device d = x.device();
  TS_CHECK(x.shape() == y.shape() && x.dtype() == y.dtype() && y.device() == d, op,
           "expected y like x, got x ", x.describe(), " and y ", y.describe());
  const int64_t rows = leading_rows(x), C = last_dim(x);
  check_stats(mean, rows, d, op, "mean");
  check_stats(rstd, rows, d, op, "rstd");
  if (rows == 0) return;
  nu::DeviceGuard guard(d);
  const Tensor w = channel_f32(weight, C, d, op, "weight");
  const Tensor b = channel_f32(bias, C, d, op, "bias");
  const Tensor xc = x.contiguous();
  const Tensor yc = nu::contiguous_output(y), mc = nu::contiguous_output(mean),
               rc = nu::contiguous_output(rstd);
  const RowLaunch L = row_launch(rows, C);
  cudaStream_t stream = nu::stream_for(x);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    layer_norm_forward_kernel<T><<<L.blocks, L.threads, 0, stream>>>(
        static_cast<const T*>(xc.data_ptr()), f32_or_null(w), f32_or_null(b), float(eps),
        static_cast<T*>(yc.data_ptr()), mc.data<float>(), rc.data<float>(), rows, C, L.group);
    nu::check_launch();
  });
  nu::finish_output(yc, y);
  nu::finish_output(mc, mean);
  nu::finish_output(rc, rstd);
}

void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  const char* op = "layer_norm_backward";
  const Device d = grad_y.device();
  TS_CHECK(grad_y.shape() == x.shape() && grad_y.dtype() == x.dtype() && x.device() == d, op,
           "expected grad_y like x, got ", grad_y.describe(), " and x ", x.describe());
  const int64_t rows = leading_rows(x), C = last_dim(x);
  check_stats(mean, rows, d, op, "mean");
  check_stats(rstd, rows, d, op, "rstd");
  if (grad_x.defined()) {
    TS_CHECK(grad_x.shape() == x.shape() && grad_x.dtype() == x.dtype() && grad_x.device() == d,
             op, "expected grad_x like x, got ", grad_x.describe(), " and x ", x.describe());
  }
  for (const Tensor* g : {&grad_weight, &grad_bias}) {
    if (g->defined()) {
      TS_CHECK(g->dim() == 1 && g->size(0) == C && is_floating(g->dtype()) && g->device() == d, op,
               "expected grad_weight / grad_bias of shape (", C, ") on ", d.str(), ", got ",
               g->describe());
    }
  }
  const bool want_dx = grad_x.defined(), want_dw = grad_weight.defined(),
             want_db = grad_bias.defined();
  if (!want_dx && !want_dw && !want_db) return;
  nu::DeviceGuard guard(d);
  if (rows == 0 || C == 0) {  // empty sums: the parameter gradients are zero
    if (want_dw) grad_weight.zero_();
    if (want_db) grad_bias.zero_();
    return;
  }
  const Tensor w = channel_f32(weight, C, d, op, "weight");
  const Tensor gc = grad_y.contiguous(), xc = x.contiguous();
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  cudaStream_t stream = nu::stream_for(x);

  if (want_dx) {
    const Tensor gxc = nu::contiguous_output(grad_x);
    const RowLaunch L = row_launch(rows, C);
    dispatch_floating(x.dtype(), op, [&]<typename T>() {
      layer_norm_grad_x_kernel<T><<<L.blocks, L.threads, 0, stream>>>(
          static_cast<const T*>(gc.data_ptr()), static_cast<const T*>(xc.data_ptr()),
          f32_or_null(w), mc.data<float>(), rc.data<float>(), static_cast<T*>(gxc.data_ptr()),
          rows, C, L.group);
      nu::check_launch();
    });
    nu::finish_output(gxc, grad_x);
  }
  if (!want_dw && !want_db) return;

  // At most 1024 chunks of at least 32 rows: a fixed split for a given shape (determinism).
  const int64_t rows_per_chunk = std::max<int64_t>(32, (rows + 1023) / 1024);
  const int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const TensorOptions f32_opts{.dtype = DType::f32, .device = d};
  const Tensor dw_part = want_dw ? empty({chunks, C}, f32_opts) : Tensor();
  const Tensor db_part = want_db ? empty({chunks, C}, f32_opts) : Tensor();
  const dim3 grid(unsigned((C + kColTile - 1) / kColTile), unsigned(chunks));
  const dim3 block(kColTile, kRowLanes);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    layer_norm_param_partials_kernel<T><<<grid, block, 0, stream>>>(
        static_cast<const T*>(gc.data_ptr()), static_cast<const T*>(xc.data_ptr()),
        mc.data<float>(), rc.data<float>(), rows, C, rows_per_chunk, f32_or_null(dw_part),
        f32_or_null(db_part));
    nu::check_launch();
  });
  auto finish = [&](const Tensor& out, const Tensor& part) {
    if (!out.defined()) return;
    const bool direct = out.dtype() == DType::f32 && out.is_contiguous();
    const Tensor total = direct ? out : empty({C}, f32_opts);
    sum_partials_kernel<<<nu::grid_for(C, 256), 256, 0, stream>>>(part.data<float>(), chunks, C,
                                                                   total.data<float>());
    nu::check_launch();
    if (!direct) out.copy_(total);
  };
  finish(grad_weight, dw_part);
  finish(grad_bias, db_part);
}

}  // namespace tessera::kernels::cuda
