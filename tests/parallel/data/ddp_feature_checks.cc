// DataParallel's mechanics on every rank: overlap seen in the hook order, exact byte counts,
// parameters without gradients, and the errors misuse gets.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "parallel/data/data_parallel.h"
#include "parallel/data/shard.h"
#include "tests/parallel/data/ddp_check.h"
#include "tests/parallel/data/ddp_checks.h"
#include "tests/parallel/data/ddp_model.h"

namespace tessera::parallel::ddp_testing {
namespace {

constexpr int64_t kGlobalBatch = 24;
constexpr int64_t kSmallCap = 3000;

Tensor local_loss(Mlp& model, const Communicator& data, int64_t step) {
  const ShardRange shard = shard_range(kGlobalBatch, data.rank(), data.size());
  const Batch b = rows(global_batch(step, kGlobalBatch), shard.begin, shard.size());
  return mse_loss(model, b.x, b.y);
}

// Every element of t equals v (within f32 rounding of v).
void check_filled(const Tensor& t, double v, const std::string& what) {
  DDP_CHECK(t.defined(), what, " undefined");
  DDP_CHECK_CLOSE(t, full(t.shape(), v), 1e-6, what);
}

template <typename F>
bool throws_with(F&& fn, const std::string& needle) {
  try {
    fn();
  } catch (const ValueError& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

}  // namespace

void check_overlap(const std::shared_ptr<Communicator>& data) {
  Mlp model(1);
  DataParallel dp(model.named_parameters(), data,
                  {.bucket_cap_bytes = kSmallCap, .record_events = true});
  DDP_CHECK(dp.num_buckets() == 3, "got ", dp.num_buckets(), " buckets");
  const std::vector<std::string> first{"fc3.bias", "fc3.weight", "fc2.bias"};
  DDP_CHECK(dp.bucket_param_names(0) == first, "bucket 0 should hold the last layer's parameters");

  autograd::backward({local_loss(model, *data, 0)});
  const std::vector<SyncEvent> events = dp.events();
  using Kind = SyncEvent::Kind;
  std::vector<int64_t> started;
  size_t first_start = events.size(), last_ready = 0, ready_count = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == Kind::bucket_started) {
      if (started.empty()) first_start = i;
      started.push_back(events[i].index);
    } else if (events[i].kind == Kind::grad_ready) {
      last_ready = i;
      ++ready_count;
    }
  }
  DDP_CHECK(ready_count == 6, "every parameter's hook fires once, got ", ready_count);
  // The point of bucketing: reduction of the first bucket is under way while backward still
  // produces the first layer's gradients.
  DDP_CHECK(first_start < last_ready, "bucket 0 started at event ", first_start,
            ", after the last gradient hook (event ", last_ready, ")");
  DDP_CHECK(started == (std::vector<int64_t>{0, 1, 2}), "all buckets start in order in backward");
  DDP_CHECK(events[last_ready].index == 0 || events[last_ready].index == 1,
            "fc1's gradients arrive last, got parameter ", events[last_ready].index);

