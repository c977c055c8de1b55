// Multi-rank program run by tp_layers_test.sh: the 1D tensor-parallel twins against their serial
// layers from the same seed. Every rank builds the serial layer and its twin; outputs must match
// and every gradient, gathered by its placement, must match the serial one (1e-5 relative), with
// and without dropout, for odd vocabularies (padded) and with data parallelism beside.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/nn/nn.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement_ops.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

namespace {

constexpr double kRel = 1e-5;

// max |a - b| / max(max |b|, tiny): the relative error the 1e-5 bound reads.
double rel_error(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  RANK_CHECK(x.shape() == y.shape(), "shapes ", shape_str(x.shape()), " vs ", shape_str(y.shape()));
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < x.numel(); ++i) {
    diff = std::fmax(diff, std::fabs(double(x.data<float>()[i]) - double(y.data<float>()[i])));
    scale = std::fmax(scale, std::fabs(double(y.data<float>()[i])));
  }
  return diff / scale;
}

void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  const double e = rel_error(got, want);
  RANK_CHECK(e <= kRel, what, ": relative error ", e);
}

// Every parameter's gradient of `twin`, gathered by placement, against `serial`'s.
void check_grads(const nn::Module& twin, const nn::Module& serial, const ParallelContext& ctx,
                 const std::string& what) {
  const auto placements = twin.named_placements();
  const auto params = twin.named_parameters();
  const auto want = serial.named_parameters();
  RANK_CHECK(params.size() == want.size(), what, ": ", params.size(), " vs ", want.size(),
             " parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    RANK_CHECK(params[i].first == want[i].first && placements[i].first == params[i].first, what,
               ": parameter ", params[i].first, " vs ", want[i].first);
    const Tensor full_value = parallel::tensor::gather_full(params[i].second.detach(),
                                                            placements[i].second, ctx);
    check_close(full_value, want[i].second.detach(), what + " value of " + params[i].first);
    RANK_CHECK(params[i].second.grad().defined(), what, ": no gradient for ", params[i].first);
    const Tensor full_grad =
        parallel::tensor::gather_full(params[i].second.grad(), placements[i].second, ctx);
    check_close(full_grad, want[i].second.grad(), what + " gradient of " + params[i].first);
  }
}

gpt::GPTConfig tiny_gpt(int64_t vocab, double dropout) {
  gpt::GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_model = 32;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  return c;
}

// A serial GPT and its tensor-parallel twin from one seed: same weights, loss, logits, gradients.
void check_gpt(const ParallelContext& ctx, int64_t vocab, double dropout, bool tied) {
  const std::string what =
      str_cat("GPT vocab ", vocab, " dropout ", dropout, tied ? " tied" : " untied", " on tp ",
              ctx.config().tensor.size, " x dp ", ctx.config().data);
  gpt::GPTConfig c = tiny_gpt(vocab, dropout);
  c.tie_embeddings = tied;
  Generator g_serial(7), g_twin(7);
  gpt::GPT serial(c, g_serial);
  gpt::GPT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  Tensor ids = randint(0, vocab, {3, 16}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, vocab, {3, 16}, {.dtype = DType::i64}, &data);
  targets.narrow(1, 0, 2).fill_(-100);  // some ignored positions

  manual_seed(5);
  Tensor want = serial.loss(ids, targets);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(ids, targets);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_grads(twin, serial, ctx, what);
  // Full logits (gathered) for generation and evaluation.
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(ids), serial.forward(ids), what + " logits");
}

// The linear pair alone, as MLP uses it, on odd batch shapes.
void check_mlp(const ParallelContext& ctx) {
  const nn::MLPSpec spec{.d_model = 12, .hidden = 8 * ctx.config().tensor.size, .gelu = "none"};
  Generator g1(3), g2(3);
  nn::MLP serial(spec, g1);
  nn::MLP twin(spec, nn::BuildContext(g2, &ctx));
  Generator data(4);
  Tensor x = randn({5, 3, 12}, {}, &data);
  Tensor xs = x.clone(), xt = x.clone();
  xs.set_requires_grad(true);
  xt.set_requires_grad(true);
  Tensor w = randn({5, 3, 12}, {}, &data);
  autograd::backward({sum(mul(serial.forward(xs), w))});
  autograd::backward({sum(mul(twin.forward(xt), w))});
  check_close(xt.grad(), xs.grad(), "MLP input gradient");
  check_grads(twin, serial, ctx, "MLP");
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
    const int n = world->size();
    std::vector<std::pair<int, int>> layouts = {{n, 1}};  // (tensor, data)
    if (n == 4) layouts.push_back({2, 2});
    int cases = 0;
    for (const auto& [tp, dp] : layouts) {
      parallel::ParallelConfig config;
      config.data = dp;
      config.tensor = {tp, "1d", 1};
      ParallelContext ctx(config, world);
      check_mlp(ctx);
      for (double dropout : {0.0, 0.1}) {
        check_gpt(ctx, 64, dropout, /*tied=*/true);
        ++cases;
      }
      check_gpt(ctx, 37, 0.0, /*tied=*/true);   // padded vocabulary
      check_gpt(ctx, 37, 0.1, /*tied=*/false);  // its own head, padded
      cases += 2;
    }
    world->barrier()->wait();
    if (world->rank() == 0)
      std::printf("tp layers: %d GPT cases on %d ranks (%lld checks on rank 0)\n", cases, n,
                  static_cast<long long>(parallel::testing::checks_passed()));
    return 0;
  });
}
