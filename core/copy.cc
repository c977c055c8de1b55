#include "core/copy.h"

#include <cstring>

#include "core/parallel.h"
#include "core/profiler.h"
#include "core/strided_loop.h"

namespace tessera {
namespace {

CopyFn g_device_copy = nullptr;
FillFn g_device_fill = nullptr;

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return float(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(float(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return To(float(v));
  } else {
    return To(v);
  }
}

void copy_cpu(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), size_t(n) * dst.itemsize());
    return;
  }
  StridedLoop<2> loop(dst.shape(), {dst.strides(), src.strides()});
  const int64_t row = loop.row_size();
  const auto rs = loop.row_strides();
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    dispatch_dtype(src.dtype(), [&]<typename S>() {
      D* d = static_cast<D*>(dst.data_ptr());
      const S* s = static_cast<const S*>(src.data_ptr());
      parallel_for(loop.num_rows(), std::max<int64_t>(1, 32768 / row), [&](int64_t b, int64_t e) {
        loop.for_rows(b, e, [&](const std::array<int64_t, 2>& off) {
          D* dp = d + off[0];
          const S* sp = s + off[1];
          for (int64_t i = 0; i < row; ++i) dp[i * rs[0]] = convert<D>(sp[i * rs[1]]);
        });
      });
    });
  });
}

}  // namespace

void copy_tensor(const Tensor& src, const Tensor& dst) {
  TS_PROFILE("copy", "kernel");
  TS_CHECK(src.shape() == dst.shape(), "copy", "expected equal shapes, got ", src.describe(), " and ",
           dst.describe());
  if (src.device().is_cpu() && dst.device().is_cpu()) return copy_cpu(src, dst);
  TS_CHECK(g_device_copy != nullptr, "copy", "CUDA is not available (copy from ", src.device().str(),
           " to ", dst.device().str(), ")");
  g_device_copy(src, dst);
}

void fill_tensor(const Tensor& dst, double value) {
  TS_PROFILE("fill", "kernel");
  if (!dst.device().is_cpu()) {
    TS_CHECK(g_device_fill != nullptr, "fill", "CUDA is not available (fill on ", dst.device().str(), ")");
    return g_device_fill(dst, value);
  }
  if (dst.numel() == 0) return;
  StridedLoop<1> loop(dst.shape(), {dst.strides()});
  const int64_t row = loop.row_size();
  const int64_t rs = loop.row_strides()[0];
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    const D v = convert<D>(value);
    D* d = static_cast<D*>(dst.data_ptr());
    parallel_for(loop.num_rows(), std::max<int64_t>(1, 65536 / row), [&](int64_t b, int64_t e) {
      loop.for_rows(b, e, [&](const std::array<int64_t, 1>& off) {
        for (int64_t i = 0; i < row; ++i) d[off[0] + i * rs] = v;
      });
    });
  });
}

void register_device_copy(DeviceType, CopyFn copy, FillFn fill) {
  g_device_copy = copy;
  g_device_fill = fill;
}

}  // namespace tessera
