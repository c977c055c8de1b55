// CUDA Adam / AdamW through adam_math.h's adam_element, so the GPU's numbers equal the CPU's bit for
// bit. Many tensors go in one launch: a table of up to kMaxTensors (pointers, sizes, first chunk)
// travels as a kernel parameter, and each block updates one chunk of kChunk elements of one tensor.
// adam_update is the one-entry case of adam_update_multi.
#include "kernels/cuda/adam.h"

#include <vector>

#include "kernels/adam_math.h"
#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;

constexpr int kMaxTensors = 48;      // keeps the table well under the 4 KB parameter limit
constexpr int64_t kChunk = 16384;    // elements per block
constexpr int kThreads = 512;

template <typename P, typename G>
struct MultiTable {
  P* param[kMaxTensors];
  const G* grad[kMaxTensors];
  float* exp_avg[kMaxTensors];
  float* exp_avg_sq[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t first_chunk[kMaxTensors + 1];  // chunks of tensor t: [first_chunk[t], first_chunk[t + 1])
  int count;
};

template <typename P, typename G>
__global__ void adam_multi_kernel(const __grid_constant__ MultiTable<P, G> table,
                                  const AdamCoeffs c) {
  const int64_t chunks = table.first_chunk[table.count];
  for (int64_t b = blockIdx.x; b < chunks; b += gridDim.x) {
    int t = 0;
    while (table.first_chunk[t + 1] <= b) ++t;
    const int64_t begin = (b - table.first_chunk[t]) * kChunk;
    const int64_t end = min(table.numel[t], begin + kChunk);
    P* p = table.param[t];
    const G* g = table.grad[t];
    float* m = table.exp_avg[t];
    float* v = table.exp_avg_sq[t];
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      float pv = float(p[i]);
      float mv = m[i], vv = v[i];
      adam_element(pv, float(g[i]), mv, vv, c);
      p[i] = P(pv);
      m[i] = mv;
      v[i] = vv;
    }
  }
}

void check_operand(const Tensor& t, int64_t n, Device d, const char* name, bool must_be_f32) {
  TS_CHECK(t.defined() && t.is_contiguous() && t.numel() == n && is_floating(t.dtype()) &&
               (!must_be_f32 || t.dtype() == DType::f32) && t.device() == d,
           "adam_update", "expected ", name, " contiguous ", must_be_f32 ? "f32" : "floating",
           " with ", n, " elements on ", d.str(), ", got ",
           t.defined() ? t.describe() : "undefined");
}

// Launches the entries (all with param dtype P and grad dtype G) in tables of kMaxTensors.
template <typename P, typename G>
void launch_group(const std::vector<const AdamTensors*>& entries, const AdamCoeffs& c,
                  cudaStream_t stream) {
  for (size_t first = 0; first < entries.size(); first += kMaxTensors) {
    MultiTable<P, G> table{};
    const size_t last = std::min(entries.size(), first + kMaxTensors);
    int64_t chunks = 0;
    for (size_t e = first; e < last; ++e) {
      const AdamTensors& a = *entries[e];
      const int k = int(e - first);
      table.param[k] = static_cast<P*>(a.param.data_ptr());
      table.grad[k] = static_cast<const G*>(a.grad.data_ptr());
      table.exp_avg[k] = a.exp_avg.data<float>();
      table.exp_avg_sq[k] = a.exp_avg_sq.data<float>();
      table.numel[k] = a.param.numel();
      table.first_chunk[k] = chunks;
      chunks += (table.numel[k] + kChunk - 1) / kChunk;
    }
    table.count = int(last - first);
    table.first_chunk[table.count] = chunks;
    adam_multi_kernel<P, G><<<nu::grid_for(chunks, 1, 1 << 20), kThreads, 0, stream>>>(table, c);
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
        dispatch_floating(gt, "adam_update", [&]<typename G>() {
          launch_group<P, G>(entries, c, stream);
        });
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
