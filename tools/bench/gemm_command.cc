// `bench gemm`: Tessera's SGEMM per micro-kernel ISA beside OpenBLAS's cblas_sgemm called directly
// with the kernel family of the same ISA, on the products a GPT-2 124M step runs (each linear's
// forward, input gradient and weight gradient) and on the shards 1D tensor parallelism cuts them
// into. Both sides run on the same operands, timed call by call in alternation.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/openblas_peer.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/timer.h"

namespace tessera::bench {

const char* const kGemmUsage =
    "usage: bench gemm [--isa avx512|avx2|both] [--threads N] [--quick] [--filter SUBSTRING]\n"
    "                  [--no-peer]\n"
    "  Tessera's SGEMM on the GPT-2 124M linears (forward, dX, dW at T = 256 and 1024), on their\n"
    "  1D tensor-parallel shards (split 2, 4 and 8 ways), on the LM head at T = 1024 and on\n"
    "  2048^3, beside OpenBLAS's\n"
    "  cblas_sgemm called directly with the same ISA's kernels (SkylakeX for avx512, Haswell for\n"
    "  avx2): GFLOP/s and the ratio (> 1: Tessera is faster)\n"
    "  --isa I        micro-kernel(s) to time (default: the best this CPU runs)\n"
    "  --threads N    CPU threads for both (default: TESSERA_NUM_THREADS or all cores)\n"
    "  --quick        few repetitions (smoke tests); numbers are rough\n"
    "  --filter S     only products whose name contains S (e.g. \"T=1024\", tp4, dW)\n"
    "  --no-peer      skip OpenBLAS\n";

namespace {

using kernels::cpu::detail::GemmIsa;

struct Args {
  std::vector<GemmIsa> isas;
  int threads = 0;  // 0: keep the default
  bool quick = false, peer = true;
  std::string filter;
};

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  // TESSERA_ISA=avx2 rules AVX-512 out as it does for every kernel.
  const bool avx512 = kernels::cpu::cpu_has_avx512();
  std::string isa = avx512 ? "avx512" : "avx2";
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& arg = args.flag();
    if (arg == "--isa") {
      isa = args.value();
    } else if (arg == "--threads") {
      a.threads = int(parse_int(arg, args.value(), 1, 4096));
    } else if (arg == "--quick") {
      a.quick = true;
    } else if (arg == "--filter") {
      a.filter = args.value();
    } else if (arg == "--no-peer") {
      a.peer = false;
    } else {
      throw UsageError("expected an option of bench gemm, got '" + arg + "'");
    }
  }
  if (isa == "avx2" || isa == "both") a.isas.push_back(GemmIsa::kAvx2);
  if (isa == "avx512" || isa == "both") a.isas.push_back(GemmIsa::kAvx512);
  if (a.isas.empty()) throw UsageError("expected --isa avx512, avx2 or both, got '" + isa + "'");
  if (!avx512 && isa != "avx2") {
    throw UsageError("expected --isa avx2 here (no AVX-512, or TESSERA_ISA=avx2), got '" + isa +
                     "'");
  }
  return a;
}

// C (m, n) = op(A) (m, k) op(B) (k, n), row-major, as kernels::cpu::sgemm takes it.
struct GemmCase {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// A linear (in -> out) over `tokens` rows runs three products, with the weight W stored (out, in) as
// Tessera's Linear and torch.nn.Linear store it: y = x W^T, dX = dY W, dW = dY^T X.
void add_linear(std::vector<GemmCase>& cases, const std::string& tag, int64_t tokens, int64_t in,
                int64_t out) {
  const std::string name = "T=" + std::to_string(tokens) + " " + tag + std::to_string(in) + "->" +
                           std::to_string(out);
  for (const GemmCase& g : {GemmCase{name + " fwd", false, true, tokens, out, in},
                            GemmCase{name + " dX", false, false, tokens, in, out},
                            GemmCase{name + " dW", true, false, out, in, tokens}}) {
    // Two splits can cut the same shard (tp4: fc1's 768->768 and fc2's): time it once.
    const bool seen = std::any_of(cases.begin(), cases.end(), [&](const GemmCase& c) {
      return c.trans_a == g.trans_a && c.trans_b == g.trans_b && c.m == g.m && c.n == g.n &&
             c.k == g.k;
    });
    if (!seen) cases.push_back(g);
  }
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  // GPT-2 124M: the fused q|k|v projection, the attention output, the MLP's two linears.
  for (int64_t tokens : {256, 1024}) {
    add_linear(cases, "", tokens, 768, 2304);
    add_linear(cases, "", tokens, 768, 768);
    add_linear(cases, "", tokens, 768, 3072);
    add_linear(cases, "", tokens, 3072, 768);
  }
  // Megatron's split over p ranks: q|k|v and the MLP's first linear by columns (out / p), the
  // attention output and the MLP's second linear by rows (in / p).
  for (int64_t p : {2, 4, 8}) {
    const std::string tag = "tp" + std::to_string(p) + " ";
    add_linear(cases, tag, 1024, 768, 2304 / p);
    add_linear(cases, tag, 1024, 768 / p, 768);
    add_linear(cases, tag, 1024, 768, 3072 / p);
    add_linear(cases, tag, 1024, 3072 / p, 768);
  }
  // The LM head (the tied embedding, 50257 x 768) over 1024 tokens: its three products are a
  // quarter of a 4x256 training step.
  add_linear(cases, "lm_head ", 1024, 768, 50257);
  cases.push_back({"2048^3", false, false, 2048, 2048, 2048});
  return cases;
}

struct Operands {
  std::vector<float> a, b, c;
  int64_t lda, ldb;
};

Operands make_operands(const GemmCase& g) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Operands o{std::vector<float>(g.m * g.k), std::vector<float>(g.k * g.n),
             std::vector<float>(g.m * g.n), g.trans_a ? g.m : g.k, g.trans_b ? g.k : g.n};
  for (float& x : o.a) x = dist(rng);
  for (float& x : o.b) x = dist(rng);
  return o;
}

