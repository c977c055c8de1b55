// Data-parallel training against one process: every rank also trains the serial reference on the
// whole global batch, so each rank compares its data-parallel losses, gradients and parameters
// with the single-process run directly.
#include <cmath>
#include <cstdio>
#include <string>

#include "autograd/engine.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "parallel/data/data_parallel.h"
#include "parallel/data/shard.h"
#include "tests/parallel/data/ddp_check.h"
#include "tests/parallel/data/ddp_checks.h"
#include "tests/parallel/data/ddp_model.h"

namespace tessera::parallel::ddp_testing {
namespace {

constexpr uint64_t kSeed = 100;
constexpr int64_t kGlobalBatch = 24;
// Small enough to give the Mlp three buckets: {fc3.bias, fc3.weight, fc2.bias}, {fc2.weight},
// {fc1.bias, fc1.weight}.
constexpr int64_t kSmallCap = 3000;
constexpr double kRel = 1e-5;

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, Mlp& model) {
  if (kind == "sgd") {
    return std::make_unique<optim::SGD>(model.parameters(),
                                        optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  }
  return std::make_unique<optim::AdamW>(model.parameters(), optim::AdamWOptions{.lr = 1e-2});
}

// Every parameter of `got` against the same-named one of `want`.
void check_params_close(const Mlp& got, const Mlp& want, double rel, const std::string& what) {
  auto g = got.named_parameters();
  auto w = want.named_parameters();
  DDP_CHECK(g.size() == w.size(), what);
  for (size_t i = 0; i < g.size(); ++i) {
    DDP_CHECK_CLOSE(g[i].second, w[i].second, rel, what, " parameter ", g[i].first);
  }
}

void check_grads_close(const Mlp& got, const Mlp& want, const std::string& what) {
  auto g = got.named_parameters();
  auto w = want.named_parameters();
  for (size_t i = 0; i < g.size(); ++i) {
    DDP_CHECK(g[i].second.grad().defined(), what, " gradient of ", g[i].first, " undefined");
    DDP_CHECK_CLOSE(g[i].second.grad(), w[i].second.grad(), kRel, what, " gradient of ",
                    g[i].first);
  }
}

// Rank 0's value of every parameter, broadcast, equals this rank's exactly.
void check_same_on_all_ranks(const Mlp& model, Communicator& comm, const std::string& what) {
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor root = p.detach().clone();
    comm.broadcast(root, 0)->wait();
    DDP_CHECK_CLOSE(p, root, 0.0, what, " parameter ", name, " differs from rank 0's");
  }
}

Tensor loss_average(const Tensor& local_loss, Communicator& comm) {
  Tensor v = local_loss.detach().clone().reshape({1});
  comm.all_reduce(v, ReduceOp::avg)->wait();
  return v;
}

}  // namespace

void check_broadcast(const std::shared_ptr<Communicator>& data) {
  Mlp model(kSeed + uint64_t(data->rank()));  // different on every rank
  Mlp rank0(kSeed);
  if (data->rank() != 0) {
    auto d = diff(model.named_parameters()[0].second, rank0.named_parameters()[0].second);
    DDP_CHECK(d.max_abs_diff > 0, "ranks should start with different parameters");
  }
  DataParallel dp(model.named_parameters(), data);
  check_params_close(model, rank0, 0.0, "after the broadcast");
}

