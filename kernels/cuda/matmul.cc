// CUDA matmul and fused linear through cuBLASLt. Row-major tensors are handed to the column-major
// library as their transposes (out^T = b^T a^T), batch dims become strided batches (stride 0 for
// broadcast operands), and an operand is copied only when its inner strides fit neither layout.
#include "kernels/cuda/matmul.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "core/strided_loop.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/cublaslt_api.h"

namespace tessera::kernels::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};

// A logical (rows, cols) matrix with element strides (rs, cs) as cuBLASLt reads it: stored
// column-major (op N, ld = column stride) or stored as its transpose (op T, ld = row stride). A
// dim of size 1 never steps, so its stride is free.
struct LtLayout {
  bool ok = false;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t stored_rows = 0, stored_cols = 0, ld = 0;
};

LtLayout lt_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) {
    return {true, CUBLAS_OP_N, rows, cols, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  }
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) {
    return {true, CUBLAS_OP_T, cols, rows, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  }
  return {};
}

// The last two dims of t, read as a logical matrix (transposed when `transposed`).
LtLayout lt_layout_of(const Tensor& t, bool transposed) {
  const int64_t n = t.dim();
  const int64_t r = t.size(n - 2), c = t.size(n - 1), rs = t.stride(n - 2), cs = t.stride(n - 1);
  return transposed ? lt_layout(c, r, cs, rs) : lt_layout(r, c, rs, cs);
}

bool gemm_readable(const Tensor& t) { return lt_layout_of(t, false).ok; }

// t with inner strides cuBLASLt can read. Broadcast batch dims (stride 0) stay broadcast: only one
// copy of the broadcast data is made dense.
Tensor gemm_operand(const Tensor& t) {
  if (gemm_readable(t)) return t;
  Tensor compact = t;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) compact = compact.narrow(d, 0, 1);
  }
  return compact.contiguous().expand(t.shape());
}

cudaDataType_t lt_dtype(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

// The largest power of two (up to 256) dividing every byte address a batched operand starts at.
uint32_t alignment(const void* ptr, int64_t batch_stride, size_t itemsize) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | uint64_t(batch_stride * int64_t(itemsize)) | 256u;
  return uint32_t(bits & (~bits + 1));
}

// RAII owners of the cuBLASLt descriptors of one call; destructors never throw.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d != nullptr) (void)cublaslt().MatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l != nullptr) (void)cublaslt().MatrixLayoutDestroy(l);
  }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p != nullptr) (void)cublaslt().MatmulPreferenceDestroy(p);
  }
};

// One column-major problem: C (m, n) = op(A) (m, k) op(B) (k, n) [+ beta C], `batch` times with
// the given element strides between batch entries, then the epilogue.
struct GemmCall {
  DType dtype = DType::f32;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  LtLayout a, b;
  const void* a_ptr = nullptr;
  const void* b_ptr = nullptr;
  void* c_ptr = nullptr;
  int64_t a_stride = 0, b_stride = 0, c_stride = 0, ldc = 0;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // (m) contiguous, for the bias epilogues
};

