// CUDA Adam / AdamW through adam_math.h's adam_element, so the GPU's numbers equal the CPU's bit
// for bit. Many tensors go in one launch: a table of up to kMaxTensors (pointers, sizes, first
// chunk) travels as a kernel parameter, and each block updates one chunk of kChunk elements of one
// tensor. adam_update is the one-entry case of adam_update_multi. The kernel body is in
// adam_body.cuh.
#include <vector>

#include "kernels/adam_math.h"
#include "kernels/cuda/adam.h"
#include "kernels/cuda/adam_body.cuh"
#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;
namespace ab = adam_body;

template <typename P, typename G>
__global__ void adam_multi_kernel(const __grid_constant__ ab::MultiTable<P, G> table,
                                  const AdamCoeffs c) {
  ab::adam_multi(table, c, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
}

void check_operand(const Tensor& t, int64_t n, Device d, const char* name, bool must_be_f32) {
  TS_CHECK(t.defined() && t.is_contiguous() && t.numel() == n && is_floating(t.dtype()) &&
               (!must_be_f32 || t.dtype() == DType::f32) && t.device() == d,
           "adam_update", "expected ", name, " contiguous ", must_be_f32 ? "f32" : "floating",
           " with ", n, " elements on ", d.str(), ", got ",
           t.defined() ? t.describe() : "undefined");
}

// Launches the entries (all with param dtype P and grad dtype G) in tables of ab::kMaxTensors.
template <typename P, typename G>
void launch_group(const std::vector<const AdamTensors*>& entries, const AdamCoeffs& c,
                  cudaStream_t stream) {
  for (size_t first = 0; first < entries.size(); first += ab::kMaxTensors) {
    ab::MultiTable<P, G> table{};
    const size_t last = std::min(entries.size(), first + ab::kMaxTensors);
    for (size_t e = first; e < last; ++e) {
      const AdamTensors& a = *entries[e];
      ab::table_add(table, static_cast<P*>(a.param.data_ptr()),
                    static_cast<const G*>(a.grad.data_ptr()), a.exp_avg.data<float>(),
                    a.exp_avg_sq.data<float>(), a.param.numel());
    }
    adam_multi_kernel<P, G><<<ab::table_blocks(table), ab::kThreads, 0, stream>>>(table, c);
    nu::check_launch();
  }
}

}  // namespace

void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& s) {
  if (tensors.empty()) return;
  TS_CHECK(s.step >= 1, "adam_update", "expected step >= 1 (1-based), got ", s.step);
  TS_CHECK(tensors.front().param.defined(), "adam_update", "expected a defined param");
  const Device d = tensors.front().param.device();
  // Non-empty entries grouped by (param dtype, grad dtype), in their order.
  std::vector<const AdamTensors*> groups[3][3];
  auto slot = [](DType t) { return t == DType::f32 ? 0 : t == DType::f16 ? 1 : 2; };
  for (const AdamTensors& a : tensors) {
    const int64_t n = a.param.defined() ? a.param.numel() : 0;
    check_operand(a.param, n, d, "param", false);
    check_operand(a.grad, n, d, "grad", false);
    check_operand(a.exp_avg, n, d, "exp_avg", true);
    check_operand(a.exp_avg_sq, n, d, "exp_avg_sq", true);
    if (n > 0) groups[slot(a.param.dtype())][slot(a.grad.dtype())].push_back(&a);
  }
  const AdamCoeffs c =
      adam_coeffs(s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.decoupled, s.step);
  nu::DeviceGuard guard(d);
  cudaStream_t stream = ::tessera::cuda::current_stream(d.index);
  for (const DType pt : {DType::f32, DType::f16, DType::bf16}) {
    for (const DType gt : {DType::f32, DType::f16, DType::bf16}) {
      const auto& entries = groups[slot(pt)][slot(gt)];
      if (entries.empty()) continue;
      dispatch_floating(pt, "adam_update", [&]<typename P>() {
        dispatch_floating(gt, "adam_update",
                          [&]<typename G>() { launch_group<P, G>(entries, c, stream); });
      });
    }
  }
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamStep& step) {
  const AdamTensors one{param, grad, exp_avg, exp_avg_sq};
  kernels::cuda::adam_update_multi(std::span<const AdamTensors>(&one, 1), step);
}

}  // namespace tessera::kernels::cuda
