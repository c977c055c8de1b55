// Multi-rank program run by tp_layers_test.sh: the 1D tensor-parallel twins against their serial
// layers from the same seed. Every rank builds the serial layer and its twin; outputs must match
// and every gradient, gathered by its placement, must match the serial one (1e-5 relative), with
// and without dropout, for odd vocabularies (padded) and with data parallelism beside; all of it
// again with sequence parallelism (parallel.tensor.sequence_parallel), whose activation bytes per
// rank (the allocator's counters) are printed beside those without and must be smaller. BERT
// (post-LN, key-padding mask, masked-LM and classification heads) and ViT (class token) twins
// likewise, sequence parallel too: their loss and every gradient equal the serial model's.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/bert/bert.h"
#include "models/gpt/gpt.h"
#include "models/nn/nn.h"
#include "models/vit/vit.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement_ops.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

using parallel::testing::check_close;
using parallel::testing::rel_error;

namespace {



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
void check_gpt(const ParallelContext& ctx, int64_t vocab, double dropout, bool tied,
               bool checkpoint = false) {
  const bool sp = ctx.config().tensor.sequence_parallel;
  const std::string what =
      str_cat("GPT vocab ", vocab, " dropout ", dropout, tied ? " tied" : " untied", " on tp ",
              ctx.config().tensor.size, " x dp ", ctx.config().data, sp ? " sequence parallel" : "",
              checkpoint ? " checkpointed" : "");
  gpt::GPTConfig c = tiny_gpt(vocab, dropout);
  c.tie_embeddings = tied;
  c.checkpoint = checkpoint;
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
  if (!sp) return;
  // A window of 7 tokens (generation) is padded to a multiple of the tensor size outside
  // training; the causal logits of its 7 positions are the serial ones.
  Tensor odd = ids.narrow(1, 0, 7).contiguous();
  check_close(twin.forward(odd), serial.forward(odd), what + " logits of T 7 (padded)");
  // In training T must split over the group: every rank refuses before any collective.
  twin.train();
  std::string error;
  try {
    twin.loss(odd, targets.narrow(1, 0, 7).contiguous());
  } catch (const std::exception& e) {
    error = e.what();
  }
  RANK_CHECK(error.find("expected the sequence length T 7 divisible by parallel.tensor.size") !=
                 std::string::npos,
             what, ": T 7 gave '", error, "'");
}

// The message of what `fn` throws ("" when it does not).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string layout_name(const ParallelContext& ctx) {
  return str_cat(" on tp ", ctx.config().tensor.size, " x dp ", ctx.config().data,
                 ctx.config().tensor.sequence_parallel ? " sequence parallel" : "");
}

bert::BertConfig tiny_bert(double dropout) {
  bert::BertConfig c;
  c.vocab_size = 37;  // padded under tensor parallelism
  c.max_positions = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_model = 32;
  c.mlp_hidden = 64;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  c.num_labels = 3;
  return c;
}

// A serial BERT and its twin from one seed: the masked-LM plus classification loss over a batch
// with padding (key_padding_mask), with and without token types, and every gradient; then the
// eval logits of both heads.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const bool sp = ctx.config().tensor.sequence_parallel;
  const std::string what = str_cat("BERT dropout ", dropout, token_types ? " token types" : "",
                                   layout_name(ctx));
  const bert::BertConfig c = tiny_bert(dropout);
  Generator g_serial(7), g_twin(7);
  bert::Bert serial(c, g_serial);
  bert::Bert twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  const int64_t t = 16;
  Tensor ids = randint(0, c.vocab_size, {3, t}, {.dtype = DType::i64}, &data);
  Tensor types =
      token_types ? randint(0, c.type_vocab_size, {3, t}, {.dtype = DType::i64}, &data) : Tensor();
  Tensor mask = ones({3, t}, {.dtype = DType::i64});
  mask.narrow(0, 1, 1).narrow(1, 10, t - 10).fill_(0);  // row 1: 6 padding positions at the end
  mask.narrow(0, 2, 1).narrow(1, 13, t - 13).fill_(0);
  Tensor labels = randint(0, c.vocab_size, {3, t}, {.dtype = DType::i64}, &data);
  labels.narrow(1, 0, 3).fill_(-100);  // some positions not masked
  Tensor classes = randint(0, c.num_labels, {3}, {.dtype = DType::i64}, &data);
  auto loss = [&](bert::Bert& m) {
    Tensor h = m.forward(ids, types, mask);
    return m.mlm_loss(h, labels) + m.classification_loss(h, classes);
  };
  manual_seed(5);
  Tensor want = loss(serial);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = loss(twin);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_grads(twin, serial, ctx, what);
  {
    autograd::NoGradGuard no_grad;
    serial.eval();
    twin.eval();
    Tensor hs = serial.forward(ids, types, mask), ht = twin.forward(ids, types, mask);
    check_close(ht, hs, what + " hidden states (gathered)");
    check_close(twin.mlm_logits(ht), serial.mlm_logits(hs), what + " masked-LM logits");
    check_close(twin.classify(ht), serial.classify(hs), what + " classification logits");
  }
  if (!sp) return;
  // T must split over the group: every rank refuses before any collective.
  Tensor odd = ids.narrow(1, 0, 7).contiguous();
  const std::string error = error_of([&] { twin.forward(odd); });
  RANK_CHECK(error.find(str_cat("expected the sequence length T 7 divisible by "
                                "parallel.tensor.size ",
                                ctx.config().tensor.size)) != std::string::npos,
             what, ": T 7 gave '", error, "'");
}