const char* isa_label(GemmIsa isa) { return isa == GemmIsa::kAvx512 ? "avx512" : "avx2"; }
const char* coretype_of(GemmIsa isa) { return openblas_coretype(isa == GemmIsa::kAvx512); }

double gflops(const GemmCase& g, double seconds) {
  return seconds > 0 ? 2.0 * g.m * g.n * g.k / seconds * 1e-9 : 0.0;
}

// One ISA's table: every case timed on our micro-kernel and on OpenBLAS's (when loaded).
void run_isa(GemmIsa isa, const std::vector<GemmCase>& cases, const Args& args, int threads) {
  const TimingOptions timing = args.quick ? quick_timing() : TimingOptions{};
  std::unique_ptr<OpenBlas> blas;
  std::string reason = "skipped (--no-peer)";
  if (args.peer) blas = OpenBlas::load(coretype_of(isa), threads, &reason);

  std::printf("\n## %s: Tessera's %s micro-kernel vs OpenBLAS ", isa_label(isa), isa_label(isa));
  if (blas) {
    std::printf("%s kernels (%s)\n", blas->corename().c_str(), blas->config().c_str());
  } else {
    std::printf("%s kernels: %s\n", coretype_of(isa), reason.c_str());
  }

  Table table({"product", "M", "N", "K", "Tessera GFLOP/s", "OpenBLAS GFLOP/s", "ratio"});
  for (size_t c = 1; c < 7; ++c) table.align_right(c);
  std::vector<std::pair<double, std::string>> ratios;
  for (const GemmCase& g : cases) {
    Operands o = make_operands(g);
    std::fprintf(stderr, "[bench] gemm %s %s ...\n", isa_label(isa), g.name.c_str());
    auto run_ours = [&] {
      kernels::cpu::detail::sgemm_batched_with_isa(isa, g.trans_a, g.trans_b, 1, g.m, g.n, g.k,
                                                   1.0f, o.a.data(), o.lda, 0, o.b.data(), o.ldb,
                                                   0, 0.0f, o.c.data(), g.n, 0);
    };
    double ours = 0.0, theirs = 0.0;
    if (blas) {
      std::tie(ours, theirs) = paired_median_seconds(
          run_ours,
          [&] {
            blas->sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, o.a.data(), o.lda, o.b.data(),
                        o.ldb, 0.0f, o.c.data(), g.n);
          },
          timing, args.quick ? Handover{0.02, 0.0} : thread_pool_handover());
    } else {
      ours = median_seconds(run_ours, timing);
    }
    std::string ratio = "-", peer = "-";
    if (theirs > 0 && ours > 0) {
      ratios.emplace_back(theirs / ours, g.name);
      ratio = format_number(theirs / ours, 2) + "x";
      peer = format_number(gflops(g, theirs), 1);
    }
    table.add_row({g.name, std::to_string(g.m), std::to_string(g.n), std::to_string(g.k),
                   format_number(gflops(g, ours), 1), peer, ratio});
  }
  std::printf("%s", table.render().c_str());
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const auto& median = ratios[ratios.size() / 2];
    std::printf("ratio over %zu products: median %.2fx, lowest %.2fx (%s), highest %.2fx (%s)\n",
                ratios.size(), median.first, ratios.front().first, ratios.front().second.c_str(),
                ratios.back().first, ratios.back().second.c_str());
  }
}

}  // namespace

int run_gemm_command(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv);
  if (args.threads > 0) set_num_threads(args.threads);
  const int threads = num_threads();
  std::vector<GemmCase> cases;
  for (const GemmCase& g : gemm_cases()) {
    if (g.name.find(args.filter) != std::string::npos) cases.push_back(g);
  }
  if (cases.empty()) {
    throw UsageError("expected --filter '" + args.filter + "' to match a product, got none");
  }
  std::printf("Tessera SGEMM vs OpenBLAS cblas_sgemm, f32, row-major: %d threads, CPU %s",
              threads, cpu_model().c_str());
  const std::string load = load_average();
  if (!load.empty()) std::printf(", load average %s", load.c_str());
  std::printf("%s\n", args.quick ? " (quick: few repetitions)" : "");
  for (GemmIsa isa : args.isas) run_isa(isa, cases, args, threads);
  std::printf(
      "GFLOP/s count 2*M*N*K; times are medians. fwd = x W^T, dX = dY W, dW = dY^T X with W "
      "(out, in); tpP = Megatron's 1D shard over P ranks. ratio = Tessera / OpenBLAS "
      "throughput.\n");
  return 0;
}

}  // namespace tessera::bench