void set_layout(Layout& layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                int64_t stride) {
  TS_CUBLAS_CHECK(cublaslt().MatrixLayoutCreate(&layout.l, type, uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    TS_CUBLAS_CHECK(cublaslt().MatrixLayoutSetAttribute(layout.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                     sizeof(count)));
    TS_CUBLAS_CHECK(cublaslt().MatrixLayoutSetAttribute(layout.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof(stride)));
  }
}

// Runs the call; returns false (having run nothing) when cuBLASLt offers no algorithm for it,
// which only the epilogue callers handle (they fall back to an unfused epilogue).
bool try_gemm(const GemmCall& g, int device) {
  TS_CHECK(g.batch <= INT32_MAX, "matmul", "expected at most 2^31 - 1 batch entries, got ", g.batch);
  const cudaStream_t stream = ::tessera::cuda::current_stream(device);
  const LtContext ctx = lt_context(device, stream);
  const cudaDataType_t type = lt_dtype(g.dtype);
  const size_t itemsize = dtype_size(g.dtype);

  MatmulDesc desc;
  const bool tf32 = g.dtype == DType::f32 && g_allow_tf32.load(std::memory_order_relaxed);
  TS_CUBLAS_CHECK(cublaslt().MatmulDescCreate(&desc.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                           CUDA_R_32F));
  TS_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &g.a.op, sizeof(g.a.op)));
  TS_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &g.b.op, sizeof(g.b.op)));
  if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    TS_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                                   sizeof(g.epilogue)));
    if (g.bias != nullptr) {
      TS_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                     sizeof(g.bias)));
    }
  }

  Layout la, lb, lc;
  set_layout(la, type, g.a.stored_rows, g.a.stored_cols, g.a.ld, g.batch, g.a_stride);
  set_layout(lb, type, g.b.stored_rows, g.b.stored_cols, g.b.ld, g.batch, g.b_stride);
  set_layout(lc, type, g.m, g.n, g.ldc, g.batch, g.c_stride);

  Preference pref;
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceCreate(&pref.p));
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &ctx.workspace_bytes, sizeof(ctx.workspace_bytes)));
  // The default assumes 256-byte aligned operands; views and batch strides may be less aligned.
  const uint32_t align_a = alignment(g.a_ptr, g.a_stride, itemsize);
  const uint32_t align_b = alignment(g.b_ptr, g.b_stride, itemsize);
  const uint32_t align_c = alignment(g.c_ptr, g.c_stride, itemsize);
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &align_a, sizeof(align_a)));
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                       &align_b, sizeof(align_b)));
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                       &align_c, sizeof(align_c)));
  TS_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                       &align_c, sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublaslt().MatmulAlgoGetHeuristic(ctx.handle, desc.d, la.l, lb.l, lc.l, lc.l, pref.p, 1, &result, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  TS_CUBLAS_CHECK(status);

  const float alpha = 1.0f;
  TS_CUBLAS_CHECK(cublaslt().Matmul(ctx.handle, desc.d, &alpha, g.a_ptr, la.l, g.b_ptr, lb.l, &g.beta, g.c_ptr,
                                 lc.l, g.c_ptr, lc.l, &result.algo, ctx.workspace, ctx.workspace_bytes, stream));
  return true;
}

void run_gemm(const GemmCall& g, int device) {
  TS_CHECK(try_gemm(g, device), "matmul", "expected cuBLASLt to offer an algorithm for (", g.m, ", ", g.k,
           ") @ (", g.k, ", ", g.n, ") x ", g.batch, " in ", dtype_name(g.dtype), ", got none");
}

const char* byte_ptr(const Tensor& t, int64_t elem_offset) {
  return static_cast<const char*>(t.data_ptr()) + elem_offset * int64_t(t.itemsize());
}