vit::ViTConfig tiny_vit(double dropout) {
  vit::ViTConfig c;
  c.image_size = 12;
  c.patch_size = 4;  // 9 patches + the class token: 10 tokens
  c.in_channels = 3;
  c.num_classes = 5;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_model = 32;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  return c;
}

// A serial ViT and its twin from one seed: loss and every gradient. Under sequence parallelism
// the 10 tokens split over 2 ranks; on 4 (no square grid plus one divides by 4) the twin refuses
// at construction, naming the numbers.
void check_vit(const ParallelContext& ctx, double dropout) {
  const bool sp = ctx.config().tensor.sequence_parallel;
  const int p = ctx.config().tensor.size;
  const std::string what = str_cat("ViT dropout ", dropout, layout_name(ctx));
  const vit::ViTConfig c = tiny_vit(dropout);
  Generator g_serial(7), g_twin(7);
  vit::ViT serial(c, g_serial);
  if (sp && (c.num_patches() + 1) % p != 0) {
    const std::string error = error_of([&] { vit::ViT twin(c, nn::BuildContext(g_twin, &ctx)); });
    RANK_CHECK(error.find(str_cat("num_patches + 1 = 9 + 1 = 10, image_size 12 / patch_size 4 "
                                  "squared, plus the class token) divisible by "
                                  "parallel.tensor.size ",
                                  p)) != std::string::npos,
               what, ": 10 tokens on ", p, " ranks gave '", error, "'");
    return;
  }
  vit::ViT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  Tensor images = randn({3, 3, 12, 12}, {}, &data);
  Tensor labels = randint(0, c.num_classes, {3}, {.dtype = DType::i64}, &data);
  manual_seed(5);
  Tensor want = serial.loss(images, labels);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(images, labels);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_grads(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(images), serial.forward(images), what + " logits");
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

// The MLP pair on sequence shards: rank r's rows of x in, its rows of the serial output out,
// its rows of the input gradient, and every parameter's serial gradient (c_proj's bias summed).
void check_mlp_sequence_parallel(const ParallelContext& ctx) {
  const int p = ctx.config().tensor.size, r = ctx.tensor_group()->rank();
  const int64_t rows = 3;  // per rank: T = 3 P
  const nn::MLPSpec spec{.d_model = 12, .hidden = 8 * p, .gelu = "none"};
  Generator g1(3), g2(3);
  nn::MLP serial(spec, g1);
  nn::MLP twin(spec, nn::BuildContext(g2, &ctx));
  Generator data(4);
  Tensor x = randn({5, rows * p, 12}, {}, &data);
  Tensor w = randn({5, rows * p, 12}, {}, &data);
  Tensor xs = x.clone(), xt = x.narrow(1, r * rows, rows).clone();
  xs.set_requires_grad(true);
  xt.set_requires_grad(true);
  Tensor ys = serial.forward(xs), yt = twin.forward(xt);
  check_close(yt, ys.narrow(1, r * rows, rows), "MLP sequence parallel output rows");
  autograd::backward({sum(mul(ys, w))});
  autograd::backward({sum(mul(yt, w.narrow(1, r * rows, rows)))});
  check_close(xt.grad(), xs.grad().narrow(1, r * rows, rows),
              "MLP sequence parallel input gradient");
  check_grads(twin, serial, ctx, "MLP sequence parallel");
}

// dropout_slice of a (B, T, C) tensor's rows equals those rows of the whole tensor's dropout
// (forward and backward, exactly) and advances the generator by the whole tensor's counters.
void check_dropout_slice() {
  Generator data(9);
  Tensor x = randn({3, 8, 5}, {}, &data);
  Generator g_whole(21);
  Tensor xw = x.clone();
  xw.set_requires_grad(true);
  Tensor whole = dropout(xw, 0.3, true, &g_whole);
  autograd::backward({sum(whole)});
  for (int64_t start : {0, 2, 6}) {
    Generator g(21);
    Tensor xs = x.narrow(1, start, 2).clone();
    xs.set_requires_grad(true);
    Tensor part = dropout_slice(xs, 0.3, {.dim = 1, .size = 8, .start = start}, true, &g);
    autograd::backward({sum(part)});
    RANK_CHECK(g.offset() == g_whole.offset(), "dropout_slice reserved ", g.offset(),
               " counters, the whole dropout ", g_whole.offset());
    RANK_CHECK(rel_error(part, whole.narrow(1, start, 2)) == 0.0, "dropout_slice rows ", start,
               " differ from the whole tensor's");
    RANK_CHECK(rel_error(xs.grad(), xw.grad().narrow(1, start, 2)) == 0.0,
               "dropout_slice gradient rows ", start, " differ from the whole tensor's");
  }
}

// Bytes a GPT twin's training step allocates on this rank beyond what it held before: kept
// after the forward (the activations saved for backward), and the peak over forward and over
// forward + backward (gradients included: the same shards with and without sequence parallelism).
struct ActivationBytes {
  int64_t kept = 0, forward_peak = 0, step_peak = 0;
};

ActivationBytes activation_bytes(const ParallelContext& ctx, bool sequence_parallel) {
  parallel::ParallelConfig config = ctx.config();
  config.tensor.sequence_parallel = sequence_parallel;
  ParallelContext c(config, ctx.world());
  gpt::GPTConfig g = tiny_gpt(64, 0.1);
  g.context_length = 64;
  g.d_model = 64;
  Generator gen(7);
  gpt::GPT model(g, nn::BuildContext(gen, &c));
  Generator data(11);
  Tensor ids = randint(0, 64, {4, 64}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, 64, {4, 64}, {.dtype = DType::i64}, &data);
  ActivationBytes bytes;
  const int64_t base = memory_stats(kCPU).current_bytes;
  reset_peak_memory(kCPU);
  {
    manual_seed(5);
    Tensor loss = model.loss(ids, targets);
    bytes.kept = memory_stats(kCPU).current_bytes - base;
    bytes.forward_peak = memory_stats(kCPU).peak_bytes - base;
    autograd::backward({loss});
  }
  bytes.step_peak = memory_stats(kCPU).peak_bytes - base;
  return bytes;
}

void check_activation_memory(const ParallelContext& ctx) {
  const ActivationBytes off = activation_bytes(ctx, false), on = activation_bytes(ctx, true);
  const int p = ctx.config().tensor.size;
  if (ctx.world()->rank() == 0)
    std::printf(
        "activation bytes per rank, GPT d_model 64, 2 layers, B 4, T 64 on tp %d: kept after "
        "forward %lld -> %lld with sequence parallel, forward peak %lld -> %lld, step peak "
        "%lld -> %lld\n",
        p, static_cast<long long>(off.kept), static_cast<long long>(on.kept),
        static_cast<long long>(off.forward_peak), static_cast<long long>(on.forward_peak),
        static_cast<long long>(off.step_peak), static_cast<long long>(on.step_peak));
  RANK_CHECK(on.kept < off.kept, "sequence parallel kept ", on.kept,
             " bytes after forward, not below ", off.kept);
  RANK_CHECK(on.forward_peak < off.forward_peak, "sequence parallel forward peak ", on.forward_peak,
             " bytes, not below ", off.forward_peak);
  RANK_CHECK(on.step_peak < off.step_peak, "sequence parallel step peak ", on.step_peak,
             " bytes, not below ", off.step_peak);
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
    const int n = world->size();
    struct Layout {
      int tensor, data;
      bool sequence_parallel;
    };
    std::vector<Layout> layouts = {{n, 1, false}, {n, 1, true}};
    if (n == 4) layouts.insert(layouts.end(), {{2, 2, false}, {2, 2, true}});
    check_dropout_slice();
    int cases = 0, sp_cases = 0, other_cases = 0, other_sp_cases = 0;
    for (const auto& [tp, dp, sp] : layouts) {
      parallel::ParallelConfig config;
      config.data = dp;
      config.tensor = {.size = tp, .mode = "1d", .depth = 1, .sequence_parallel = sp};
      ParallelContext ctx(config, world);
      if (sp) {
        check_mlp_sequence_parallel(ctx);
        if (dp == 1) check_activation_memory(ctx);
      } else {
        check_mlp(ctx);
      }
      for (double dropout : {0.0, 0.1}) {
        check_gpt(ctx, 64, dropout, /*tied=*/true);
        ++cases;
      }
      check_gpt(ctx, 37, 0.0, /*tied=*/true);   // padded vocabulary
      check_gpt(ctx, 37, 0.1, /*tied=*/false);  // its own head, padded
      cases += 2;
      if (sp) {  // blocks recomputed in backward: their gathers and reduce-scatters run again
        check_gpt(ctx, 64, 0.1, /*tied=*/true, /*checkpoint=*/true);
        ++cases;
        sp_cases += 5;
      }
      for (double dropout : {0.0, 0.1}) check_bert(ctx, dropout, /*token_types=*/dropout > 0.0);
      check_bert(ctx, 0.1, /*token_types=*/false);
      check_vit(ctx, 0.0);
      check_vit(ctx, 0.1);
      other_cases += 5;
      if (sp) other_sp_cases += 5;
    }
    world->barrier()->wait();
    if (world->rank() == 0)
      std::printf("tp layers: %d GPT cases (%d sequence parallel), %d BERT and ViT cases (%d "
                  "sequence parallel) on %d ranks (%lld checks on rank 0)\n",
                  cases, sp_cases, other_cases, other_sp_cases, n,
                  static_cast<long long>(parallel::testing::checks_passed()));
    return 0;
  });
}