  dp.finish_gradient_sync();
  std::vector<int64_t> completed;
  for (const SyncEvent& e : dp.events()) {
    if (e.kind == Kind::bucket_completed) completed.push_back(e.index);
  }
  std::sort(completed.begin(), completed.end());
  DDP_CHECK(completed == (std::vector<int64_t>{0, 1, 2}), "every bucket completes once");
  if (data->rank() == 0) {
    std::printf("ddp: bucket 0 all-reduce started at event %zu, last gradient hook at event %zu\n",
                first_start, last_ready);
  }
}

void check_byte_counts(const std::shared_ptr<Communicator>& data) {
  const int n = data->size();
  Mlp model(2);
  DataParallel dp(model.named_parameters(), data, {.bucket_cap_bytes = kSmallCap});
  int64_t param_bytes = 0;
  for (const Tensor& p : model.parameters()) param_bytes += p.numel() * 4;
  int64_t bucket_bytes = 0, expected_sent = 0;
  for (size_t b = 0; b < dp.num_buckets(); ++b) {
    bucket_bytes += dp.bucket_bytes(b);
    expected_sent += collective_traffic(CommKind::all_reduce, dp.bucket_bytes(b), n, false).sent;
  }
  DDP_CHECK(bucket_bytes == param_bytes, "buckets hold ", bucket_bytes, " bytes of ", param_bytes);
  // Ring all-reduce moves 2 (n - 1) / n of the message each way; these sizes divide exactly.
  DDP_CHECK(expected_sent * n == 2 * (n - 1) * param_bytes, "expected volume ", expected_sent);

  for (int step = 0; step < 2; ++step) {
    for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
    data->reset_stats();
    autograd::backward({local_loss(model, *data, step)});
    dp.finish_gradient_sync();
    const CommStats s = data->stats();
    const CommCounter& ar = s[CommKind::all_reduce];
    DDP_CHECK(ar.calls == int64_t(dp.num_buckets()), "calls ", s.str());
    DDP_CHECK(ar.payload_bytes == param_bytes, "payload ", s.str());
    DDP_CHECK(ar.bytes_sent == expected_sent && ar.bytes_received == expected_sent, "traffic ",
              s.str(), " expected ", expected_sent, " each way");
    DDP_CHECK(s.total().calls == ar.calls, "a step makes only all-reduces, got ", s.str());
  }
  if (data->rank() == 0) {
    std::printf("ddp: a step all-reduces %lld bytes in %zu calls, %lld sent per rank\n",
                static_cast<long long>(param_bytes), dp.num_buckets(),
                static_cast<long long>(expected_sent));
  }
}

void check_unused_parameters(const std::shared_ptr<Communicator>& data) {
  const int n = data->size();
  const double rank1 = data->rank() + 1;  // this rank's rank + 1
  const double mean_rank1 = (n + 1) / 2.0;
  for (int64_t cap : {int64_t(8), int64_t(1) << 20}) {  // one bucket per parameter, or one in all
    Tensor w = ones({4}, {.requires_grad = true});
    Tensor u = ones({3}, {.requires_grad = true});
    Tensor v = ones({2}, {.requires_grad = true});
    DataParallel dp({{"w", w}, {"u", u}, {"v", v}}, data, {.bucket_cap_bytes = cap});
    const std::string where = str_cat(" (", dp.num_buckets(), " buckets)");

    // w used everywhere, v only on rank 0, u nowhere.
    Tensor loss = sum(mul(w, full({4}, rank1)));
    if (data->rank() == 0) loss = add(loss, sum(v));
    autograd::backward({loss});
    dp.finish_gradient_sync();
    check_filled(w.grad(), mean_rank1, "w.grad" + where);
    check_filled(u.grad(), 0.0, "unused u.grad" + where);
    check_filled(v.grad(), 1.0 / n, "rank-0-only v.grad" + where);

    // u used only in a no_sync micro-step: the synced step reduces what it accumulated.
    for (const Tensor& t : {w, u, v}) t.set_grad(Tensor());
    {
      auto guard = dp.no_sync();
      autograd::backward({add(sum(mul(u, full({3}, rank1))), sum(w))});
    }
    autograd::backward({sum(mul(w, full({4}, rank1)))});
    dp.finish_gradient_sync();
    check_filled(w.grad(), mean_rank1 + 1.0, "accumulated w.grad" + where);
    check_filled(u.grad(), mean_rank1, "no_sync-only u.grad" + where);
    check_filled(v.grad(), 0.0, "unused v.grad" + where);
  }
  if (data->rank() == 0) std::printf("ddp: parameters without gradients reduce as zeros\n");
}

void check_errors(const std::shared_ptr<Communicator>& data) {
  Mlp model(3);
  DataParallel dp(model.named_parameters(), data);
  autograd::backward({local_loss(model, *data, 0)});
  DDP_CHECK(throws_with([&] { autograd::backward({local_loss(model, *data, 1)}); }, "no_sync()"),
            "a second synced backward before finish_gradient_sync() should throw");
  dp.finish_gradient_sync();

  Tensor a = ones({2}, {.requires_grad = true});
  DDP_CHECK(throws_with(
                [&] {
                  DataParallel bad({{"a", a}, {"b", a}}, data);
                },
                "twice"),
            "the same tensor twice should throw");
  DDP_CHECK(throws_with(
                [&] {
                  DataParallel bad({{"a", a}}, data, {.completed_after_backward = {"wte.weight"}});
                },
                "'wte.weight', which is not one of the parameters"),
            "completed_after_backward naming an unknown parameter should throw");
  if (data->size() > 1) {
    // Rank 0 holds one more parameter: every rank must fail, none may hang.
    DataParallel::NamedParams params{{"a", a}};
    if (data->rank() == 0) params.push_back({"extra", ones({2}, {.requires_grad = true})});
    DDP_CHECK(throws_with([&] { DataParallel bad(params, data); }, "differ"),
              "ranks with different parameters should all throw");
  }
  if (data->rank() == 0) std::printf("ddp: misuse ends in clear errors\n");
}

}  // namespace tessera::parallel::ddp_testing
