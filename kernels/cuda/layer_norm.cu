// CUDA layer norm: host launchers and thin kernels over kernels/cuda/layer_norm_body.cuh. Rows of
// up to 1024 channels get one warp each (8 rows per block), longer rows a 512-thread block; the
// statistics come from one Welford pass merged across threads, everything accumulates in f32.
// grad_weight / grad_bias are summed per chunk of rows into partials, then the partials are summed
// in chunk order: deterministic, no atomics.
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/layer_norm_body.cuh"
#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;
namespace body = layer_norm_body;

template <typename T>
__global__ void layer_norm_forward_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float eps, T* __restrict__ y,
                                          float* __restrict__ mean, float* __restrict__ rstd,
                                          int64_t rows, int64_t C, int group) {
  __shared__ __align__(16) unsigned char shared[body::kForwardSharedBytes];
  body::Forward<T>::run(x, w, b, eps, y, mean, rstd, rows, C, group, blockDim.x, gridDim.x,
                        blockIdx.x, threadIdx.x, shared);
}

template <typename T>
__global__ void layer_norm_grad_x_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                         const float* __restrict__ w,
                                         const float* __restrict__ mean,
                                         const float* __restrict__ rstd, T* __restrict__ dx,
                                         int64_t rows, int64_t C, int group) {
  __shared__ __align__(16) unsigned char shared[body::kGradXSharedBytes];
  body::GradX<T>::run(g, x, w, mean, rstd, dx, rows, C, group, blockDim.x, gridDim.x, blockIdx.x,
                      threadIdx.x, shared);
}

// Block (kColTile, kRowLanes): the linear thread index is x + kColTile * y, as in the body.
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                 const float* __restrict__ mean,
                                                 const float* __restrict__ rstd, int64_t rows,
                                                 int64_t C, int64_t rows_per_chunk,
                                                 float* __restrict__ dw_part,
                                                 float* __restrict__ db_part) {
  __shared__ __align__(16) unsigned char shared[body::kPartialSharedBytes];
  body::ParamPartials<T>::run(g, x, mean, rstd, rows, C, rows_per_chunk, dw_part, db_part,
                              blockIdx.x, blockIdx.y, threadIdx.y * body::kColTile + threadIdx.x,
                              shared);
}

__global__ void sum_partials_kernel(const float* __restrict__ part, int64_t chunks, int64_t C,
                                    float* __restrict__ out) {
  body::SumPartials::run(part, chunks, C, out, blockDim.x, gridDim.x, blockIdx.x, threadIdx.x);
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
  const body::RowLaunch L = body::row_launch(rows, C);
  cudaStream_t stream = nu::stream_for(x);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    layer_norm_forward_kernel<T><<<unsigned(L.blocks), L.threads, 0, stream>>>(
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
    TS_CHECK(grad_x.shape() == x.shape() && grad_x.dtype() == x.dtype() && grad_x.device() == d, op,
             "expected grad_x like x, got ", grad_x.describe(), " and x ", x.describe());
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
    const body::RowLaunch L = body::row_launch(rows, C);
    dispatch_floating(x.dtype(), op, [&]<typename T>() {
      layer_norm_grad_x_kernel<T><<<unsigned(L.blocks), L.threads, 0, stream>>>(
          static_cast<const T*>(gc.data_ptr()), static_cast<const T*>(xc.data_ptr()),
          f32_or_null(w), mc.data<float>(), rc.data<float>(), static_cast<T*>(gxc.data_ptr()), rows,
          C, L.group);
      nu::check_launch();
    });
    nu::finish_output(gxc, grad_x);
  }
  if (!want_dw && !want_db) return;

  const body::ParamLaunch P = body::param_launch(rows, C);
  const int64_t chunks = P.chunks;
  const TensorOptions f32_opts{.dtype = DType::f32, .device = d};
  const Tensor dw_part = want_dw ? empty({chunks, C}, f32_opts) : Tensor();
  const Tensor db_part = want_db ? empty({chunks, C}, f32_opts) : Tensor();
  const dim3 grid(unsigned(P.col_blocks), unsigned(chunks));
  const dim3 block(body::kColTile, body::kRowLanes);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    layer_norm_param_partials_kernel<T><<<grid, block, 0, stream>>>(
        static_cast<const T*>(gc.data_ptr()), static_cast<const T*>(xc.data_ptr()),
        mc.data<float>(), rc.data<float>(), rows, C, P.rows_per_chunk, f32_or_null(dw_part),
        f32_or_null(db_part));
    nu::check_launch();
  });
  auto finish = [&](const Tensor& out, const Tensor& part) {
    if (!out.defined()) return;
    const bool direct = out.dtype() == DType::f32 && out.is_contiguous();
    const Tensor total = direct ? out : empty({C}, f32_opts);
    sum_partials_kernel<<<unsigned(body::grid_for(C, body::kSumThreads)), body::kSumThreads, 0,
                          stream>>>(part.data<float>(), chunks, C, total.data<float>());
    nu::check_launch();
    if (!direct) out.copy_(total);
  };
  finish(grad_weight, dw_part);
  finish(grad_bias, db_part);
}

}  // namespace tessera::kernels::cuda