void check_training(const std::shared_ptr<Communicator>& data, Communicator& world,
                    const std::string& optimizer) {
  const int n = data->size();
  const ShardRange shard = shard_range(kGlobalBatch, data->rank(), n);
  DDP_CHECK(shard.size() * n == kGlobalBatch, "global batch ", kGlobalBatch, " over ", n, " ranks");

  Mlp ref(kSeed);
  Mlp model(kSeed + 7 * uint64_t(data->rank()));
  DataParallel dp(model.named_parameters(), data, {.bucket_cap_bytes = kSmallCap});
  DDP_CHECK(dp.num_buckets() == 3, "got ", dp.num_buckets(), " buckets");
  auto opt_ref = make_optimizer(optimizer, ref);
  auto opt = make_optimizer(optimizer, model);

  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    const Batch global = global_batch(step, kGlobalBatch);
    opt_ref->zero_grad();
    Tensor ref_loss = mse_loss(ref, global.x, global.y);
    autograd::backward({ref_loss});

    const Batch local = rows(global, shard.begin, shard.size());
    opt->zero_grad();
    Tensor loss = mse_loss(model, local.x, local.y);
    autograd::backward({loss});
    dp.finish_gradient_sync();

    const double want = ref_loss.item(), got = loss_average(loss, world).item();
    DDP_CHECK(std::fabs(got - want) <= kRel * std::fabs(want), optimizer, " step ", step, " loss ",
              got, " vs one process ", want);
    check_grads_close(model, ref, str_cat(optimizer, " step ", step));
    opt_ref->step();
    opt->step();
  }
  check_params_close(model, ref, kRel, str_cat(optimizer, " after ", kSteps, " steps"));
  check_same_on_all_ranks(model, *data, optimizer);
  if (data->rank() == 0) {
    std::printf("ddp: %s training on %d ranks matches one process over %d steps\n",
                optimizer.c_str(), n, kSteps);
  }
}

void check_accumulation(const std::shared_ptr<Communicator>& data) {
  const int n = data->size();
  constexpr int kMicro = 3;
  const ShardRange shard = shard_range(kGlobalBatch, data->rank(), n);
  const int64_t micro = shard.size() / kMicro;
  DDP_CHECK(micro * kMicro == shard.size(), "shard ", shard.size(), " over ", kMicro, " micro");

  Mlp ref(kSeed);
  Mlp model(kSeed + 3 * uint64_t(data->rank()));
  DataParallel dp(model.named_parameters(), data, {.bucket_cap_bytes = kSmallCap});
  auto opt_ref = make_optimizer("sgd", ref);
  auto opt = make_optimizer("sgd", model);

  for (int step = 0; step < 2; ++step) {
    const Batch global = global_batch(10 + step, kGlobalBatch);
    opt_ref->zero_grad();
    autograd::backward({mse_loss(ref, global.x, global.y)});

    opt->zero_grad();
    data->reset_stats();
    for (int m = 0; m < kMicro; ++m) {
      const Batch b = rows(global, shard.begin + m * micro, micro);
      // Each micro-batch's mean / kMicro: the sum over micro-steps is the shard's mean.
      Tensor loss = div(mse_loss(model, b.x, b.y), double(kMicro));
      if (m + 1 < kMicro) {
        auto guard = dp.no_sync();
        DDP_CHECK(!dp.sync_enabled(), "no_sync should disable sync");
        autograd::backward({loss});
        dp.finish_gradient_sync();  // does nothing under no_sync
        DDP_CHECK(data->stats()[CommKind::all_reduce].calls == 0, "micro-step ", m,
                  " communicated under no_sync");
      } else {
        DDP_CHECK(dp.sync_enabled(), "the guard should have restored sync");
        autograd::backward({loss});
        bool threw = false;
        try {
          auto late = dp.no_sync();
        } catch (const ValueError& e) {
          threw = std::string(e.what()).find("finish_gradient_sync") != std::string::npos;
        }
        DDP_CHECK(threw, "no_sync() during a synced step should throw naming finish_gradient_sync");
        dp.finish_gradient_sync();
      }
    }
    DDP_CHECK(data->stats()[CommKind::all_reduce].calls == int64_t(dp.num_buckets()),
              "one all-reduce per bucket per step, got ", data->stats().str());
    check_grads_close(model, ref, str_cat("accumulation step ", step));
    opt_ref->step();
    opt->step();
  }
  check_params_close(model, ref, kRel, "after accumulation steps");
  if (data->rank() == 0) {
    std::printf("ddp: %d no_sync micro-steps + 1 synced == one big batch on %d ranks\n", kMicro - 1,
                n);
  }
}

}  // namespace tessera::parallel::ddp_testing
