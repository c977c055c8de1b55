// CUDA softmax, log-softmax and their backwards over the last dim: the launchers and thin kernels
// over the bodies in softmax_body.cuh (one warp per row up to kBlockCols, one block per row above,
// f32 accumulation, the CPU's max rule and the shared math::exp). Rows may have any strides.
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/softmax_body.cuh"

namespace tessera::kernels::cuda {
namespace {

using softmax_body::Kind;
template <typename T>
using Params = softmax_body::Params<T, OffsetCalc<3, int64_t>>;

template <typename T, bool kBlock>
__global__ void __launch_bounds__(softmax_body::kThreads) softmax_kernel(Params<T> p) {
  __shared__ __align__(16) unsigned char shared[softmax_body::kSharedBytes];
  softmax_body::RowsBody<T, kBlock>::run(p, gridDim.x, blockIdx.x, threadIdx.x, shared);
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), op,
           "expected tensors of equal shape and dtype, got ", a.describe(), " and ", b.describe());
}

// b may be undefined (forward kinds).
void launch(Kind kind, const char* op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cuda_tensors(op, {&a, &b, &out});
  check_pair(op, a, out);
  if (b.defined()) check_pair(op, a, b);
  const Tensor& bb = b.defined() ? b : a;
  const int64_t nd = out.dim();
  const int64_t cols = nd == 0 ? 1 : out.size(nd - 1);
  const int64_t n_rows = cols == 0 ? 0 : out.numel() / cols;
  dispatch_floating(a.dtype(), op, [&]<typename T>() {
    if (n_rows == 0) return;
    const Shape lead(out.shape().begin(), out.shape().end() - (nd == 0 ? 0 : 1));
    auto lead_strides = [&](const Tensor& t) {
      return Strides(t.strides().begin(), t.strides().begin() + int64_t(lead.size()));
    };
    auto last_stride = [&](const Tensor& t) { return nd == 0 ? int64_t(0) : t.stride(nd - 1); };
    Params<T> p{};
    p.a = static_cast<const T*>(a.data_ptr());
    p.b = static_cast<const T*>(bb.data_ptr());
    p.out = static_cast<T*>(out.data_ptr());
    p.rows = make_calc64<3>(lead, {lead_strides(a), lead_strides(bb), lead_strides(out)}, op);
    p.sa = last_stride(a);
    p.sb = last_stride(bb);
    p.so = last_stride(out);
    p.n_rows = n_rows;
    p.cols = cols;
    p.kind = kind;
    TensorDeviceGuard guard(out);
    cudaStream_t stream = stream_of(out);
    const unsigned blocks = unsigned(softmax_body::blocks_for(n_rows, cols));
    if (softmax_body::block_rows(cols)) {
      softmax_kernel<T, true><<<blocks, softmax_body::kThreads, 0, stream>>>(p);
    } else {
      softmax_kernel<T, false><<<blocks, softmax_body::kThreads, 0, stream>>>(p);
    }
    TS_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void softmax(const Tensor& x, const Tensor& out) {
  launch(Kind::softmax, "softmax", x, Tensor(), out);
}

void log_softmax(const Tensor& x, const Tensor& out) {
  launch(Kind::log_softmax, "log_softmax", x, Tensor(), out);
}

void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  launch(Kind::softmax_backward, "softmax_backward", y, grad_y, grad_x);
}

void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  launch(Kind::log_softmax_backward, "log_softmax_backward", y, grad_y, grad_x);
}

}  // namespace tessera::kernels::cuda