// out = a @ b (+ out) with readable operands and an out whose matrices cuBLASLt can write
// (row-major or column-major). Row-major out runs as out^T = b^T a^T.
void matmul_readable(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  const LtLayout out_t = lt_layout_of(out, true);  // out^T (N, M) stored column-major?
  const bool row_major = out_t.ok && out_t.op == CUBLAS_OP_N;
  const LtLayout out_c = row_major ? out_t : lt_layout_of(out, false);
  TS_CHECK(out_c.ok && out_c.op == CUBLAS_OP_N, "matmul", "internal: out ", out.describe(), " not writable");

  Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  std::array<Strides, 3> batch_strides;
  const Tensor* ops[3] = {&a, &b, &out};
  for (int i = 0; i < 3; ++i) batch_strides[i] = Strides(ops[i]->strides().begin(), ops[i]->strides().end() - 2);
  const StridedLoop<3> loop(batch_shape, batch_strides);

  GemmCall g;
  g.dtype = out.dtype();
  g.k = k;
  g.batch = loop.row_size();
  g.ldc = out_c.ld;
  g.beta = accumulate ? 1.0f : 0.0f;
  const auto s = loop.row_strides();
  if (row_major) {  // C = out^T (N, M) = b^T (N, K) a^T (K, M)
    g.m = n, g.n = m;
    g.a = lt_layout_of(b, true), g.b = lt_layout_of(a, true);
    g.a_stride = s[1], g.b_stride = s[0];
  } else {  // C = out (M, N) = a (M, K) b (K, N)
    g.m = m, g.n = n;
    g.a = lt_layout_of(a, false), g.b = lt_layout_of(b, false);
    g.a_stride = s[0], g.b_stride = s[1];
  }
  g.c_stride = s[2];
  TS_CHECK(g.a.ok && g.b.ok, "matmul", "internal: operands ", a.describe(), ", ", b.describe(), " not readable");
  const int device = out.device().index;
  loop.for_rows(0, loop.num_rows(), [&](const std::array<int64_t, 3>& off) {
    GemmCall call = g;
    call.a_ptr = row_major ? byte_ptr(b, off[1]) : byte_ptr(a, off[0]);
    call.b_ptr = row_major ? byte_ptr(a, off[0]) : byte_ptr(b, off[1]);
    call.c_ptr = const_cast<char*>(byte_ptr(out, off[2]));
    run_gemm(call, device);
  });
}

