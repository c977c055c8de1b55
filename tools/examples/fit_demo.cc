// A small end-to-end run of the tensor engine and autograd: a two-layer GELU network learns to
// separate three interleaved spirals (a generated data set, so nothing is downloaded). A linear
// model tops out near 50% accuracy on this data; this network passes 95%.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera.h"

using namespace tessera;

namespace {

struct Batch {
  Tensor x;  // (N, 2)
  Tensor y;  // (N) class ids
};

// Three spiral arms with Gaussian jitter; class c's arm is rotated by 2*pi*c/3.
Batch make_spirals(int64_t per_class, uint64_t seed) {
  Generator gen(seed);
  Tensor noise = randn({3 * per_class, 2}, {}, &gen);
  const float* jitter = noise.data<float>();
  std::vector<float> xs(3 * per_class * 2);
  std::vector<int64_t> ys(3 * per_class);
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < per_class; ++i) {
      int64_t n = c * per_class + i;
      double r = double(i) / double(per_class);
      double theta = 4.0 * r + 2.0 * M_PI * double(c) / 3.0;
      xs[2 * n] = float(r * std::cos(theta) + 0.02 * jitter[2 * n]);
      xs[2 * n + 1] = float(r * std::sin(theta) + 0.02 * jitter[2 * n + 1]);
      ys[n] = c;
    }
  }
  return {from_vector(xs, {3 * per_class, 2}), from_vector(ys, {3 * per_class}, {.dtype = DType::i64})};
}

Tensor init_weight(int64_t out, int64_t in, Generator* gen) {
  Tensor w = randn({out, in}, {}, gen);
  mul_(w, 1.0 / std::sqrt(double(in)));
  w.set_requires_grad(true);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 400;
  Batch data = make_spirals(300, 1);
  Generator gen(42);
  const int64_t hidden = 64;
  Tensor w1 = init_weight(hidden, 2, &gen), b1 = zeros({hidden}, {.requires_grad = true});
  Tensor w2 = init_weight(3, hidden, &gen), b2 = zeros({3}, {.requires_grad = true});
  std::vector<Tensor> params = {w1, b1, w2, b2};
  std::vector<Tensor> velocity;
  for (const Tensor& p : params) velocity.push_back(zeros_like(p));
  const double lr = 0.5, momentum = 0.9;

  std::printf("fit_demo: 900 points, 3 spiral classes, 2 -> %ld -> 3 GELU network, SGD momentum\n",
              long(hidden));
  auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= steps; ++step) {
    Tensor logits = linear(gelu(linear(data.x, w1, b1)), w2, b2);
    Tensor loss = cross_entropy(logits, data.y);
    for (const Tensor& p : params) p.set_grad(Tensor());
    autograd::backward({loss});
    {
      autograd::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) {
        mul_(velocity[i], momentum);
        add_(velocity[i], params[i].grad());
        add_(params[i], velocity[i], -lr);
      }
    }
    if (step % 50 == 0 || step == 1) {
      autograd::NoGradGuard no_grad;
      double acc = mean(to_dtype(eq(argmax(logits, 1), data.y), DType::f32)).item();
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %4d  loss %.4f  accuracy %5.1f%%  %.0f samples/s\n", step, loss.item(), 100.0 * acc,
                  double(step) * 900.0 / secs);
      std::fflush(stdout);
    }
  }
  return 0;
}
