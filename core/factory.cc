#include "core/factory.h"

#include <cmath>
#include <cstring>

#include "core/copy.h"
#include "core/parallel.h"
#include "core/philox.h"

namespace tessera {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

Tensor empty(const Shape& shape, const TensorOptions& opts) {
  for (int64_t s : shape) TS_CHECK(s >= 0, "empty", "expected non-negative sizes, got ", shape_str(shape));
  Tensor t(std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(opts.dtype), opts.device), shape,
           contiguous_strides(shape), 0, opts.dtype);
  if (opts.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor full(const Shape& shape, double value, const TensorOptions& opts) {
  Tensor t = empty(shape, opts);
  fill_tensor(t, value);
  return t;
}
Tensor zeros(const Shape& shape, const TensorOptions& opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, const TensorOptions& opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double value, const TensorOptions& opts) { return full({}, value, opts); }

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }

Tensor arange(double start, double end, double step, const TensorOptions& opts) {
  TS_CHECK(step != 0.0, "arange", "expected a non-zero step");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((end - start) / step)));
  Tensor host = empty({n}, {.dtype = opts.dtype});
  dispatch_dtype(opts.dtype, [&]<typename T>() {
    T* p = host.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = from_double<T>(start + double(i) * step);
  });
  return host.to(opts.device);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& opts) {
  TS_CHECK(int64_t(values.size()) == shape_numel(shape), "from_vector", "expected ", shape_numel(shape),
           " values for shape ", shape_str(shape), ", got ", values.size());
  if constexpr (std::is_same_v<T, double>) {
    // Doubles convert straight to the target type, so large integers stay exact.
    Tensor host = empty(shape, {.dtype = opts.dtype});
    dispatch_dtype(opts.dtype, [&]<typename U>() {
      for (size_t i = 0; i < values.size(); ++i) host.data<U>()[i] = from_double<U>(values[i]);
    });
    Tensor out = host.to(opts.device);
    if (opts.requires_grad) out.set_requires_grad(true);
    return out;
  } else {
    Tensor host = empty(shape, {.dtype = dtype_of<T>});
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) host.data<bool>()[i] = values[i];
    } else {
      std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
    }
    Tensor out = host.to(opts.dtype).to(opts.device);
    if (opts.requires_grad) out.set_requires_grad(true);
    return out;
  }
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, const TensorOptions& opts) {
  return from_vector<float>(values, shape, opts);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  DType t = std::is_same_v<T, double> ? DType::f32 : dtype_of<std::conditional_t<std::is_same_v<T, double>, float, T>>;
  return from_vector(values, shape, TensorOptions{.dtype = t, .device = device});
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, const TensorOptions&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, const TensorOptions&);

namespace {
// Where the draws are written: `t` itself when it is a contiguous CPU f32 tensor, else a CPU f32
// buffer converted into `t` afterwards (other dtypes, strides, devices). Drawing in place keeps a
// model's build at one copy of each parameter (ZeRO stage 3's sharded build counts on it).
Tensor draw_target(const Tensor& t) {
  if (t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous()) return t;
  return empty(t.shape(), {.dtype = DType::f32});
}

void finish_draw(const Tensor& drawn, const Tensor& t) {
  if (!drawn.is_same(t)) copy_tensor(drawn, t);
  t.bump_version();
}

// Fills `t` with draw(seed, first + i) (i: the element's index in row-major order).
template <typename Draw>
void draw_into(const Tensor& t, Generator* gen, Draw draw) {
  Generator& g = gen ? *gen : default_generator();
  const int64_t n = t.numel();
  const uint64_t seed = g.seed(), first = g.reserve(uint64_t(n));
  Tensor host = draw_target(t);
  float* p = host.data<float>();
  parallel_for(n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = draw(seed, first + uint64_t(i));
  });
  finish_draw(host, t);
}

// draw_into for a slice of a whole draw: element i of t takes the counter of its global position.
template <typename Draw>
void draw_slice_into(const Tensor& t, const DrawSlice& at, Draw draw) {
  const int64_t dims = int64_t(at.whole.size());
  TS_CHECK(t.dim() == dims && int64_t(at.start.size()) == dims, "draw_slice",
           "expected a slice of ", dims, " dimensions with ", dims, " starts, got ", t.describe(),
           " with ", at.start.size());
  for (int64_t d = 0; d < dims; ++d) {
    TS_CHECK(at.start[d] >= 0 && at.start[d] + t.size(d) <= at.whole[d], "draw_slice",
             "expected the slice inside the whole ", shape_str(at.whole), ", got start ",
             at.start[d], " and size ", t.size(d), " in dimension ", d);
  }
  std::vector<int64_t> whole_stride(size_t(dims), 1);
  for (int64_t d = dims - 2; d >= 0; --d) whole_stride[d] = whole_stride[d + 1] * at.whole[d + 1];
  const int64_t n = t.numel();
  Tensor host = draw_target(t);
  float* p = host.data<float>();
  parallel_for(n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t rest = i, global = 0;
      for (int64_t d = dims - 1; d >= 0; --d) {
        const int64_t idx = rest % t.size(d);
        rest /= t.size(d);
        global += (at.start[d] + idx) * whole_stride[d];
      }
      p[i] = draw(at.seed, at.first + uint64_t(global));
    }
  });
  finish_draw(host, t);
}
}  // namespace

void normal_slice_(const Tensor& t, double mean, double std, const DrawSlice& at) {
  const float m = float(mean), s = float(std);
  draw_slice_into(t, at, [m, s](uint64_t seed, uint64_t i) { return m + s * philox_normal(seed, i); });
}

void uniform_slice_(const Tensor& t, double low, double high, const DrawSlice& at) {
  const float lo = float(low), span = float(high - low);
  draw_slice_into(t, at,
                  [lo, span](uint64_t seed, uint64_t i) { return lo + span * philox_uniform(seed, i); });
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  const float m = float(mean), s = float(std);
  draw_into(t, gen, [m, s](uint64_t seed, uint64_t i) { return m + s * philox_normal(seed, i); });
}

void uniform_(const Tensor& t, double low, double high, Generator* gen) {
  const float lo = float(low), span = float(high - low);
  draw_into(t, gen, [lo, span](uint64_t seed, uint64_t i) { return lo + span * philox_uniform(seed, i); });
}

Tensor randn(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  TS_CHECK(is_floating(opts.dtype), "randn", "expected a floating dtype, got ", dtype_name(opts.dtype));
  Tensor t = empty(shape, {.dtype = opts.dtype, .device = opts.device});
  normal_(t, 0.0, 1.0, gen);
  if (opts.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor rand(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  TS_CHECK(is_floating(opts.dtype), "rand", "expected a floating dtype, got ", dtype_name(opts.dtype));
  Tensor t = empty(shape, {.dtype = opts.dtype, .device = opts.device});
  uniform_(t, 0.0, 1.0, gen);
  if (opts.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts, Generator* gen) {
  TS_CHECK(high > low, "randint", "expected low < high, got ", low, " and ", high);
  Generator& g = gen ? *gen : default_generator();
  const int64_t n = shape_numel(shape);
  const uint64_t seed = g.seed(), first = g.reserve(uint64_t(n));
  const uint64_t range = uint64_t(high - low);
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) {
    Philox4 r = philox(seed, first + uint64_t(i));
    uint64_t bits = (uint64_t(r.v[1]) << 32) | r.v[0];
    values[i] = low + int64_t(bits % range);
  }
  return from_vector(values, shape, {.dtype = opts.dtype, .device = opts.device});
}

}  // namespace tessera