bool out_writable(const Tensor& out) {
  const LtLayout t = lt_layout_of(out, true), c = lt_layout_of(out, false);
  return (t.ok && t.op == CUBLAS_OP_N) || (c.ok && c.op == CUBLAS_OP_N);
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  constexpr const char* kOp = "matmul";
  TS_CHECK(a.dim() >= 2 && b.dim() == a.dim() && out.dim() == a.dim(), kOp,
           "expected a, b, out with the same number (>= 2) of dims, got ", a.describe(), ", ", b.describe(),
           ", ", out.describe());
  const int64_t nd = a.dim();
  const int64_t m = a.size(nd - 2), k = a.size(nd - 1), n = b.size(nd - 1);
  bool shapes_ok = b.size(nd - 2) == k && out.size(nd - 2) == m && out.size(nd - 1) == n;
  for (int64_t d = 0; d + 2 < nd; ++d) shapes_ok &= a.size(d) == out.size(d) && b.size(d) == out.size(d);
  TS_CHECK(shapes_ok, kOp, "expected (batch..., M, K) @ (batch..., K, N) -> (batch..., M, N), got ",
           shape_str(a.shape()), " @ ", shape_str(b.shape()), " -> ", shape_str(out.shape()));
  TS_CHECK(a.dtype() == b.dtype() && a.dtype() == out.dtype() && is_floating(a.dtype()), kOp,
           "expected one floating dtype for a, b and out, got ", dtype_name(a.dtype()), ", ",
           dtype_name(b.dtype()), ", ", dtype_name(out.dtype()));
  TS_CHECK(a.device().is_cuda() && b.device() == a.device() && out.device() == a.device(), kOp,
           "expected a, b and out on one CUDA device, got ", a.describe(), ", ", b.describe(), ", ",
           out.describe());
  for (int64_t d = 0; d + 2 < nd; ++d) {
    TS_CHECK(out.stride(d) != 0 || out.size(d) == 1, kOp, "expected an out without broadcast (stride 0) dims, got strides ",
             shape_str(out.strides()), " for ", out.describe());
  }
  if (out.numel() == 0) return;
  ::tessera::cuda::DeviceGuard guard(out.device().index);
  if (k == 0) {  // an empty sum: out is 0, or unchanged when accumulating
    if (!accumulate) out.zero_();
    return;
  }
  const Tensor ga = gemm_operand(a), gb = gemm_operand(b);
  if (out_writable(out)) {
    matmul_readable(ga, gb, out, accumulate);
    return;
  }
  // Compute into a dense result, then scatter it into out.
  // out is not contiguous here (a contiguous out is writable), so contiguous() copies.
  const Tensor result =
      accumulate ? out.contiguous() : empty(out.shape(), {.dtype = out.dtype(), .device = out.device()});
  matmul_readable(ga, gb, result, accumulate);
  out.copy_(result);
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out) {
  constexpr const char* kOp = "linear";
  TS_CHECK(x.defined() && w.defined() && out.defined() && x.dim() == 2 && w.dim() == 2 && out.dim() == 2,
           kOp, "expected x (M, K), w (N, K) and out (M, N), got ", x.describe(), ", ", w.describe(),
           ", ", out.describe());
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  TS_CHECK(w.size(1) == k && out.size(0) == m && out.size(1) == n, kOp,
           "expected x (M, K), w (N, K) and out (M, N), got ", shape_str(x.shape()), ", ",
           shape_str(w.shape()), ", ", shape_str(out.shape()));
  TS_CHECK(!bias.defined() || bias.shape() == Shape{n}, kOp, "expected bias (", n, "), got ", bias.describe());
  TS_CHECK(is_floating(x.dtype()) && w.dtype() == x.dtype() && out.dtype() == x.dtype() &&
               (!bias.defined() || bias.dtype() == x.dtype()),
           kOp, "expected one floating dtype for x, w, bias and out, got ", x.describe(), ", ", w.describe(),
           ", ", out.describe());
  TS_CHECK(x.device().is_cuda() && w.device() == x.device() && out.device() == x.device() &&
               (!bias.defined() || bias.device() == x.device()),
           kOp, "expected x, w, bias and out on one CUDA device, got ", x.describe(), ", ", w.describe(),
           ", ", out.describe());
  if (out.numel() == 0) return;
  ::tessera::cuda::DeviceGuard guard(out.device().index);
  // The epilogue reads a packed bias; a fresh copy is also aligned for every algorithm.
  const bool bias_ok = !bias.defined() || ((n <= 1 || bias.stride(0) == 1) &&
                                           reinterpret_cast<uintptr_t>(bias.data_ptr()) % 16 == 0);
  const Tensor b = bias_ok ? bias : bias.contiguous().clone();
  if (k == 0) {  // act(bias) or act(0)
    out.zero_();
    detail::bias_activation(out, b, act);
    return;
  }
  // out (M, N) row-major is out^T (N, M) column-major, whose rows (out features) the bias runs along.
  const LtLayout out_t = lt_layout(n, m, out.stride(1), out.stride(0));
  const bool direct = out_t.ok && out_t.op == CUBLAS_OP_N;
  const Tensor target = direct ? out : empty({m, n}, {.dtype = out.dtype(), .device = out.device()});
  const Tensor gx = gemm_operand(x), gw = gemm_operand(w);

  GemmCall g;
  g.dtype = out.dtype();
  g.m = n, g.n = m, g.k = k;
  g.a = lt_layout(n, k, gw.stride(0), gw.stride(1));  // w (N, K)
  g.b = lt_layout(k, m, gx.stride(1), gx.stride(0));  // x^T (K, M)
  g.a_ptr = gw.data_ptr();
  g.b_ptr = gx.data_ptr();
  g.c_ptr = target.data_ptr();
  g.ldc = direct ? out_t.ld : n;
  g.bias = b.defined() ? b.data_ptr() : nullptr;
  const bool gelu = act == Activation::gelu_tanh;
  g.epilogue = b.defined() ? (gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                           : (gelu ? CUBLASLT_EPILOGUE_GELU : CUBLASLT_EPILOGUE_DEFAULT);
  TS_CHECK(g.a.ok && g.b.ok, kOp, "internal: operands ", gx.describe(), ", ", gw.describe(), " not readable");
  if (!try_gemm(g, out.device().index)) {  // no fused algorithm: plain GEMM, separate epilogue
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    g.bias = nullptr;
    run_gemm(g, out.device().index);
    detail::bias_activation(target, b, act);
  }
  if (!direct) out.copy_(target);
}

}  // namespace tessera::kernels::cuda
