// Times Tessera's SGEMM on the GPT-2 124M layer shapes (forward and both backward products) and
// 2048^3, per micro-kernel ISA, with Eigen at the project's baseline flags as a peer.
#include <Eigen/Core>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace {

using tessera::kernels::cpu::detail::GemmIsa;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct BenchShape {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// Best-of-repeats wall time of fn, in seconds: repeats until ~0.3 s are spent (at least 3).
double best_seconds(const std::function<void()>& fn) {
  fn();  // warm-up: page faults, packing buffers, thread pool
  double best = 1e30, spent = 0.0;
  for (int rep = 0; rep < 3 || spent < 0.3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

struct Operands {
  std::vector<float> a, b, c;
};

Operands make_operands(const BenchShape& s) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Operands o{std::vector<float>(s.m * s.k), std::vector<float>(s.k * s.n),
             std::vector<float>(s.m * s.n)};
  for (float& x : o.a) x = dist(rng);
  for (float& x : o.b) x = dist(rng);
  return o;
}

double tessera_gflops(GemmIsa isa, const BenchShape& s, Operands& o) {
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  const double t = best_seconds([&] {
    tessera::kernels::cpu::detail::sgemm_batched_with_isa(
        isa, s.trans_a, s.trans_b, 1, s.m, s.n, s.k, 1.0f, o.a.data(), lda, 0, o.b.data(), ldb,
        0, 0.0f, o.c.data(), s.n, 0);
  });
  return 2.0 * s.m * s.n * s.k / t * 1e-9;
}

double eigen_gflops(const BenchShape& s, Operands& o) {
  // Stored shapes: A (m, k) or (k, m); B (k, n) or (n, k).
  Eigen::Map<const RowMajor> a(o.a.data(), s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k);
  Eigen::Map<const RowMajor> b(o.b.data(), s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n);
  Eigen::Map<RowMajor> c(o.c.data(), s.m, s.n);
  const double t = best_seconds([&] {
    if (s.trans_a && s.trans_b) {
      c.noalias() = a.transpose() * b.transpose();
    } else if (s.trans_a) {
      c.noalias() = a.transpose() * b;
    } else if (s.trans_b) {
      c.noalias() = a * b.transpose();
    } else {
      c.noalias() = a * b;
    }
  });
  return 2.0 * s.m * s.n * s.k / t * 1e-9;
}

// For each GPT-2 linear layer (in -> out) and token count T: forward y = x W (T, in) x (in, out),
// input gradient dY W^T, weight gradient X^T dY.
std::vector<BenchShape> gpt2_shapes() {
  const int64_t layers[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  std::vector<BenchShape> shapes;
  for (int64_t tokens : {256, 1024}) {
    for (const auto& layer : layers) {
      const int64_t in = layer[0], out = layer[1];
      const std::string tag =
          "T=" + std::to_string(tokens) + " " + std::to_string(in) + "->" + std::to_string(out);
      shapes.push_back({tag + " fwd  A B  ", false, false, tokens, out, in});
      shapes.push_back({tag + " dX   A B^T", false, true, tokens, in, out});
      shapes.push_back({tag + " dW   A^T B", true, false, in, out, tokens});
    }
  }
  shapes.push_back({"2048^3            A B  ", false, false, 2048, 2048, 2048});
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  const bool has_avx512 = tessera::kernels::cpu::cpu_has_avx512();
  std::printf("sgemm GFLOP/s, %d threads, sgemm_isa() = %s, Eigen %d.%d.%d (%d threads)\n",
              omp_get_max_threads(), tessera::kernels::cpu::sgemm_isa(), EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::nbThreads());
  std::printf("%-34s %6s %6s %6s | %8s %8s %8s\n", "shape", "M", "N", "K", "avx2", "avx512",
              "eigen");
  // An optional argument keeps only the shapes whose name contains it, e.g. "T=256" or "2048".
  const std::string only = argc > 1 ? argv[1] : "";
  for (const BenchShape& s : gpt2_shapes()) {
    if (s.name.find(only) == std::string::npos) continue;
    Operands o = make_operands(s);
    const double avx2 = tessera_gflops(GemmIsa::kAvx2, s, o);
    const double avx512 = has_avx512 ? tessera_gflops(GemmIsa::kAvx512, s, o) : 0.0;
    const double eigen = eigen_gflops(s, o);
    std::printf("%-34s %6ld %6ld %6ld | %8.1f %8.1f %8.1f\n", s.name.c_str(),
                static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k), avx2,
                avx512, eigen);
    std::fflush(stdout);
  }
  return 0;
}
