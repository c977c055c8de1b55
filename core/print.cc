// Tensor printing in PyTorch's manner: nested brackets, long dims abbreviated with "...".
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "core/tensor.h"

namespace tessera {
namespace {

constexpr int64_t kEdgeItems = 3;   // shown at each end of a long dim
constexpr int64_t kThreshold = 1000;  // abbreviate tensors with more elements

std::string format_value(double v, bool floating) {
  if (!floating) return std::to_string(int64_t(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  return buf;
}

void print_dim(std::ostringstream& os, const Tensor& t, int64_t d, int64_t offset, bool abbreviate,
               int indent) {
  const int64_t n = t.shape()[d];
  const bool floating = is_floating(t.dtype());
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (abbreviate && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (d + 1 == t.dim() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdgeItems;
    }
    int64_t off = offset + i * t.strides()[d];
    if (d + 1 == t.dim()) {
      double v = dispatch_dtype(t.dtype(), [&]<typename T>() { return to_double(static_cast<T*>(t.data_ptr())[off]); });
      os << format_value(v, floating);
    } else {
      print_dim(os, t, d + 1, off, abbreviate, indent + 1);
    }
    if (i + 1 < n) os << (d + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << "]";
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  Tensor c = to(kCPU);
  std::ostringstream os;
  os << "tensor(";
  if (dim() == 0) {
    double v = dispatch_dtype(dtype(), [&]<typename T>() { return to_double(*static_cast<T*>(c.data_ptr())); });
    os << format_value(v, is_floating(dtype()));
  } else {
    print_dim(os, c, 0, 0, numel() > kThreshold, 7);
  }
  os << ", shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype()) << ", device=" << device().str();
  if (requires_grad()) os << ", requires_grad=true";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace tessera
