// CUDA softmax, log-softmax and their backwards against the CPU: row lengths that take the warp
// kernel (up to 1024) and the block kernel (above), odd sizes, 3-d inputs, strided rows (last dim
// not contiguous) and strided outputs, every floating dtype, plus large logits and -inf entries.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

Tensor uniform(const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &gen);
  return t.to(dt);
}

struct Tol {
  double rtol, atol;
};

// Probabilities are at most 1 and log-probabilities O(log C); 16-bit outputs round one ulp apart.
Tol tol_for(DType dt) {
  switch (dt) {
    case DType::f16: return {2e-3, 2e-4};
    case DType::bf16: return {1.6e-2, 2e-3};
    default: return {3e-5, 1e-6};
  }
}

enum class Which { softmax, log_softmax };

void forward(Which w, const Tensor& x, const Tensor& out) {
  if (w == Which::softmax) return kernels::softmax(x, out);
  kernels::log_softmax(x, out);
}

void backward(Which w, const Tensor& y, const Tensor& g, const Tensor& gx) {
  if (w == Which::softmax) return kernels::softmax_backward(y, g, gx);
  kernels::log_softmax_backward(y, g, gx);
}

// Forward and backward of `w` on x's view `view`, CPU against GPU. The backward takes the CPU
// forward's output (so both sides see the same y) and a random grad.
template <typename View>
void compare(Which w, const Tensor& base, View view) {
  const Tensor x = view(base);
  const DType dt = x.dtype();
  const Tol tol = tol_for(dt);
  const Tensor y = empty(x.shape(), {.dtype = dt});
  forward(w, x, y);
  const Tensor y_g = empty(x.shape(), {.dtype = dt, .device = cuda_device()});
  forward(w, view(gpu(base)), y_g);
  require_close(y_g, y, tol.rtol, tol.atol);

  const Tensor g = uniform(x.shape(), dt, -1.0, 1.0, 77);
  const Tensor gx = empty(x.shape(), {.dtype = dt});
  backward(w, y, g, gx);
  const Tensor gx_g = empty(x.shape(), {.dtype = dt, .device = cuda_device()});
  backward(w, gpu(y), gpu(g), gx_g);
  // The backward's sum over the row amplifies each side's rounding by up to sqrt(C).
  require_close(gx_g, gx, tol.rtol * 4, tol.atol * 4);
}

}  // namespace

TEST_CASE("cuda softmax family matches the CPU on warp and block rows") {
  TS_REQUIRE_GPU();
  const Shape shapes[] = {{1, 1}, {5, 3}, {7, 33}, {3, 1000}, {2, 1024}, {3, 1025}, {2, 5001}, {2, 3, 77}, {17}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const Shape& s : shapes) {
      for (Which w : {Which::softmax, Which::log_softmax}) {
        INFO(dtype_name(dt) << " shape " << shape_str(s) << " log " << (w == Which::log_softmax));
        compare(w, uniform(s, dt, -8.0, 8.0, 5), [](const Tensor& t) { return t; });
      }
    }
  }
}

TEST_CASE("cuda softmax family on strided rows matches the CPU") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::bf16}) {
    for (Which w : {Which::softmax, Which::log_softmax}) {
      INFO(dtype_name(dt) << " log " << (w == Which::log_softmax));
      // (C, R) transposed: rows of stride R along the softmax dim; short and long rows.
      compare(w, uniform({45, 6}, dt, -4.0, 4.0, 6), [](const Tensor& t) { return t.transpose(0, 1); });
      compare(w, uniform({1500, 3}, dt, -4.0, 4.0, 7), [](const Tensor& t) { return t.transpose(0, 1); });
      // A slice of every other row of a 3-d tensor.
      compare(w, uniform({4, 6, 50}, dt, -4.0, 4.0, 8), [](const Tensor& t) { return t.slice(1, 0, 6, 2); });
    }
  }
  // A strided output: the odd columns of a GPU buffer.
  const Tensor x = uniform({8, 40}, DType::f32, -3.0, 3.0, 9);
  const Tensor ref = empty({8, 40});
  kernels::softmax(x, ref);
  const Tensor buf = zeros({8, 80}, {.device = cuda_device()});
  const Tensor out = buf.slice(1, 1, 80, 2);
  kernels::softmax(gpu(x), out);
  require_close(out, ref, 3e-5, 1e-6);
  require_close(buf.slice(1, 0, 80, 2), zeros({8, 40}), 0.0, 0.0);
}

TEST_CASE("cuda softmax handles large logits, -inf entries and empty tensors like the CPU") {
  TS_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>({1000.0, 999.0, -inf, 998.0, -50.0, -inf, 0.0, 3.0}, {2, 4});
  for (Which w : {Which::softmax, Which::log_softmax}) {
    const Tensor y = empty({2, 4});
    forward(w, x, y);
    const Tensor y_g = empty({2, 4}, {.device = cuda_device()});
    forward(w, gpu(x), y_g);
    require_close(y_g, y, 3e-5, 1e-6);
  }
  const Tensor e = empty({0, 5}, {.device = cuda_device()});
  kernels::softmax(e, empty({0, 5}, {.device = cuda_device()}));
  kernels::log_softmax_backward(empty({3, 0}, {.device = cuda_device()}), empty({3, 0}, {.device = cuda_device()}),
                                empty({3, 0}, {.device = cuda_device()}));
  CHECK_THROWS_AS(kernels::softmax(gpu(x), empty({2, 4}, {.dtype = DType::f16, .device = cuda_device()})), ValueError);
  CHECK_THROWS_AS(kernels::softmax(gpu(x).to(DType::i32), empty({2, 4}, {.dtype = DType::i32, .device = cuda_device()})),
                  ValueError);
}
